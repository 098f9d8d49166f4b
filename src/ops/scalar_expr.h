// The per-element scalar expression of an elementwise op: a tiny SSA program over the op's
// inputs. The reference kernel of every elementwise op evaluates it, and the region fuser will
// compose the expressions of neighbouring ops into one fused kernel, so an op's math is written
// exactly once. Build expressions with ordinary C++ operators:
//
//   ScalarBuilder b;  auto x = b.arg(0);
//   return b.finish(x * sigmoid(x));   // SiLU
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace opfuse {

enum class ScalarOp : uint8_t {
  // leaves
  kArg,    // input number `a`
  kConst,  // `value`
  // unary
  kNeg, kAbs, kExp, kLog, kSqrt, kReciprocal, kTanh, kErf, kSigmoid, kFloor, kCeil, kRound,
  kSign, kNot, kSin, kCos, kIsNaN,
  // the rest of the trigonometric and hyperbolic functions (ONNX Tan ... Atanh)
  kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh,
  // binary
  kAdd, kSub, kMul, kDiv, kPow, kMax, kMin, kMod, kFMod,
  kLess, kLessEqual, kGreater, kGreaterEqual, kEqual, kAnd, kOr, kXor,
  // ternary: a ? b : c
  kSelect,
};
std::string_view scalar_op_name(ScalarOp op);
int scalar_op_arity(ScalarOp op);  // 0 for leaves

struct ScalarInstr {
  ScalarOp op;
  int32_t a = -1, b = -1, c = -1;  // operand instruction indices (or input index for kArg)
  double value = 0;                // kConst
};

// The result is the last instruction.
struct ScalarExpr {
  std::vector<ScalarInstr> code;
  int num_args() const;
  bool empty() const { return code.empty(); }
  // "mul(%0, sigmoid(%0))"-style text, for reports and tests.
  std::string to_string() const;
};

class ScalarBuilder;

// A handle to one instruction inside a builder.
struct Sx {
  ScalarBuilder* builder;
  int32_t id;
};

class ScalarBuilder {
 public:
  Sx arg(int index);
  Sx constant(double value);
  Sx unary(ScalarOp op, Sx a);
  Sx binary(ScalarOp op, Sx a, Sx b);
  Sx select(Sx cond, Sx if_true, Sx if_false);
  ScalarExpr finish(Sx result);  // result must be the last instruction or is copied last

 private:
  Sx push(ScalarInstr instr);
  ScalarExpr expr_;
};

Sx operator+(Sx a, Sx b);
Sx operator-(Sx a, Sx b);
Sx operator*(Sx a, Sx b);
Sx operator/(Sx a, Sx b);
Sx operator-(Sx a);
Sx operator+(Sx a, double b);
Sx operator-(Sx a, double b);
Sx operator*(Sx a, double b);
Sx operator/(Sx a, double b);
Sx operator+(double a, Sx b);
Sx operator-(double a, Sx b);
Sx operator*(double a, Sx b);
Sx operator/(double a, Sx b);
Sx operator<(Sx a, Sx b);
Sx operator>(Sx a, Sx b);
Sx operator<(Sx a, double b);
Sx operator>(Sx a, double b);
Sx max(Sx a, Sx b);
Sx min(Sx a, Sx b);
Sx max(Sx a, double b);
Sx min(Sx a, double b);
Sx pow(Sx a, Sx b);
Sx exp(Sx a);
Sx log(Sx a);
Sx sqrt(Sx a);
Sx tanh(Sx a);
Sx erf(Sx a);
Sx sigmoid(Sx a);
Sx abs(Sx a);
Sx select(Sx cond, Sx if_true, Sx if_false);

}  // namespace opfuse
