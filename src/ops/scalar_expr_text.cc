#include "ops/scalar_expr_text.h"

#include <cctype>
#include <cstdlib>
#include <string>

namespace opfuse {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<ScalarExpr> parse() {
    OPFUSE_ASSIGN_OR_RETURN(int32_t root, term(0));
    skip_space();
    if (pos_ != text_.size()) return error("end of expression");
    if (root != static_cast<int32_t>(expr_.code.size()) - 1) {
      return Status::internal_error("scalar expression root is not last");
    }
    return expr_;
  }

 private:
  static constexpr int kMaxDepth = 64;

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  Status error(const std::string& expected) const {
    return Status::user_error(str_cat("scalar expression '", text_, "': expected ", expected,
                                      " at offset ", pos_));
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  int32_t push(ScalarInstr in) {
    expr_.code.push_back(in);
    return static_cast<int32_t>(expr_.code.size()) - 1;
  }

  Result<int32_t> term(int depth) {
    if (depth > kMaxDepth) return error(str_cat("at most ", kMaxDepth, " levels of nesting"));
    skip_space();
    if (pos_ >= text_.size()) return error("a term");
    const char c = text_[pos_];
    if (c == '%') {
      ++pos_;
      const size_t start = pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      if (start == pos_ || pos_ - start > 3) return error("an input number after '%'");
      return push({ScalarOp::kArg, std::atoi(std::string(text_.substr(start, pos_ - start)).c_str())});
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.') {
      const std::string rest(text_.substr(pos_));
      char* end = nullptr;
      const double v = std::strtod(rest.c_str(), &end);
      if (end == rest.c_str()) return error("a number");
      pos_ += static_cast<size_t>(end - rest.c_str());
      ScalarInstr in{ScalarOp::kConst};
      in.value = v;
      return push(in);
    }
    const size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    const std::string_view name = text_.substr(start, pos_ - start);
    if (name.empty()) return error("an operation name, '%N' or a number");
    ScalarOp op = ScalarOp::kArg;
    bool found = false;
    for (int i = static_cast<int>(ScalarOp::kNeg); i <= static_cast<int>(ScalarOp::kSelect); ++i) {
      if (scalar_op_name(static_cast<ScalarOp>(i)) == name) {
        op = static_cast<ScalarOp>(i);
        found = true;
      }
    }
    if (!found) {
      pos_ = start;
      return error(str_cat("a known operation (add, sub, mul, div, max, sigmoid, ...), not '", name, "'"));
    }
    if (!eat('(')) return error(str_cat("'(' after ", name));
    int32_t operands[3] = {-1, -1, -1};
    const int arity = scalar_op_arity(op);
    for (int i = 0; i < arity; ++i) {
      if (i > 0 && !eat(',')) return error(str_cat("',' (", name, " takes ", arity, " operands)"));
      OPFUSE_ASSIGN_OR_RETURN(operands[i], term(depth + 1));
    }
    if (!eat(')')) return error(str_cat("')' (", name, " takes ", arity, " operands)"));
    return push({op, operands[0], operands[1], operands[2]});
  }

  std::string_view text_;
  size_t pos_ = 0;
  ScalarExpr expr_;
};

}  // namespace

Result<ScalarExpr> parse_scalar_expr(std::string_view text) { return Parser(text).parse(); }

}  // namespace opfuse
