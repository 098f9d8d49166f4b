// GELU written out in primitives (as PyTorch exports nn.GELU) becomes one Gelu op, which an
// anchor then absorbs as a post-op (epilogue.cc) or which runs as one elementwise kernel.
//
//   before (erf form)                              after
//     x ──┬──► Div(., √2) ─► Erf ─► Add(., 1) ─┐      x ─► Gelu {approximate = "none"} ─► y
//         └────────────────────────────────────┴► Mul ─► Mul(., 0.5) ─► y
//
// Algebra: 0.5·x·(1 + erf(x/√2)) = Gelu(x);  0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) =
// Gelu(x, approximate="tanh").
// Variants matched: x/√2 or x·(1/√2); x³ as Pow(x, 3) or x·(x·x); the 0.5 applied last, to x
// first, or to the (1 + ...) factor. Constants match by value within a relative 1e-4 (exporters
// print √2 and √(2/π) with 7-8 digits). Guards: every intermediate is private to the match
// (standard), and the result has x's dtype and shape (a broadcasting constant could grow it).
#include <cmath>

#include "patterns/families.h"

namespace opfuse::patterns {
namespace {

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kTol = 1e-4;

// 0.5 · x · h in its three association orders.
PatternNode half_x_times(const PatternNode& h) {
  return one_of({
      op("Mul", {op("Mul", {any("x"), h}), scalar(0.5, kTol)}),
      op("Mul", {op("Mul", {any("x"), scalar(0.5, kTol)}), h}),
      op("Mul", {any("x"), op("Mul", {h, scalar(0.5, kTol)})}),
  });
}

PatternNode erf_form() {
  const PatternNode scaled = one_of({op("Div", {any("x"), scalar(kSqrt2, kTol)}),
                                     op("Mul", {any("x"), scalar(1.0 / kSqrt2, kTol)})});
  return half_x_times(op("Add", {op("Erf", {scaled}), scalar(1.0, kTol)}));
}

PatternNode tanh_form() {
  const PatternNode cube = one_of({op("Pow", {any("x"), scalar(3.0, kTol)}),
                                   op("Mul", {any("x"), op("Mul", {any("x"), any("x")})})});
  const PatternNode inner = op("Add", {any("x"), op("Mul", {cube, scalar(0.044715, kTol)})});
  const PatternNode arg = op("Mul", {inner, scalar(kSqrt2OverPi, kTol)});
  return half_x_times(op("Add", {op("Tanh", {arg}), scalar(1.0, kTol)}));
}

Reason check_gelu(const Match& m, const PassContext&) {
  const Value* x = m.value("x");
  if (x->dtype != DType::kF32 && x->dtype != DType::kF16 && x->dtype != DType::kF64) {
    return "x is not a float tensor";
  }
  return same_type(x, m.root->output(0));
}

Pattern gelu(std::string name, PatternNode tree, std::string approximate) {
  Pattern p;
  p.name = std::move(name);
  p.family = "gelu";
  p.tree = std::move(tree);
  p.check = check_gelu;
  p.rewrite = [approximate](Graph& g, const Match& m) {
    return replace_match(g, m, "Gelu", "", {m.value("x")},
                         {{"approximate", approximate}}, m.root->name());
  };
  p.benefit = 10;  // before any single-op rule rooted at Mul
  return p;
}

}  // namespace

std::vector<Pattern> gelu_patterns() {
  return {gelu("gelu_erf", erf_form(), "none"), gelu("gelu_tanh", tanh_form(), "tanh")};
}

}  // namespace opfuse::patterns
