#include "ops/scalar_expr.h"

#include <algorithm>
#include <array>

#include "core/status.h"

namespace opfuse {
namespace {

struct ScalarOpInfo {
  ScalarOp op;
  std::string_view name;
  int arity;
};

constexpr std::array kScalarOps = {
    ScalarOpInfo{ScalarOp::kArg, "arg", 0},        ScalarOpInfo{ScalarOp::kConst, "const", 0},
    ScalarOpInfo{ScalarOp::kNeg, "neg", 1},        ScalarOpInfo{ScalarOp::kAbs, "abs", 1},
    ScalarOpInfo{ScalarOp::kExp, "exp", 1},        ScalarOpInfo{ScalarOp::kLog, "log", 1},
    ScalarOpInfo{ScalarOp::kSqrt, "sqrt", 1},      ScalarOpInfo{ScalarOp::kReciprocal, "recip", 1},
    ScalarOpInfo{ScalarOp::kTanh, "tanh", 1},      ScalarOpInfo{ScalarOp::kErf, "erf", 1},
    ScalarOpInfo{ScalarOp::kSigmoid, "sigmoid", 1}, ScalarOpInfo{ScalarOp::kFloor, "floor", 1},
    ScalarOpInfo{ScalarOp::kCeil, "ceil", 1},      ScalarOpInfo{ScalarOp::kRound, "round", 1},
    ScalarOpInfo{ScalarOp::kSign, "sign", 1},      ScalarOpInfo{ScalarOp::kNot, "not", 1},
    ScalarOpInfo{ScalarOp::kSin, "sin", 1},        ScalarOpInfo{ScalarOp::kCos, "cos", 1},
    ScalarOpInfo{ScalarOp::kIsNaN, "isnan", 1},    ScalarOpInfo{ScalarOp::kTan, "tan", 1},
    ScalarOpInfo{ScalarOp::kAsin, "asin", 1},      ScalarOpInfo{ScalarOp::kAcos, "acos", 1},
    ScalarOpInfo{ScalarOp::kAtan, "atan", 1},      ScalarOpInfo{ScalarOp::kSinh, "sinh", 1},
    ScalarOpInfo{ScalarOp::kCosh, "cosh", 1},      ScalarOpInfo{ScalarOp::kAsinh, "asinh", 1},
    ScalarOpInfo{ScalarOp::kAcosh, "acosh", 1},    ScalarOpInfo{ScalarOp::kAtanh, "atanh", 1},
    ScalarOpInfo{ScalarOp::kAdd, "add", 2},
    ScalarOpInfo{ScalarOp::kSub, "sub", 2},        ScalarOpInfo{ScalarOp::kMul, "mul", 2},
    ScalarOpInfo{ScalarOp::kDiv, "div", 2},        ScalarOpInfo{ScalarOp::kPow, "pow", 2},
    ScalarOpInfo{ScalarOp::kMax, "max", 2},        ScalarOpInfo{ScalarOp::kMin, "min", 2},
    ScalarOpInfo{ScalarOp::kMod, "mod", 2},        ScalarOpInfo{ScalarOp::kFMod, "fmod", 2},
    ScalarOpInfo{ScalarOp::kLess, "lt", 2},        ScalarOpInfo{ScalarOp::kLessEqual, "le", 2},
    ScalarOpInfo{ScalarOp::kGreater, "gt", 2},     ScalarOpInfo{ScalarOp::kGreaterEqual, "ge", 2},
    ScalarOpInfo{ScalarOp::kEqual, "eq", 2},       ScalarOpInfo{ScalarOp::kAnd, "and", 2},
    ScalarOpInfo{ScalarOp::kOr, "or", 2},          ScalarOpInfo{ScalarOp::kXor, "xor", 2},
    ScalarOpInfo{ScalarOp::kSelect, "select", 3},
};

const ScalarOpInfo& info(ScalarOp op) {
  return *std::find_if(kScalarOps.begin(), kScalarOps.end(),
                       [op](const ScalarOpInfo& i) { return i.op == op; });
}

}  // namespace

std::string_view scalar_op_name(ScalarOp op) { return info(op).name; }
int scalar_op_arity(ScalarOp op) { return info(op).arity; }

int ScalarExpr::num_args() const {
  int n = 0;
  for (const auto& i : code) {
    if (i.op == ScalarOp::kArg) n = std::max(n, i.a + 1);
  }
  return n;
}

std::string ScalarExpr::to_string() const {
  std::vector<std::string> text(code.size());
  for (size_t i = 0; i < code.size(); ++i) {
    const ScalarInstr& in = code[i];
    if (in.op == ScalarOp::kArg) {
      text[i] = str_cat("%", in.a);
    } else if (in.op == ScalarOp::kConst) {
      text[i] = str_cat(in.value);
    } else {
      std::string s = str_cat(scalar_op_name(in.op), "(", text[in.a]);
      if (in.b >= 0) s += ", " + text[in.b];
      if (in.c >= 0) s += ", " + text[in.c];
      text[i] = s + ")";
    }
  }
  return text.empty() ? "" : text.back();
}

Sx ScalarBuilder::push(ScalarInstr instr) {
  expr_.code.push_back(instr);
  return Sx{this, static_cast<int32_t>(expr_.code.size() - 1)};
}
Sx ScalarBuilder::arg(int index) { return push({ScalarOp::kArg, index}); }
Sx ScalarBuilder::constant(double value) {
  ScalarInstr in{ScalarOp::kConst};
  in.value = value;
  return push(in);
}
Sx ScalarBuilder::unary(ScalarOp op, Sx a) { return push({op, a.id}); }
Sx ScalarBuilder::binary(ScalarOp op, Sx a, Sx b) { return push({op, a.id, b.id}); }
Sx ScalarBuilder::select(Sx cond, Sx if_true, Sx if_false) {
  return push({ScalarOp::kSelect, cond.id, if_true.id, if_false.id});
}
ScalarExpr ScalarBuilder::finish(Sx result) {
  if (result.id != static_cast<int32_t>(expr_.code.size()) - 1) {
    // Copy the result to the end so "the last instruction is the result" holds.
    ScalarInstr copy = expr_.code[result.id];
    expr_.code.push_back(copy);
  }
  return std::move(expr_);
}

namespace {
Sx bin(ScalarOp op, Sx a, Sx b) { return a.builder->binary(op, a, b); }
Sx cst(Sx like, double v) { return like.builder->constant(v); }
}  // namespace

Sx operator+(Sx a, Sx b) { return bin(ScalarOp::kAdd, a, b); }
Sx operator-(Sx a, Sx b) { return bin(ScalarOp::kSub, a, b); }
Sx operator*(Sx a, Sx b) { return bin(ScalarOp::kMul, a, b); }
Sx operator/(Sx a, Sx b) { return bin(ScalarOp::kDiv, a, b); }
Sx operator-(Sx a) { return a.builder->unary(ScalarOp::kNeg, a); }
Sx operator+(Sx a, double b) { return a + cst(a, b); }
Sx operator-(Sx a, double b) { return a - cst(a, b); }
Sx operator*(Sx a, double b) { return a * cst(a, b); }
Sx operator/(Sx a, double b) { return a / cst(a, b); }
Sx operator+(double a, Sx b) { return cst(b, a) + b; }
Sx operator-(double a, Sx b) { return cst(b, a) - b; }
Sx operator*(double a, Sx b) { return cst(b, a) * b; }
Sx operator/(double a, Sx b) { return cst(b, a) / b; }
Sx operator<(Sx a, Sx b) { return bin(ScalarOp::kLess, a, b); }
Sx operator>(Sx a, Sx b) { return bin(ScalarOp::kGreater, a, b); }
Sx operator<(Sx a, double b) { return a < cst(a, b); }
Sx operator>(Sx a, double b) { return a > cst(a, b); }
Sx max(Sx a, Sx b) { return bin(ScalarOp::kMax, a, b); }
Sx min(Sx a, Sx b) { return bin(ScalarOp::kMin, a, b); }
Sx max(Sx a, double b) { return max(a, cst(a, b)); }
Sx min(Sx a, double b) { return min(a, cst(a, b)); }
Sx pow(Sx a, Sx b) { return bin(ScalarOp::kPow, a, b); }
Sx exp(Sx a) { return a.builder->unary(ScalarOp::kExp, a); }
Sx log(Sx a) { return a.builder->unary(ScalarOp::kLog, a); }
Sx sqrt(Sx a) { return a.builder->unary(ScalarOp::kSqrt, a); }
Sx tanh(Sx a) { return a.builder->unary(ScalarOp::kTanh, a); }
Sx erf(Sx a) { return a.builder->unary(ScalarOp::kErf, a); }
Sx sigmoid(Sx a) { return a.builder->unary(ScalarOp::kSigmoid, a); }
Sx abs(Sx a) { return a.builder->unary(ScalarOp::kAbs, a); }
Sx select(Sx cond, Sx if_true, Sx if_false) {
  return cond.builder->select(cond, if_true, if_false);
}

}  // namespace opfuse
