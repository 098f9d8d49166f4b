// The parser half of the text IR (docs/text-ir.md). A hand-written recursive-descent parser over
// a token vector. The grammar has no nesting beyond one level of lists, so nothing recurses and
// no input can blow the stack; every token access is bounds-checked (the stream ends in kEnd and
// the cursor never moves past it). Errors carry the line:column of the offending token.
#include <charconv>
#include <cstring>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "ir/text_format.h"
#include "ir/text_lexer.h"
#include "ops/registry.h"

namespace opfuse {
namespace {

using text::describe_token;
using text::Token;
using text::TokenKind;

// One element of a list: a number, true/false, inf/nan (maybe negated) or a string.
struct Literal {
  enum Kind { kNumber, kInf, kNan, kTrue, kFalse, kString } kind = kNumber;
  bool negative = false;  // for kInf / kNan
  Token token;            // for positions; its text is the number or string

  bool looks_float() const {
    return kind == kInf || kind == kNan ||
           (kind == kNumber && token.text.find_first_of(".eE") != std::string::npos);
  }
};

struct TypeSpec {
  DType dtype = DType::kUndefined;
  std::optional<Shape> shape;
  bool present = false;
};

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const ParseOptions& options)
      : tokens_(tokens), options_(options) {}

  Result<Graph> run() {
    OPFUSE_TRY(parse_graph_text());
    if (peek().kind != TokenKind::kEnd) return expected("end of input", "after the graph");
    return std::move(graph_);
  }

 private:
  Status parse_graph_text() {
    OPFUSE_TRY(expect_keyword("graph", "at the start of the text"));
    if (peek().kind != TokenKind::kGraphName) return expected("a graph name like @main", "after 'graph'");
    graph_.name = next().text;
    if (is_keyword("opset")) OPFUSE_TRY(parse_opsets());
    OPFUSE_TRY(expect_punct("(", "after the graph name"));
    if (!is_punct(")")) {
      do {
        OPFUSE_TRY(parse_input());
      } while (accept_punct(","));
    }
    OPFUSE_TRY(expect_punct(")", "after inputs"));
    if (is_keyword("captures")) {
      next();
      const Token count = peek();
      OPFUSE_ASSIGN_OR_RETURN(Literal lit, parse_literal());
      OPFUSE_ASSIGN_OR_RETURN(int64_t n, to_int64(lit.token, "the number of captured inputs"));
      if (n < 0 || static_cast<size_t>(n) > graph_.inputs().size()) {
        return error_at(count, str_cat("captures ", n, ": the graph has ", graph_.inputs().size(), " inputs"));
      }
      graph_.captured_inputs = static_cast<size_t>(n);
    }
    OPFUSE_TRY(expect_punct("{", "to open the graph body"));
    while (!is_keyword("return")) OPFUSE_TRY(parse_statement());
    OPFUSE_TRY(parse_return());
    OPFUSE_TRY(expect_punct("}", "after return"));
    return Status::ok();
  }

  // A subgraph attribute: `graph @name (inputs) [captures N] { ... return ... }`, parsed by a
  // parser of its own (its own names) over the same tokens.
  Result<AttrValue> parse_subgraph() {
    Parser sub(tokens_, options_);
    sub.pos_ = pos_;
    Status parsed = sub.parse_graph_text();
    pos_ = sub.pos_;
    OPFUSE_TRY(parsed);
    return AttrValue(GraphAttr(std::make_shared<Graph>(std::move(sub.graph_))));
  }

  // ---- token helpers -------------------------------------------------------------------------
  const Token& peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const Token& next() {
    const Token& t = peek();
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool is_punct(std::string_view p, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kPunct && peek(ahead).text == p;
  }
  bool is_keyword(std::string_view k, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kIdent && peek(ahead).text == k;
  }
  bool accept_punct(std::string_view p) {
    if (!is_punct(p)) return false;
    next();
    return true;
  }
  static Status error_at(const Token& t, const std::string& message) {
    return Status::user_error(str_cat("line ", t.line, ":", t.column, ": ", message));
  }
  Status expected(const std::string& what, const std::string& where) const {
    return error_at(peek(), str_cat("expected ", what, where.empty() ? "" : " ", where, ", found ",
                                    describe_token(peek())));
  }
  Status expect_punct(std::string_view p, const std::string& where) {
    if (!accept_punct(p)) return expected(str_cat("'", p, "'"), where);
    return Status::ok();
  }
  Status expect_keyword(std::string_view k, const std::string& where) {
    if (!is_keyword(k)) return expected(str_cat("'", k, "'"), where);
    next();
    return Status::ok();
  }
  bool at_word() const {
    return peek().kind == TokenKind::kIdent || peek().kind == TokenKind::kString;
  }

  // ---- numbers -------------------------------------------------------------------------------
  static bool is_integer_text(const std::string& s) {
    return s.find_first_of(".eE") == std::string::npos;
  }
  Result<int64_t> to_int64(const Token& t, const std::string& what) const {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (t.kind != TokenKind::kNumber || !is_integer_text(t.text) || ec != std::errc() ||
        p != t.text.data() + t.text.size()) {
      return error_at(t, str_cat("expected ", what, " (a 64-bit integer), found ", describe_token(t)));
    }
    return v;
  }
  template <typename F>
  Result<F> to_floating(const Literal& lit, std::string_view type_name) const {
    if (lit.kind == Literal::kInf) {
      return lit.negative ? -std::numeric_limits<F>::infinity() : std::numeric_limits<F>::infinity();
    }
    if (lit.kind == Literal::kNan) {
      const F nan = std::numeric_limits<F>::quiet_NaN();
      return lit.negative ? -nan : nan;
    }
    const Token& t = lit.token;
    if (lit.kind != Literal::kNumber) {
      return error_at(t, str_cat("expected a ", type_name, " number, found ", describe_token(t)));
    }
    F v{};
    auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec == std::errc::result_out_of_range) {
      return error_at(t, str_cat("number ", t.text, " is out of range for ", type_name));
    }
    if (ec != std::errc() || p != t.text.data() + t.text.size()) {
      return error_at(t, str_cat("malformed number '", t.text, "'"));
    }
    return v;
  }

  // A list element; a leading '-' is only a token of its own before inf/nan.
  Result<Literal> parse_literal() {
    Literal lit;
    lit.token = peek();
    bool negative = false;
    if (is_punct("-") && (is_keyword("inf", 1) || is_keyword("nan", 1))) {
      negative = true;
      next();
    }
    const Token& t = peek();
    if (t.kind == TokenKind::kNumber) {
      lit.kind = Literal::kNumber;
    } else if (t.kind == TokenKind::kString) {
      lit.kind = Literal::kString;
    } else if (is_keyword("inf") || is_keyword("nan")) {
      lit.kind = t.text == "inf" ? Literal::kInf : Literal::kNan;
      lit.negative = negative;
    } else if (is_keyword("true") || is_keyword("false")) {
      lit.kind = t.text == "true" ? Literal::kTrue : Literal::kFalse;
    } else {
      return expected("a number, true/false, inf/nan or a string", "");
    }
    if (!negative) lit.token = t;
    next();
    return lit;
  }

  // ---- types ---------------------------------------------------------------------------------
  Result<TypeSpec> parse_type() {
    TypeSpec spec;
    spec.present = true;
    const Token& dt = peek();
    if (accept_punct("?")) {
      spec.dtype = DType::kUndefined;
    } else if (dt.kind == TokenKind::kIdent && parse_dtype(dt.text)) {
      spec.dtype = *parse_dtype(next().text);
    } else {
      return expected("a dtype (f32, f16, f64, i64, i32, i16, i8, u64, u32, u16, u8, bool or ?)", "");
    }
    OPFUSE_TRY(expect_punct("[", "after the dtype"));
    if (accept_punct("*")) {
      OPFUSE_TRY(expect_punct("]", "after '*' (unknown rank)"));
      return spec;
    }
    Shape shape;
    if (!is_punct("]")) {
      do {
        const Token& t = peek();
        if (t.kind == TokenKind::kNumber) {
          OPFUSE_ASSIGN_OR_RETURN(int64_t d, to_int64(t, "a dim"));
          if (d < 0) return error_at(t, str_cat("dim ", d, " is negative"));
          shape.push_back(Dim(d));
        } else if (accept_punct("?")) {
          shape.push_back(Dim::unknown());
          continue;
        } else if (at_word() && !t.text.empty()) {
          shape.push_back(Dim::symbol(t.text));
        } else {
          return expected("a dim (a number, a symbol or ?)", "in the shape");
        }
        next();
      } while (accept_punct(","));
    }
    OPFUSE_TRY(expect_punct("]", "after the dims"));
    spec.shape = std::move(shape);
    return spec;
  }

  // ---- tensor data ---------------------------------------------------------------------------
  Status set_element(Tensor& t, int64_t i, const Literal& lit) const {
    const std::string_view type_name = dtype_name(t.dtype());
    return visit_dtype(t.dtype(), [&](auto tag) -> Status {
      using T = decltype(tag);
      T* data = t.data<T>();
      if constexpr (std::is_same_v<T, bool>) {
        if (lit.kind == Literal::kTrue || lit.kind == Literal::kFalse) {
          data[i] = lit.kind == Literal::kTrue;
        } else if (lit.kind == Literal::kNumber && (lit.token.text == "0" || lit.token.text == "1")) {
          data[i] = lit.token.text == "1";
        } else {
          return error_at(lit.token, str_cat("expected true or false, found ", describe_token(lit.token)));
        }
      } else if constexpr (std::is_same_v<T, Half>) {
        OPFUSE_ASSIGN_OR_RETURN(float f, to_floating<float>(lit, type_name));
        data[i] = float_to_half(f);
      } else if constexpr (std::is_floating_point_v<T>) {
        OPFUSE_ASSIGN_OR_RETURN(data[i], to_floating<T>(lit, type_name));
      } else {
        const Token& tok = lit.token;
        const char* begin = tok.text.data();
        const char* end = begin + tok.text.size();
        T v{};
        auto [p, ec] = std::from_chars(begin, end, v);
        if (lit.kind != Literal::kNumber || !is_integer_text(tok.text) || p != end ||
            ec == std::errc::invalid_argument) {
          return error_at(tok, str_cat("expected a ", type_name, " integer, found ", describe_token(tok)));
        }
        if (ec != std::errc()) {
          return error_at(tok, str_cat("value ", tok.text, " is out of range for ", type_name));
        }
        data[i] = v;
      }
      return Status::ok();
    });
  }

  static void fill_pattern(Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i) {
      const int64_t r = i % 17;
      if (t.dtype() == DType::kBool) {
        t.set_double(i, i % 2 == 1 ? 1.0 : 0.0);
      } else if (is_float(t.dtype())) {
        t.set_double(i, static_cast<double>(r - 8) / 8.0);
      } else if (is_unsigned_int(t.dtype())) {
        t.set_double(i, static_cast<double>(r));
      } else {
        t.set_double(i, static_cast<double>(r - 8));
      }
    }
  }

  // Allocates constant data within the budget of ParseOptions::max_constant_bytes, which covers
  // all constants of the text together (a few short lines must not reserve gigabytes).
  Result<Tensor> allocate(const Token& at, DType dtype, const std::vector<int64_t>& dims) {
    const std::string what = str_cat("constant ", dtype_name(dtype), dims_to_string(dims));
    auto numel = checked_numel(dims, what);
    if (!numel.is_ok()) return error_at(at, numel.status().message());
    const auto limit = static_cast<uint64_t>(std::max<int64_t>(options_.max_constant_bytes, 0));
    const uint64_t left = limit - std::min(limit, allocated_bytes_);
    if (static_cast<uint64_t>(*numel) > left / dtype_size(dtype)) {
      return error_at(at, str_cat(what, " is larger than ParseOptions::max_constant_bytes (", limit,
                                  " bytes", allocated_bytes_ ? str_cat(", of which ", allocated_bytes_,
                                                                       " are used by earlier constants")
                                                             : std::string(),
                                  ")"));
    }
    auto t = Tensor::zeros(dtype, dims, what);
    if (!t.is_ok()) return error_at(at, t.status().message());
    allocated_bytes_ += t->nbytes();
    return std::move(t).value();
  }

  // After the type: `[e0, e1, ...]`, `splat e` or `elided`.
  Result<Tensor> parse_tensor_data(const Token& type_at, const TypeSpec& type) {
    std::optional<std::vector<int64_t>> dims;
    if (type.shape) dims = static_dims(*type.shape);
    if (type.dtype == DType::kUndefined || !dims) {
      return error_at(type_at, "a constant needs a dtype and known dims, like f32[2,3]");
    }
    const Token& at = peek();
    if (is_keyword("elided")) {
      next();
      if (options_.elided_constants == ParseOptions::Elided::kError) {
        return error_at(at, "constant data is elided; print with a larger "
                            "PrintOptions::max_constant_elements, or parse with "
                            "ParseOptions::elided_constants = kZeros or kPattern");
      }
      OPFUSE_ASSIGN_OR_RETURN(Tensor t, allocate(at, type.dtype, *dims));
      if (options_.elided_constants == ParseOptions::Elided::kPattern) fill_pattern(t);
      return t;
    }
    if (is_keyword("splat")) {
      next();
      OPFUSE_ASSIGN_OR_RETURN(Literal lit, parse_literal());
      OPFUSE_ASSIGN_OR_RETURN(Tensor t, allocate(at, type.dtype, *dims));
      if (t.numel() == 0) return t;
      OPFUSE_TRY(set_element(t, 0, lit));
      const size_t size = dtype_size(t.dtype());
      auto* bytes = static_cast<unsigned char*>(t.raw_data());
      for (int64_t i = 1; i < t.numel(); ++i) std::memcpy(bytes + i * size, bytes, size);
      return t;
    }
    if (!is_punct("[")) return expected("'[', 'splat' or 'elided'", "for the constant data");
    next();
    std::vector<Literal> items;
    if (!is_punct("]")) {
      do {
        OPFUSE_ASSIGN_OR_RETURN(Literal lit, parse_literal());
        items.push_back(std::move(lit));
      } while (accept_punct(","));
    }
    OPFUSE_TRY(expect_punct("]", "after the constant data"));
    // Compare before allocating: the dims are untrusted, items.size() is bounded by the text.
    auto numel = checked_numel(*dims, "");
    if (!numel.is_ok() || *numel != static_cast<int64_t>(items.size())) {
      return error_at(at, str_cat("type ", dtype_name(type.dtype), dims_to_string(*dims), " has ",
                                  numel.is_ok() ? str_cat(*numel) : std::string("too many"),
                                  " elements but the data has ", items.size()));
    }
    OPFUSE_ASSIGN_OR_RETURN(Tensor t, allocate(at, type.dtype, *dims));
    for (size_t i = 0; i < items.size(); ++i) OPFUSE_TRY(set_element(t, i, items[i]));
    return t;
  }

  // ---- attributes ----------------------------------------------------------------------------
  Result<AttrValue> parse_list(std::optional<AttrType> declared) {
    const Token open = peek();
    OPFUSE_TRY(expect_punct("[", "to open the list"));
    std::vector<Literal> items;
    if (!is_punct("]")) {
      do {
        OPFUSE_ASSIGN_OR_RETURN(Literal lit, parse_literal());
        items.push_back(std::move(lit));
      } while (accept_punct(","));
    }
    OPFUSE_TRY(expect_punct("]", "after the list"));
    AttrType type;
    if (declared) {
      type = *declared;
    } else if (items.empty()) {
      return error_at(open, "an empty list needs its type: ints [], floats [] or strings []");
    } else if (items[0].kind == Literal::kString) {
      type = AttrType::kStrings;
    } else {
      type = AttrType::kInts;
      for (const Literal& lit : items) {
        if (lit.looks_float()) type = AttrType::kFloats;
      }
    }
    if (type == AttrType::kStrings) {
      std::vector<std::string> out;
      for (const Literal& lit : items) {
        if (lit.kind != Literal::kString) {
          return error_at(lit.token, str_cat("expected a string in the list, found ",
                                             describe_token(lit.token)));
        }
        out.push_back(lit.token.text);
      }
      return AttrValue(std::move(out));
    }
    if (type == AttrType::kFloats) {
      std::vector<float> out;
      for (const Literal& lit : items) {
        OPFUSE_ASSIGN_OR_RETURN(float f, to_floating<float>(lit, "float"));
        out.push_back(f);
      }
      return AttrValue(std::move(out));
    }
    std::vector<int64_t> out;
    for (const Literal& lit : items) {
      OPFUSE_ASSIGN_OR_RETURN(int64_t v, to_int64(lit.token, "an integer in the list"));
      out.push_back(v);
    }
    return AttrValue(std::move(out));
  }

  Result<AttrValue> parse_attr_value() {
    const Token& t = peek();
    if (t.kind == TokenKind::kString) return AttrValue(next().text);
    if (is_punct("[")) return parse_list(std::nullopt);
    for (auto [word, type] : {std::pair{"ints", AttrType::kInts}, std::pair{"floats", AttrType::kFloats},
                              std::pair{"strings", AttrType::kStrings}}) {
      if (is_keyword(word) && is_punct("[", 1)) {
        next();
        return parse_list(type);
      }
    }
    if (is_keyword("graph")) return parse_subgraph();
    if (is_keyword("tensor")) {
      next();
      OPFUSE_TRY(expect_punct("<", "after 'tensor'"));
      const Token type_at = peek();
      OPFUSE_ASSIGN_OR_RETURN(TypeSpec type, parse_type());
      OPFUSE_TRY(expect_punct(">", "after the tensor type"));
      OPFUSE_ASSIGN_OR_RETURN(Tensor data, parse_tensor_data(type_at, type));
      return AttrValue(std::move(data));
    }
    if (t.kind == TokenKind::kNumber || is_keyword("inf") || is_keyword("nan") || is_punct("-")) {
      OPFUSE_ASSIGN_OR_RETURN(Literal lit, parse_literal());
      if (lit.looks_float()) {
        OPFUSE_ASSIGN_OR_RETURN(float f, to_floating<float>(lit, "float"));
        return AttrValue(f);
      }
      OPFUSE_ASSIGN_OR_RETURN(int64_t v, to_int64(lit.token, "an integer"));
      return AttrValue(v);
    }
    return expected("an attribute value (number, string, list, tensor<...> or graph)", "");
  }

  Result<Attributes> parse_attrs() {
    Attributes attrs;
    OPFUSE_TRY(expect_punct("{", "to open the attributes"));
    if (accept_punct("}")) return attrs;
    do {
      const Token name = peek();
      if (!at_word()) return expected("an attribute name", "");
      next();
      OPFUSE_TRY(expect_punct("=", str_cat("after attribute name '", name.text, "'")));
      OPFUSE_ASSIGN_OR_RETURN(AttrValue value, parse_attr_value());
      if (attrs.count(name.text)) {
        return error_at(name, str_cat("attribute '", name.text, "' is set twice"));
      }
      attrs.emplace(name.text, std::move(value));
    } while (accept_punct(","));
    OPFUSE_TRY(expect_punct("}", "after the attributes"));
    return attrs;
  }

  // ---- values --------------------------------------------------------------------------------
  Status check_new_value(const Token& t) {
    if (t.text.empty()) return error_at(t, "a value name cannot be empty");
    auto it = defined_at_.find(t.text);
    if (it != defined_at_.end()) {
      return error_at(t, str_cat("value ", text::sigil_name('%', t.text), " is defined twice (first at line ",
                                 it->second.line, ":", it->second.column, ")"));
    }
    defined_at_.emplace(t.text, t);
    return Status::ok();
  }

  Result<Value*> use_value(const Token& t) {
    Value* v = defined_at_.count(t.text) ? graph_.find_value(t.text) : nullptr;
    if (v == nullptr) {
      return error_at(t, str_cat("undefined value ", text::sigil_name('%', t.text),
                                 " (values must be defined before they are used)"));
    }
    return v;
  }

  Status parse_input() {
    const Token name = peek();
    if (name.kind != TokenKind::kValueName) return expected("an input like %x: f32[2]", "");
    next();
    OPFUSE_TRY(check_new_value(name));
    TypeSpec type;
    Token type_at = peek();
    if (accept_punct(":")) {
      type_at = peek();
      OPFUSE_ASSIGN_OR_RETURN(type, parse_type());
    }
    Value* v = graph_.add_input(name.text, type.dtype, type.shape.value_or(Shape{}));
    v->shape = type.shape;
    if (accept_punct("=")) {  // an input with a default (an initializer that is also an input)
      OPFUSE_TRY(expect_keyword("const", "after '=' in a graph input"));
      OPFUSE_ASSIGN_OR_RETURN(Tensor data, parse_tensor_data(type_at, type));
      graph_.set_constant(v, std::move(data));
    }
    return Status::ok();
  }

  Status parse_statement() {
    const Token& t = peek();
    if (t.kind == TokenKind::kValueName) return parse_definition();
    if (at_word()) return parse_node({});  // a node without outputs
    if (is_punct("}")) return expected("'return'", "before '}'");
    return expected("a statement (%v = ..., an op call, or return)", "in the graph body");
  }

  Status parse_definition() {
    std::vector<std::pair<Token, TypeSpec>> defs;
    do {
      const Token name = peek();
      if (name.kind != TokenKind::kValueName) return expected("a value name like %y", "");
      next();
      OPFUSE_TRY(check_new_value(name));
      TypeSpec type;
      if (accept_punct(":")) {
        OPFUSE_ASSIGN_OR_RETURN(type, parse_type());
      }
      defs.emplace_back(name, std::move(type));
    } while (accept_punct(","));
    OPFUSE_TRY(expect_punct("=", "after the defined values"));
    if (is_keyword("const") && !is_punct("::", 1)) {
      const Token& at = next();
      if (defs.size() != 1 || !defs[0].second.present) {
        return error_at(at, "a constant defines exactly one value and needs its type: %w: f32[2] = const [1, 2]");
      }
      OPFUSE_ASSIGN_OR_RETURN(Tensor data, parse_tensor_data(defs[0].first, defs[0].second));
      graph_.add_constant(defs[0].first.text, std::move(data));
      return Status::ok();
    }
    return parse_node(std::move(defs));
  }

  Status parse_node(std::vector<std::pair<Token, TypeSpec>> defs) {
    const Token op_at = peek();
    if (!at_word()) return expected("an op name or 'const'", "after '='");
    std::string domain;
    std::string op_type = next().text;
    if (accept_punct("::")) {
      if (!at_word()) return expected("an op name", "after '::'");
      domain = std::move(op_type);
      op_type = next().text;
    }
    OPFUSE_TRY(expect_punct("(", str_cat("after op name '", op_type, "'")));
    std::vector<Value*> inputs;
    if (!is_punct(")")) {
      do {
        const Token& arg = peek();
        if (is_keyword("_")) {
          inputs.push_back(nullptr);
        } else if (arg.kind == TokenKind::kValueName) {
          OPFUSE_ASSIGN_OR_RETURN(Value* v, use_value(arg));
          inputs.push_back(v);
        } else {
          return expected("an input value like %x, or _ for an omitted input", "");
        }
        next();
      } while (accept_punct(","));
    }
    OPFUSE_TRY(expect_punct(")", "after the inputs of the op"));
    Attributes attrs;
    if (is_punct("{")) {
      OPFUSE_ASSIGN_OR_RETURN(attrs, parse_attrs());
    }
    std::string node_name;
    if (peek().kind == TokenKind::kNodeName) {
      const Token& name = next();
      if (name.text.empty()) return error_at(name, "a node name cannot be empty");
      if (graph_.find_node(name.text)) {
        return error_at(name, str_cat("node name ", text::sigil_name('#', name.text), " is used twice"));
      }
      node_name = name.text;
    }
    if (OpRegistry::global().find(domain, op_type) == nullptr) {
      return error_at(op_at, str_cat("unknown op '", op_type, "' (domain ", display_domain(domain), ")"));
    }
    std::vector<std::string> output_names;
    for (const auto& def : defs) output_names.push_back(def.first.text);
    auto node = graph_.add_node(op_type, std::move(inputs), std::move(output_names),
                                std::move(attrs), node_name, domain);
    if (!node.is_ok()) return error_at(op_at, node.status().message());
    for (size_t i = 0; i < defs.size(); ++i) {
      Value* out = (*node)->output(i);
      out->dtype = defs[i].second.dtype;
      out->shape = defs[i].second.shape;
    }
    return Status::ok();
  }

  Status parse_return() {
    next();  // 'return'
    if (peek().kind != TokenKind::kValueName) return Status::ok();
    do {
      const Token& t = peek();
      if (t.kind != TokenKind::kValueName) return expected("a value like %y", "after ',' in return");
      OPFUSE_ASSIGN_OR_RETURN(Value* v, use_value(t));
      graph_.add_output(v);
      next();
    } while (accept_punct(","));
    return Status::ok();
  }

  Status parse_opsets() {
    next();  // 'opset'
    do {
      std::string domain;
      const Token at = peek();
      if (at_word()) domain = next().text;
      if (peek().kind != TokenKind::kNumber) return expected("an opset version", "");
      OPFUSE_ASSIGN_OR_RETURN(int64_t version, to_int64(next(), "an opset version"));
      if (!graph_.opset_imports.emplace(domain, version).second) {
        return error_at(at, str_cat("opset of domain ", display_domain(domain), " is given twice"));
      }
    } while (accept_punct(","));
    return Status::ok();
  }

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  const ParseOptions& options_;
  Graph graph_;
  std::unordered_map<std::string, Token> defined_at_;
  uint64_t allocated_bytes_ = 0;
};

}  // namespace

Result<Graph> parse_graph(std::string_view text, const ParseOptions& options) {
  OPFUSE_ASSIGN_OR_RETURN(std::vector<Token> tokens, text::lex(text));
  return Parser(tokens, options).run();
}

}  // namespace opfuse
