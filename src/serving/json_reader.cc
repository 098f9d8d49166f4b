#include "serving/json_reader.h"

#include <charconv>

namespace opfuse::serving {
namespace {

using nlohmann::json;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  Result<json> document() {
    json value;
    OPFUSE_TRY(read_value(value, 0));
    skip_space();
    if (pos_ != text_.size()) return error("the end of the document");
    return value;
  }

 private:
  Status error(std::string_view expected) const {
    std::string found = pos_ < text_.size() ? str_cat("'", text_.substr(pos_, 1), "'") : "the end";
    if (pos_ < text_.size() && (static_cast<unsigned char>(text_[pos_]) < 0x20 || text_[pos_] == 0x7f)) {
      found = str_cat("byte ", static_cast<int>(static_cast<unsigned char>(text_[pos_])));
    }
    return Status::user_error(str_cat("malformed JSON at byte ", pos_, ": expected ", expected, ", found ", found));
  }

  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }

  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  bool consume_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Status read_value(json& out, int depth) {
    if (depth > kMaxJsonDepth) {
      return Status::user_error(str_cat("malformed JSON at byte ", pos_, ": nested deeper than ", kMaxJsonDepth, " levels"));
    }
    skip_space();
    if (pos_ >= text_.size()) return error("a value");
    const char c = text_[pos_];
    if (c == '[') return read_array(out, depth);
    if (c == '{') return read_object(out, depth);
    if (c == '"') {
      std::string s;
      OPFUSE_TRY(read_string(s));
      out = std::move(s);
      return Status::ok();
    }
    if (c == '-' || is_digit(c)) return read_number(out);
    if (consume_word("true")) {
      out = true;
    } else if (consume_word("false")) {
      out = false;
    } else if (consume_word("null")) {
      out = nullptr;
    } else {
      return error("a value");
    }
    return Status::ok();
  }

  Status read_array(json& out, int depth) {
    ++pos_;  // '['
    out = json::array();
    auto& items = out.get_ref<json::array_t&>();
    if (consume(']')) return Status::ok();
    do {
      items.emplace_back();
      OPFUSE_TRY(read_value(items.back(), depth + 1));
    } while (consume(','));
    if (!consume(']')) return error("',' or ']'");
    return Status::ok();
  }

  Status read_object(json& out, int depth) {
    ++pos_;  // '{'
    out = json::object();
    if (consume('}')) return Status::ok();
    do {
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '"') return error("a string key");
      std::string key;
      OPFUSE_TRY(read_string(key));
      if (!consume(':')) return error("':'");
      json value;
      OPFUSE_TRY(read_value(value, depth + 1));
      out[key] = std::move(value);  // a repeated key keeps the last value, as nlohmann does
    } while (consume(','));
    if (!consume('}')) return error("',' or '}'");
    return Status::ok();
  }

  // The JSON number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
  Status read_number(json& out) {
    const size_t start = pos_;
    if (text_[pos_] == '-') ++pos_;
    if (pos_ >= text_.size() || !is_digit(text_[pos_])) return error("a digit");
    if (text_[pos_] == '0') {
      ++pos_;
    } else {
      while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
    }
    bool integral = true;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      integral = false;
      ++pos_;
      if (pos_ >= text_.size() || !is_digit(text_[pos_])) return error("a digit after '.'");
      while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (pos_ >= text_.size() || !is_digit(text_[pos_])) return error("a digit in the exponent");
      while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    if (integral) {
      // Integers keep their exact value while it fits (INT64 and UINT64 data need it).
      if (*first == '-') {
        int64_t v = 0;
        if (std::from_chars(first, last, v).ec == std::errc()) {
          out = v;
          return Status::ok();
        }
      } else {
        uint64_t v = 0;
        if (std::from_chars(first, last, v).ec == std::errc()) {
          out = v;
          return Status::ok();
        }
      }
    }
    double v = 0;
    auto [end, ec] = std::from_chars(first, last, v);
    if (ec == std::errc::result_out_of_range) {
      return Status::user_error(str_cat("malformed JSON at byte ", start, ": the number ",
                                        text_.substr(start, std::min<size_t>(pos_ - start, 40)),
                                        " is out of the range of a double"));
    }
    if (ec != std::errc() || end != last) return error("a number");
    out = v;
    return Status::ok();
  }

  Status read_hex4(uint32_t& out) {
    if (pos_ + 4 > text_.size()) return error("four hex digits");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_];
      uint32_t d;
      if (is_digit(c)) {
        d = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        d = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        d = c - 'A' + 10;
      } else {
        return error("a hex digit");
      }
      out = out * 16 + d;
      ++pos_;
    }
    return Status::ok();
  }

  static void append_utf8(std::string& s, uint32_t cp) {
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // One UTF-8 sequence starting at pos_ (its lead byte >= 0x80), copied when valid: the shortest
  // form, no surrogates, at most U+10FFFF.
  Status read_utf8(std::string& s) {
    const auto lead = static_cast<unsigned char>(text_[pos_]);
    int extra;
    uint32_t cp, min;
    if ((lead & 0xE0) == 0xC0) {
      extra = 1, cp = lead & 0x1F, min = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      extra = 2, cp = lead & 0x0F, min = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      extra = 3, cp = lead & 0x07, min = 0x10000;
    } else {
      return error("valid UTF-8");
    }
    if (pos_ + extra >= text_.size()) return error("valid UTF-8");
    for (int i = 1; i <= extra; ++i) {
      const auto b = static_cast<unsigned char>(text_[pos_ + i]);
      if ((b & 0xC0) != 0x80) return error("valid UTF-8");
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return error("valid UTF-8");
    s.append(text_.substr(pos_, extra + 1));
    pos_ += extra + 1;
    return Status::ok();
  }

  Status read_string(std::string& s) {
    ++pos_;  // '"'
    while (true) {
      // Copy the run of plain characters at once.
      const size_t run = pos_;
      while (pos_ < text_.size()) {
        const auto c = static_cast<unsigned char>(text_[pos_]);
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
        ++pos_;
      }
      s.append(text_.substr(run, pos_ - run));
      if (pos_ >= text_.size()) return error("'\"' closing the string");
      const auto c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return Status::ok();
      }
      if (c < 0x20) return error("an escaped control character");
      if (c >= 0x80) {
        OPFUSE_TRY(read_utf8(s));
        continue;
      }
      ++pos_;  // '\\'
      if (pos_ >= text_.size()) return error("an escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"': s += '"'; break;
        case '\\': s += '\\'; break;
        case '/': s += '/'; break;
        case 'b': s += '\b'; break;
        case 'f': s += '\f'; break;
        case 'n': s += '\n'; break;
        case 'r': s += '\r'; break;
        case 't': s += '\t'; break;
        case 'u': {
          uint32_t cp = 0;
          OPFUSE_TRY(read_hex4(cp));
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // a high surrogate: its low half must follow
            uint32_t low = 0;
            if (!consume_word("\\u")) return error("the low half of a surrogate pair");
            OPFUSE_TRY(read_hex4(low));
            if (low < 0xDC00 || low > 0xDFFF) return error("the low half of a surrogate pair");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return error("a high surrogate before a low one");
          }
          append_utf8(s, cp);
          break;
        }
        default: --pos_; return error("an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u)");
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

Result<nlohmann::json> parse_json(std::string_view text) { return Reader(text).document(); }

}  // namespace opfuse::serving
