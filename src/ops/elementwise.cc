// The elementwise family: unary math, binary and variadic arithmetic, comparisons, logic,
// Where and Cast (activations are in elementwise_activations.cc, BitShift in
// elementwise_bitwise.cc). Every op but Cast and CastLike is run by the generic scalar-expression
// evaluator (ops/scalar_eval.cc); its semantics are its `scalar`.
#include <limits>

#include "ops/elementwise_common.h"
#include "ops/op_list.h"

namespace opfuse {
namespace {

using ew::infer_broadcast;
using ew::make_op;
using ew::OutType;
using ew::TypeClass;

constexpr FusionKind kUnary = FusionKind::kElementwise;
constexpr FusionKind kBinary = FusionKind::kBroadcast;

template <ScalarOp Op>
ScalarExpr unary_expr(const ScalarExprContext&) {
  ScalarBuilder b;
  return b.finish(b.unary(Op, b.arg(0)));
}

template <ScalarOp Op>
ScalarExpr binary_expr(const ScalarExprContext&) {
  ScalarBuilder b;
  return b.finish(b.binary(Op, b.arg(0), b.arg(1)));
}

// Variadic Sum / Max / Min: a left fold over all inputs.
template <ScalarOp Op>
ScalarExpr fold_expr(const ScalarExprContext& c) {
  ScalarBuilder b;
  Sx acc = b.arg(0);
  for (size_t i = 1; i < c.node.inputs().size(); ++i) acc = b.binary(Op, acc, b.arg(static_cast<int>(i)));
  return b.finish(acc);
}

ScalarExpr mean_expr(const ScalarExprContext& c) {
  ScalarBuilder b;
  Sx acc = b.arg(0);
  const size_t n = c.node.inputs().size();
  for (size_t i = 1; i < n; ++i) acc = acc + b.arg(static_cast<int>(i));
  return b.finish(n > 1 ? acc / static_cast<double>(n) : acc);
}

ScalarExpr mod_expr(const ScalarExprContext& c) {
  ScalarBuilder b;
  const ScalarOp op = c.attrs.get_int("fmod") != 0 ? ScalarOp::kFMod : ScalarOp::kMod;
  return b.finish(b.binary(op, b.arg(0), b.arg(1)));
}

ScalarExpr where_expr(const ScalarExprContext&) {
  ScalarBuilder b;
  return b.finish(select(b.arg(0), b.arg(1), b.arg(2)));
}

// IsInf: comparisons with the infinities the attributes ask for. Detecting neither sign is
// allowed by ONNX and is constant false, written as both tests at once (no value is both).
ScalarExpr is_inf_expr(const ScalarExprContext& c) {
  ScalarBuilder b;
  const Sx x = b.arg(0);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const bool positive = c.attrs.get_int("detect_positive") != 0;
  const bool negative = c.attrs.get_int("detect_negative") != 0;
  const Sx is_pos = b.binary(ScalarOp::kEqual, x, b.constant(kInf));
  const Sx is_neg = b.binary(ScalarOp::kEqual, x, b.constant(-kInf));
  if (positive && negative) return b.finish(b.binary(ScalarOp::kOr, is_pos, is_neg));
  if (positive) return b.finish(is_pos);
  if (negative) return b.finish(is_neg);
  return b.finish(b.binary(ScalarOp::kAnd, is_pos, is_neg));
}

// Shrink: x + bias below -lambd, x - bias above lambd, 0 between. On integer inputs the
// evaluator truncates the constants toward zero, which gives the same comparisons for integer x
// (x > 1.5 <=> x > 1) and integer results of x -/+ bias for integral biases.
ScalarExpr shrink_expr(const ScalarExprContext& c) {
  ScalarBuilder b;
  const Sx x = b.arg(0);
  const double lambd = c.attrs.get_float("lambd");
  const double bias = c.attrs.get_float("bias");
  const Sx below = x < b.constant(-lambd);
  const Sx above = x > b.constant(lambd);
  return b.finish(select(below, x + bias, select(above, x - bias, b.constant(0))));
}

ScalarExpr identity_expr(const ScalarExprContext&) {
  ScalarBuilder b;
  return b.finish(b.arg(0));
}

// Pow: the exponent may have a different numeric type from the base; the output has the base's.
Status infer_pow(InferContext& ctx) {
  OPFUSE_TRY(ew::check_arity(ctx));
  OPFUSE_ASSIGN_OR_RETURN(DType base, ew::common_dtype(ctx, {0}, TypeClass::kNumeric));
  OPFUSE_TRY(ew::common_dtype(ctx, {1}, TypeClass::kNumeric).status());
  OPFUSE_ASSIGN_OR_RETURN(std::optional<Shape> shape, ew::broadcast_inputs(ctx, {0, 1}));
  ctx.set_output(0, base, std::move(shape));
  return Status::ok();
}

Status infer_where(InferContext& ctx) {
  OPFUSE_TRY(ew::check_arity(ctx));
  OPFUSE_TRY(ew::common_dtype(ctx, {0}, TypeClass::kBool).status());
  OPFUSE_ASSIGN_OR_RETURN(DType dtype, ew::common_dtype(ctx, {1, 2}, TypeClass::kAny));
  OPFUSE_ASSIGN_OR_RETURN(std::optional<Shape> shape, ew::broadcast_inputs(ctx, {0, 1, 2}));
  ctx.set_output(0, dtype, std::move(shape));
  return Status::ok();
}

Result<DType> cast_target(const Node& node, const AttrReader& attrs) {
  if (!attrs.has("to")) {
    return Status::user_error(str_cat(node.describe(), ": attribute 'to' is required"));
  }
  const int64_t code = attrs.get_int("to");
  auto to = dtype_from_onnx_code(code);
  if (!to) {
    return Status::user_error(str_cat(node.describe(), ": Cast to ONNX data type ", code,
                                      " is not supported"));
  }
  return *to;
}

// CastLike: Cast to the dtype of input 1, whose values are not read.
Status infer_cast_like(InferContext& ctx) {
  OPFUSE_TRY(ew::check_arity(ctx));
  ctx.set_output(0, ctx.input_dtype(1), ctx.input_shape(0));
  return Status::ok();
}

Status cast_like_kernel(KernelContext& ctx) {
  Result<Tensor> out = ctx.input(0).cast(ctx.input(1).dtype());
  if (!out) return out.status().with_context(ctx.node().describe());
  ctx.set_output(0, std::move(out).value());
  return Status::ok();
}

Status infer_cast(InferContext& ctx) {
  OPFUSE_TRY(ew::check_arity(ctx));
  OPFUSE_ASSIGN_OR_RETURN(DType to, cast_target(ctx.node(), ctx.attrs()));
  ctx.set_output(0, to, ctx.input_shape(0));
  return Status::ok();
}

// Cast converts dtypes, which the scalar evaluator (one compute type per expression) does not
// model; Tensor::cast does it (float -> int truncates toward zero, nonzero -> true).
Status cast_kernel(KernelContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(DType to, cast_target(ctx.node(), ctx.attrs()));
  Result<Tensor> out = ctx.input(0).cast(to);
  if (!out) return out.status().with_context(ctx.node().describe());
  ctx.set_output(0, std::move(out).value());
  return Status::ok();
}

void set_commutative(OpDef& def, bool associative = true) {
  def.traits.commutative = true;
  def.traits.associative = associative;
}

}  // namespace

std::vector<OpDef> elementwise_ops() {
  std::vector<OpDef> ops;
  ops.reserve(64);  // references returned by add() stay valid
  auto add = [&](OpDef def) -> OpDef& {
    ops.push_back(std::move(def));
    return ops.back();
  };
  constexpr auto kFloat = infer_broadcast<TypeClass::kFloat>;
  constexpr auto kNumeric = infer_broadcast<TypeClass::kNumeric>;
  constexpr auto kCompare = infer_broadcast<TypeClass::kNumeric, OutType::kBool>;
  constexpr auto kLogic = infer_broadcast<TypeClass::kBool, OutType::kBool>;

  // Unary math. Output has the input's dtype and shape, so it may overwrite the input.
  const size_t first_unary = ops.size();
  add(make_op("Tanh", 1, 1, kUnary, kFloat, unary_expr<ScalarOp::kTanh>, "tanh(x)"));
  add(make_op("Erf", 1, 1, kUnary, kNumeric, unary_expr<ScalarOp::kErf>, "erf(x)"));
  add(make_op("Exp", 1, 1, kUnary, kFloat, unary_expr<ScalarOp::kExp>, "exp(x)"));
  add(make_op("Log", 1, 1, kUnary, kFloat, unary_expr<ScalarOp::kLog>, "log(x)"));
  add(make_op("Sqrt", 1, 1, kUnary, kFloat, unary_expr<ScalarOp::kSqrt>, "sqrt(x)"));
  add(make_op("Reciprocal", 1, 1, kUnary, kFloat, unary_expr<ScalarOp::kReciprocal>, "1 / x"));
  add(make_op("Neg", 1, 1, kUnary, infer_broadcast<TypeClass::kSigned>, unary_expr<ScalarOp::kNeg>,
              "-x"));
  add(make_op("Abs", 1, 1, kUnary, kNumeric, unary_expr<ScalarOp::kAbs>, "|x|"))
      .traits.idempotent = true;
  add(make_op("Floor", 1, 1, kUnary, kFloat, unary_expr<ScalarOp::kFloor>, "floor(x)"))
      .traits.idempotent = true;
  add(make_op("Ceil", 1, 1, kUnary, kFloat, unary_expr<ScalarOp::kCeil>, "ceil(x)"))
      .traits.idempotent = true;
  add(make_op("Round", 1, 1, kUnary, kFloat, unary_expr<ScalarOp::kRound>,
              "round half to even"))
      .traits.idempotent = true;
  add(make_op("Sign", 1, 1, kUnary, kNumeric, unary_expr<ScalarOp::kSign>, "-1, 0 or 1"))
      .traits.idempotent = true;
  add(make_op("Sin", 1, 1, kUnary, kFloat, unary_expr<ScalarOp::kSin>, "sin(x)"));
  add(make_op("Cos", 1, 1, kUnary, kFloat, unary_expr<ScalarOp::kCos>, "cos(x)"));
  add(make_op("Not", 1, 1, kUnary, kLogic, unary_expr<ScalarOp::kNot>, "logical not"));
  add(make_op("Tan", 1, 1, kUnary, kFloat, unary_expr<ScalarOp::kTan>, "tan(x)"));
  add(make_op("Asin", 1, 1, kUnary, kFloat, unary_expr<ScalarOp::kAsin>, "arcsin(x), NaN outside [-1, 1]"));
  add(make_op("Acos", 1, 1, kUnary, kFloat, unary_expr<ScalarOp::kAcos>, "arccos(x), NaN outside [-1, 1]"));
  add(make_op("Atan", 1, 1, kUnary, kFloat, unary_expr<ScalarOp::kAtan>, "arctan(x)"));
  add(make_op("Sinh", 1, 1, kUnary, kFloat, unary_expr<ScalarOp::kSinh>, "sinh(x)"));
  add(make_op("Cosh", 1, 1, kUnary, kFloat, unary_expr<ScalarOp::kCosh>, "cosh(x)"));
  add(make_op("Asinh", 1, 1, kUnary, kFloat, unary_expr<ScalarOp::kAsinh>, "arsinh(x)"));
  add(make_op("Acosh", 1, 1, kUnary, kFloat, unary_expr<ScalarOp::kAcosh>, "arcosh(x), NaN below 1"));
  add(make_op("Atanh", 1, 1, kUnary, kFloat, unary_expr<ScalarOp::kAtanh>,
              "artanh(x), +-inf at +-1, NaN outside [-1, 1]"));
  OpDef& shrink = add(make_op("Shrink", 1, 1, kUnary, kNumeric, shrink_expr,
                              "x + bias below -lambd, x - bias above lambd, else 0"));
  shrink.attrs = {AttrSpec{"bias", AttrType::kFloat, AttrValue(0.0f), false},
                  AttrSpec{"lambd", AttrType::kFloat, AttrValue(0.5f), false}};
  for (size_t i = first_unary; i < ops.size(); ++i) ops[i].traits.inplace = true;
  add(make_op("IsNaN", 1, 1, kUnary, infer_broadcast<TypeClass::kFloat, OutType::kBool>,
              unary_expr<ScalarOp::kIsNaN>, "x != x"));
  OpDef& is_inf = add(make_op("IsInf", 1, 1, kUnary, infer_broadcast<TypeClass::kFloat, OutType::kBool>,
                              is_inf_expr, "x is +inf (detect_positive) or -inf (detect_negative)"));
  is_inf.attrs = {AttrSpec{"detect_negative", AttrType::kInt, AttrValue(int64_t{1}), false},
                  AttrSpec{"detect_positive", AttrType::kInt, AttrValue(int64_t{1}), false}};

  // Binary and variadic arithmetic: output has input 0's dtype; with equal shapes it may reuse
  // input 0's buffer (the memory planner checks the shapes).
  const size_t first_arith = ops.size();
  set_commutative(add(make_op("Add", 2, 2, kBinary, kNumeric, binary_expr<ScalarOp::kAdd>, "a + b")));
  add(make_op("Sub", 2, 2, kBinary, kNumeric, binary_expr<ScalarOp::kSub>, "a - b"));
  set_commutative(add(make_op("Mul", 2, 2, kBinary, kNumeric, binary_expr<ScalarOp::kMul>, "a * b")));
  add(make_op("Div", 2, 2, kBinary, kNumeric, binary_expr<ScalarOp::kDiv>,
              "a / b (integers truncate toward zero)"));
  add(make_op("Pow", 2, 2, kBinary, infer_pow, binary_expr<ScalarOp::kPow>, "a ^ b"));
  OpDef& mod = add(make_op("Mod", 2, 2, kBinary, kNumeric, mod_expr,
                           "remainder with the divisor's sign, or the dividend's when fmod=1"));
  mod.attrs = {AttrSpec{"fmod", AttrType::kInt, AttrValue(int64_t{0}), false}};
  set_commutative(add(make_op("Max", 1, ew::kVariadic, kBinary, kNumeric,
                              fold_expr<ScalarOp::kMax>, "elementwise maximum of all inputs")));
  set_commutative(add(make_op("Min", 1, ew::kVariadic, kBinary, kNumeric,
                              fold_expr<ScalarOp::kMin>, "elementwise minimum of all inputs")));
  set_commutative(add(make_op("Sum", 1, ew::kVariadic, kBinary, kFloat, fold_expr<ScalarOp::kAdd>,
                              "elementwise sum of all inputs")));
  set_commutative(add(make_op("Mean", 1, ew::kVariadic, kBinary, kFloat, mean_expr,
                              "elementwise mean of all inputs")),
                  /*associative=*/false);
  set_commutative(add(make_op("And", 2, 2, kBinary, kLogic, binary_expr<ScalarOp::kAnd>, "a && b")));
  set_commutative(add(make_op("Or", 2, 2, kBinary, kLogic, binary_expr<ScalarOp::kOr>, "a || b")));
  set_commutative(add(make_op("Xor", 2, 2, kBinary, kLogic, binary_expr<ScalarOp::kXor>, "a != b")));
  for (size_t i = first_arith; i < ops.size(); ++i) ops[i].traits.inplace = true;

  // Comparisons produce bool.
  set_commutative(add(make_op("Equal", 2, 2, kBinary, infer_broadcast<TypeClass::kAny, OutType::kBool>,
                              binary_expr<ScalarOp::kEqual>, "a == b")));
  add(make_op("Less", 2, 2, kBinary, kCompare, binary_expr<ScalarOp::kLess>, "a < b"));
  add(make_op("Greater", 2, 2, kBinary, kCompare, binary_expr<ScalarOp::kGreater>, "a > b"));
  add(make_op("LessOrEqual", 2, 2, kBinary, kCompare, binary_expr<ScalarOp::kLessEqual>, "a <= b"))
      .min_opset = 12;
  add(make_op("GreaterOrEqual", 2, 2, kBinary, kCompare, binary_expr<ScalarOp::kGreaterEqual>,
              "a >= b"))
      .min_opset = 12;

  add(make_op("Where", 3, 3, kBinary, infer_where, where_expr, "cond ? x : y"));
  OpDef& cast = add(make_op("Cast", 1, 1, kUnary, infer_cast, identity_expr,
                            "converts to dtype `to` (an ONNX data type number)"));
  cast.attrs = {AttrSpec{"to", AttrType::kInt, std::nullopt, true}};
  cast.reference = cast_kernel;
  cast.traits.idempotent = true;
  // Opaque, not elementwise: input 1 only lends its dtype and may have any shape, which the
  // passes that treat elementwise inputs alike (layout blocking) must not see as an operand.
  OpDef& cast_like = add(make_op("CastLike", 2, 2, FusionKind::kOpaque, infer_cast_like, identity_expr,
                                 "Cast to the dtype of input 1 (its values are not read)"));
  cast_like.reference = cast_like_kernel;
  cast_like.min_opset = 15;

  ew::append_activation_ops(ops);
  ew::append_bitwise_ops(ops);
  return ops;
}

}  // namespace opfuse
