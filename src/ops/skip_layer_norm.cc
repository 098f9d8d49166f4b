// opfuse::SkipLayerNormalization(X, R, Scale, [B]) {axis, epsilon, stash_type}
//   = LayerNormalization(X + R, Scale, B): a transformer's residual Add and the LayerNorm after
// it as one op (patterns/skip_layer_norm.cc makes it), so one kernel reads both operands and
// writes only the normalised rows. R has X's shape (no broadcasting: the pattern checks it);
// there is one output, Y (LayerNormalization's Mean / InvStdDev outputs are not offered).
// The records of LayerNormalization do the work: shape inference and the reference kernel run
// it on X + R.
#include <cstring>

#include "ops/fused.h"
#include "ops/op_list.h"
#include "ops/registry.h"

namespace opfuse {
namespace {

const OpDef& layer_norm_def() {
  static const OpDef* def = OpRegistry::global().find("", "LayerNormalization");
  return *def;
}

Status infer_skip_layer_norm(InferContext& ctx) {
  if (ctx.input_dtype(0) != ctx.input_dtype(1)) return ctx.error("X and R must have the same dtype");
  const auto& x = ctx.input_shape(0);
  const auto& r = ctx.input_shape(1);
  if (x && r && !(*x == *r)) {
    return ctx.error(str_cat("R ", shape_to_string(*r), " must have X's shape ", shape_to_string(*x)));
  }
  std::vector<ValueType> inputs = {{ctx.input_dtype(0), x}, {ctx.input_dtype(2), ctx.input_shape(2)}};
  std::vector<const Tensor*> constants = {nullptr, ctx.input_constant(2)};
  if (ctx.has_input(3)) {
    inputs.push_back({ctx.input_dtype(3), ctx.input_shape(3)});
    constants.push_back(ctx.input_constant(3));
  }
  InferContext ln(ctx.node(), std::move(inputs), std::move(constants));
  OPFUSE_TRY(layer_norm_def().infer(ln));
  ctx.set_output(0, ln.outputs()[0].dtype, ln.outputs()[0].shape);
  return Status::ok();
}

Status skip_layer_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& r = ctx.input(1);
  if (x.dtype() != DType::kF32 || r.dtype() != DType::kF32 || x.dims() != r.dims()) {
    return ctx.error(str_cat("needs f32 X and R of one shape, got ", x.type_string(), " and ", r.type_string()));
  }
  Tensor sum = x.clone();
  float* s = sum.data<float>();
  const float* add = r.data<float>();
  for (int64_t i = 0; i < sum.numel(); ++i) s[i] += add[i];
  KernelContext ln(ctx.node(), {&sum, &ctx.input(2), ctx.input_or_null(3)});
  OPFUSE_TRY(layer_norm_def().reference(ln));
  const Tensor& y = ln.outputs()[0];
  OPFUSE_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, y.dtype(), y.dims()));
  std::memcpy(out->raw_data(), y.raw_data(), y.nbytes());
  return Status::ok();
}

int64_t skip_layer_norm_flops(const Node& node) {
  const Value* x = node.input(0);
  if (!x || !x->shape) return -1;
  const auto dims = static_dims(*x->shape);
  return dims ? 9 * numel_of(*dims) : -1;  // LayerNormalization's 8 per element, and the add
}

}  // namespace

std::vector<OpDef> skip_layer_norm_ops() {
  OpDef d;
  d.name = "SkipLayerNormalization";
  d.domain = std::string(kFusedDomain);
  d.min_opset = 1;
  d.max_opset = 1;
  d.min_inputs = 3;
  d.max_inputs = 4;
  d.attrs = {AttrSpec{"axis", AttrType::kInt, AttrValue(int64_t{-1})},
             AttrSpec{"epsilon", AttrType::kFloat, AttrValue(1e-5f)},
             AttrSpec{"stash_type", AttrType::kInt, AttrValue(int64_t{1})}};
  d.kind = FusionKind::kOpaque;
  d.infer = infer_skip_layer_norm;
  d.reference = skip_layer_norm_kernel;
  d.flops = skip_layer_norm_flops;
  d.summary = "LayerNormalization(X + R, Scale, B): a residual Add and the LayerNorm after it";
  return {std::move(d)};
}

}  // namespace opfuse
