// Activation functions. Their math lives only in the scalar expressions below: the generic
// evaluator runs them eagerly and the fuser composes them into fused kernels.
#include <cmath>

#include "ops/elementwise_common.h"

namespace opfuse::ew {
namespace {

constexpr FusionKind kUnary = FusionKind::kElementwise;

AttrSpec float_attr(const char* name, float value) {
  return AttrSpec{name, AttrType::kFloat, AttrValue(value), false};
}

double attr(const ScalarExprContext& c, const char* name) { return c.attrs.get_float(name); }

// log(1 + exp(x)) without overflow for large x.
Sx softplus(Sx x) { return max(x, 0.0) + log(1.0 + exp(-abs(x))); }

ScalarExpr relu(const ScalarExprContext&) {
  ScalarBuilder b;
  return b.finish(max(b.arg(0), 0.0));
}
ScalarExpr leaky_relu(const ScalarExprContext& c) {
  ScalarBuilder b;
  Sx x = b.arg(0);
  return b.finish(select(x < 0.0, attr(c, "alpha") * x, x));
}
ScalarExpr prelu(const ScalarExprContext&) {
  ScalarBuilder b;
  Sx x = b.arg(0);
  return b.finish(select(x < 0.0, b.arg(1) * x, x));
}
ScalarExpr clip(const ScalarExprContext& c) {
  // An omitted bound clips nothing, so it is left out of the expression entirely (no infinity
  // has to be represented in integer types).
  ScalarBuilder b;
  Sx r = b.arg(0);
  if (c.node.has_input(1)) r = max(r, b.arg(1));
  if (c.node.has_input(2)) r = min(r, b.arg(2));
  return b.finish(r);
}
ScalarExpr sigmoid_expr(const ScalarExprContext&) {
  ScalarBuilder b;
  return b.finish(sigmoid(b.arg(0)));
}
ScalarExpr hard_sigmoid(const ScalarExprContext& c) {
  ScalarBuilder b;
  Sx y = attr(c, "alpha") * b.arg(0) + attr(c, "beta");
  return b.finish(max(min(y, 1.0), 0.0));
}
ScalarExpr hard_swish(const ScalarExprContext&) {
  ScalarBuilder b;
  Sx x = b.arg(0);
  return b.finish(x * max(min(x * (1.0 / 6.0) + 0.5, 1.0), 0.0));
}
ScalarExpr elu(const ScalarExprContext& c) {
  ScalarBuilder b;
  Sx x = b.arg(0);
  return b.finish(select(x < 0.0, attr(c, "alpha") * (exp(x) - 1.0), x));
}
ScalarExpr selu(const ScalarExprContext& c) {
  ScalarBuilder b;
  Sx x = b.arg(0);
  const double alpha = attr(c, "alpha"), gamma = attr(c, "gamma");
  return b.finish(select(x > 0.0, gamma * x, gamma * (alpha * exp(x) - alpha)));
}
ScalarExpr softplus_expr(const ScalarExprContext&) {
  ScalarBuilder b;
  return b.finish(softplus(b.arg(0)));
}
ScalarExpr softsign(const ScalarExprContext&) {
  ScalarBuilder b;
  Sx x = b.arg(0);
  return b.finish(x / (1.0 + abs(x)));
}
ScalarExpr thresholded_relu(const ScalarExprContext& c) {
  ScalarBuilder b;
  Sx x = b.arg(0);
  return b.finish(select(x > attr(c, "alpha"), x, b.constant(0)));
}
ScalarExpr celu(const ScalarExprContext& c) {
  ScalarBuilder b;
  Sx x = b.arg(0);
  const double alpha = attr(c, "alpha");
  return b.finish(max(x, 0.0) + min(alpha * (exp(x / alpha) - 1.0), 0.0));
}
ScalarExpr gelu(const ScalarExprContext& c) {
  ScalarBuilder b;
  Sx x = b.arg(0);
  if (c.attrs.get_string("approximate") == "tanh") {
    const double k = std::sqrt(2.0 / M_PI);
    return b.finish(0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x))));
  }
  return b.finish(0.5 * x * (1.0 + erf(x * M_SQRT1_2)));
}
ScalarExpr mish(const ScalarExprContext&) {
  ScalarBuilder b;
  Sx x = b.arg(0);
  return b.finish(x * tanh(softplus(x)));
}

// PRelu: slope broadcasts to X in one direction only, so the output has X's shape.
Status infer_prelu(InferContext& ctx) {
  OPFUSE_TRY(check_arity(ctx));
  OPFUSE_ASSIGN_OR_RETURN(DType dtype, common_dtype(ctx, {0, 1}, TypeClass::kNumeric));
  const auto& x = ctx.input_shape(0);
  const auto& slope = ctx.input_shape(1);
  if (x && slope) {
    OPFUSE_ASSIGN_OR_RETURN(Shape both, broadcast_shapes({*x, *slope}, ctx.node().describe()));
    bool ok = slope->size() <= x->size();
    for (size_t i = 0; ok && i < x->size(); ++i) {
      // Broadcasting must not grow X: a known dim of X must stay, and X may not be a 1 that
      // the slope stretches.
      if ((*x)[i].is_known() && both[i].is_known() && (*x)[i] != both[i]) ok = false;
    }
    if (!ok) {
      return ctx.error(str_cat("slope of shape ", shape_to_string(*slope),
                               " does not broadcast to X of shape ", shape_to_string(*x)));
    }
  }
  ctx.set_output(0, dtype, x);
  return Status::ok();
}

// Clip: min and max are optional one-element inputs of X's dtype.
Status infer_clip(InferContext& ctx) {
  OPFUSE_TRY(check_arity(ctx));
  OPFUSE_ASSIGN_OR_RETURN(DType dtype, common_dtype(ctx, present_inputs(ctx), TypeClass::kNumeric));
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i) || !ctx.input_shape(i)) continue;
    for (const Dim& d : *ctx.input_shape(i)) {
      if (d.is_known() && d.value() != 1) {
        return ctx.error(str_cat(i == 1 ? "min" : "max", " must be a scalar, got shape ",
                                 shape_to_string(*ctx.input_shape(i))));
      }
    }
  }
  OPFUSE_ASSIGN_OR_RETURN(std::optional<Shape> shape, broadcast_inputs(ctx, present_inputs(ctx)));
  ctx.set_output(0, dtype, std::move(shape));
  return Status::ok();
}

Status infer_gelu(InferContext& ctx) {
  const std::string approximate = ctx.attrs().get_string("approximate");
  if (approximate != "none" && approximate != "tanh") {
    return ctx.error(str_cat("attribute approximate must be \"none\" or \"tanh\", got \"",
                             approximate, "\""));
  }
  return infer_broadcast<TypeClass::kFloat>(ctx);
}

}  // namespace

void append_activation_ops(std::vector<OpDef>& ops) {
  const size_t first = ops.size();
  ops.reserve(first + 16);  // references returned by add() stay valid
  auto add = [&](OpDef def) -> OpDef& {
    ops.push_back(std::move(def));
    return ops.back();
  };
  constexpr auto kFloat = infer_broadcast<TypeClass::kFloat>;

  OpDef& relu_def = add(make_op("Relu", 1, 1, kUnary, infer_broadcast<TypeClass::kSigned>, relu,
                                "max(x, 0)"));
  relu_def.traits.idempotent = true;
  OpDef& leaky = add(make_op("LeakyRelu", 1, 1, kUnary, kFloat, leaky_relu,
                             "x < 0 ? alpha * x : x"));
  leaky.attrs = {float_attr("alpha", 0.01f)};
  add(make_op("PRelu", 2, 2, FusionKind::kBroadcast, infer_prelu, prelu,
              "x < 0 ? slope * x : x, slope broadcast to x"));
  OpDef& clip_def = add(make_op("Clip", 1, 3, FusionKind::kBroadcast, infer_clip, clip,
                                "min(max(x, min), max); omitted bounds clip nothing"));
  clip_def.traits.idempotent = true;
  add(make_op("Sigmoid", 1, 1, kUnary, kFloat, sigmoid_expr, "1 / (1 + exp(-x))"));
  OpDef& hs = add(make_op("HardSigmoid", 1, 1, kUnary, kFloat, hard_sigmoid,
                          "max(0, min(1, alpha * x + beta))"));
  hs.attrs = {float_attr("alpha", 0.2f), float_attr("beta", 0.5f)};
  OpDef& hswish = add(make_op("HardSwish", 1, 1, kUnary, kFloat, hard_swish,
                              "x * max(0, min(1, x / 6 + 0.5))"));
  hswish.min_opset = 14;
  OpDef& elu_def = add(make_op("Elu", 1, 1, kUnary, kFloat, elu, "x < 0 ? alpha * (exp(x) - 1) : x"));
  elu_def.attrs = {float_attr("alpha", 1.0f)};
  OpDef& selu_def = add(make_op("Selu", 1, 1, kUnary, kFloat, selu,
                                "gamma * (x > 0 ? x : alpha * exp(x) - alpha)"));
  selu_def.attrs = {float_attr("alpha", 1.67326319217681884765625f),
                    float_attr("gamma", 1.05070102214813232421875f)};
  add(make_op("Softplus", 1, 1, kUnary, kFloat, softplus_expr, "log(exp(x) + 1)"));
  add(make_op("Softsign", 1, 1, kUnary, kFloat, softsign, "x / (1 + |x|)"));
  OpDef& trelu = add(make_op("ThresholdedRelu", 1, 1, kUnary, kFloat, thresholded_relu,
                             "x > alpha ? x : 0"));
  trelu.attrs = {float_attr("alpha", 1.0f)};
  OpDef& celu_def = add(make_op("Celu", 1, 1, kUnary, kFloat, celu,
                                "max(0, x) + min(0, alpha * (exp(x / alpha) - 1))"));
  celu_def.attrs = {float_attr("alpha", 1.0f)};
  celu_def.min_opset = 12;
  // Gelu (ONNX opset 20) and Mish (opset 18) are also what the fuser rewrites their decomposed
  // forms into, so they are accepted at any opset of the default domain.
  OpDef& gelu_def = add(make_op("Gelu", 1, 1, kUnary, infer_gelu, gelu,
                                "0.5 * x * (1 + erf(x / sqrt(2))), or the tanh approximation"));
  gelu_def.attrs = {AttrSpec{"approximate", AttrType::kString, AttrValue(std::string("none")), false}};
  gelu_def.min_opset = 1;
  gelu_def.max_opset = 20;
  OpDef& mish_def = add(make_op("Mish", 1, 1, kUnary, kFloat, mish, "x * tanh(softplus(x))"));
  mish_def.min_opset = 1;
  mish_def.max_opset = 18;
  // Every activation writes a value of its input's dtype and shape, element by element.
  for (size_t i = first; i < ops.size(); ++i) {
    ops[i].traits.inplace = true;
    ops[i].traits.activation = true;
  }
}

}  // namespace opfuse::ew
