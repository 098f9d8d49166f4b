#include "ir/text_lexer.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstring>

namespace opfuse::text {
namespace {

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_alpha(c) || is_digit(c) || c == '.'; }

// Words with a meaning in the syntax; printed quoted when they are names, so that an op called
// "const" cannot be mistaken for a constant.
constexpr std::array<std::string_view, 15> kKeywords = {
    "graph", "opset", "const", "return", "_",     "inf",   "nan",   "true",
    "false", "elided", "splat", "tensor", "ints", "floats", "strings"};

std::string char_for_message(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string(1, c);
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", u);
  return buf;
}

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  Result<std::vector<Token>> run() {
    std::vector<Token> tokens;
    while (true) {
      skip_space_and_comments();
      Token t;
      t.line = line_;
      t.column = column_;
      if (pos_ >= text_.size()) {
        tokens.push_back(std::move(t));
        return tokens;
      }
      const char c = text_[pos_];
      if (c == '%' || c == '@' || c == '#') {
        t.kind = c == '%' ? TokenKind::kValueName
                          : c == '@' ? TokenKind::kGraphName : TokenKind::kNodeName;
        advance();
        if (pos_ < text_.size() && text_[pos_] == '"') {
          OPFUSE_ASSIGN_OR_RETURN(t.text, read_string());
        } else {
          t.text = read_while(is_name_char);
          if (t.text.empty()) return error_at(t, str_cat("expected a name after '", c, "'"));
        }
      } else if (c == '"') {
        t.kind = TokenKind::kString;
        OPFUSE_ASSIGN_OR_RETURN(t.text, read_string());
      } else if (is_alpha(c)) {
        t.kind = TokenKind::kIdent;
        t.text = read_while(is_name_char);
      } else if (is_digit(c) || (c == '-' && pos_ + 1 < text_.size() && is_digit(text_[pos_ + 1]))) {
        t.kind = TokenKind::kNumber;
        t.text = read_number();
      } else if (c == ':' && pos_ + 1 < text_.size() && text_[pos_ + 1] == ':') {
        t.kind = TokenKind::kPunct;
        t.text = "::";
        advance();
        advance();
      } else if (std::strchr("()[]{}<>,:=?*-", c) != nullptr && c != '\0') {
        t.kind = TokenKind::kPunct;
        t.text = std::string(1, c);
        advance();
      } else {
        return error_at(t, str_cat("unexpected character '", char_for_message(c), "'"));
      }
      tokens.push_back(std::move(t));
    }
  }

 private:
  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
    ++pos_;
  }

  void skip_space_and_comments() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
        while (pos_ < text_.size() && text_[pos_] != '\n') advance();
      } else {
        return;
      }
    }
  }

  template <typename Pred>
  std::string read_while(Pred pred) {
    const size_t start = pos_;
    while (pos_ < text_.size() && pred(text_[pos_])) advance();
    return std::string(text_.substr(start, pos_ - start));
  }

  std::string read_number() {
    const size_t start = pos_;
    if (text_[pos_] == '-') advance();
    read_while(is_digit);
    if (pos_ < text_.size() && text_[pos_] == '.') {
      advance();
      read_while(is_digit);
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      // Only an exponent if digits follow; otherwise the 'e' starts the next token.
      size_t look = pos_ + 1;
      if (look < text_.size() && (text_[look] == '+' || text_[look] == '-')) ++look;
      if (look < text_.size() && is_digit(text_[look])) {
        while (pos_ < look) advance();
        read_while(is_digit);
      }
    }
    return std::string(text_.substr(start, pos_ - start));
  }

  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  Result<std::string> read_string() {
    Token start;
    start.line = line_;
    start.column = column_;
    advance();  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') {
        return error_at(start, "unterminated string");
      }
      const char c = text_[pos_];
      if (c == '"') {
        advance();
        return out;
      }
      if (c != '\\') {
        out += c;
        advance();
        continue;
      }
      Token esc;
      esc.line = line_;
      esc.column = column_;
      advance();
      if (pos_ >= text_.size()) return error_at(start, "unterminated string");
      const char e = text_[pos_];
      advance();
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'x': {
          const int hi = pos_ < text_.size() ? hex_value(text_[pos_]) : -1;
          const int lo = pos_ + 1 < text_.size() ? hex_value(text_[pos_ + 1]) : -1;
          if (hi < 0 || lo < 0) return error_at(esc, "expected two hex digits after \\x");
          advance();
          advance();
          out += static_cast<char>(hi * 16 + lo);
          break;
        }
        default:
          return error_at(esc, str_cat("unknown escape '\\", char_for_message(e),
                                       "' (use \\\" \\\\ \\n \\t \\r or \\xHH)"));
      }
    }
  }

  static Status error_at(const Token& at, const std::string& message) {
    return Status::user_error(str_cat("line ", at.line, ":", at.column, ": ", message));
  }

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  int column_ = 1;
};

// Shortest of %.{1..max}g that reads back to the same value under `same`.
template <typename Same>
std::string shortest_general(double v, int max_digits, Same same) {
  char buf[64];
  for (int digits = 1; digits <= max_digits; ++digits) {
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, digits);
    if (ec != std::errc()) continue;
    std::string s(buf, end);
    if (same(s)) return s;
  }
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 17);
  return std::string(buf, ec == std::errc() ? end : buf);
}

}  // namespace

Result<std::vector<Token>> lex(std::string_view text) { return Lexer(text).run(); }

std::string describe_token(const Token& token) {
  auto clip = [](const std::string& s) { return s.size() > 40 ? s.substr(0, 40) + "..." : s; };
  switch (token.kind) {
    case TokenKind::kEnd: return "end of input";
    case TokenKind::kString: return str_cat("string ", clip(quote(token.text)));
    case TokenKind::kValueName: return str_cat("'", clip(sigil_name('%', token.text)), "'");
    case TokenKind::kGraphName: return str_cat("'", clip(sigil_name('@', token.text)), "'");
    case TokenKind::kNodeName: return str_cat("'", clip(sigil_name('#', token.text)), "'");
    default: return str_cat("'", clip(token.text), "'");
  }
}

bool is_bare_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!is_name_char(c)) return false;
  }
  return true;
}

bool is_bare_ident(std::string_view word) {
  if (word.empty() || !is_alpha(word[0]) || !is_bare_name(word)) return false;
  for (std::string_view k : kKeywords) {
    if (word == k) return false;
  }
  return true;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", u);
          out += buf;
        } else {
          out += c;  // UTF-8 stays readable
        }
    }
  }
  return out + "\"";
}

std::string sigil_name(char sigil, std::string_view name) {
  std::string out(1, sigil);
  out += is_bare_name(name) ? std::string(name) : quote(name);
  return out;
}

std::string ident_or_quoted(std::string_view word) {
  return is_bare_ident(word) ? std::string(word) : quote(word);
}

std::string format_float(float v, bool force_float) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  std::string s(buf, ec == std::errc() ? end : buf);
  if (force_float && s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, ec == std::errc() ? end : buf);
}

std::string format_half(Half h) {
  const float f = half_to_float(h);
  if (std::isnan(f) || std::isinf(f)) return format_float(f);
  // The parser reads f16 text as a float and rounds it to half, so pick the shortest decimal
  // that survives that trip ("0.1" rather than the float "0.099975586"), unless the float's own
  // shortest form is shorter ("65504" rather than "6.55e+04").
  std::string digits = shortest_general(f, 9, [&](const std::string& s) {
    float back = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), back);
    return ec == std::errc() && float_to_half(back).bits == h.bits;
  });
  std::string exact = format_float(f);
  return exact.size() <= digits.size() ? exact : digits;
}

}  // namespace opfuse::text
