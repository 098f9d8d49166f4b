// opfuse::FusedMatMul and opfuse::FusedGemm: a MatMul / Gemm followed by an epilogue of post-ops
// (ops/fused.h: the vocabulary, the residual as input 3, apply_epilogue), written by
// patterns/epilogue.cc. The reference kernels run the anchor's reference kernel, then the bias
// (FusedMatMul), then the post-ops, so they are the oracle the oneDNN kernels are tested against.
//   opfuse::FusedMatMul(A, B, [bias], [R]) {epilogue}: Y = post(MatMul(A, B) + bias), bias of
//     shape [N] (Y's last dim) broadcast over the rows.
//   opfuse::FusedGemm(A, B, [C], [R]) {Gemm's attributes, epilogue}: Y = post(Gemm(A, B, C)).
#include "ops/fused.h"
#include "ops/nn_common.h"
#include "ops/op_list.h"

namespace opfuse {
namespace {

const OpDef& anchor_def(const std::string& name) {
  static const std::vector<OpDef> defs = matmul_ops();
  for (const OpDef& d : defs) {
    if (d.name == name) return d;
  }
  return defs.front();
}

Status infer_fused_matmul(InferContext& ctx) {
  OPFUSE_TRY(anchor_def("MatMul").infer(ctx));
  if (ctx.has_input(2)) {
    const ValueType& y = ctx.outputs()[0];
    if (ctx.input_dtype(2) != y.dtype) return ctx.error("bias dtype differs from the output's");
    const auto& b = ctx.input_shape(2);
    if (y.shape && b && (b->size() != 1 || y.shape->empty() || !((*b)[0] == y.shape->back()))) {
      return ctx.error(str_cat("bias ", shape_to_string(*b), " must be [N] for the output ",
                               shape_to_string(*y.shape)));
    }
  }
  return infer_epilogue(ctx);
}

Status fused_matmul_kernel(KernelContext& ctx) {
  OPFUSE_TRY(anchor_def("MatMul").reference(ctx));
  if (const Tensor* bias = ctx.input_or_null(2)) {
    Tensor& y = ctx.outputs()[0];
    if (y.dtype() != DType::kF32 || bias->dtype() != DType::kF32 || y.rank() < 1 ||
        bias->rank() != 1 || bias->dim(0) != y.dims().back()) {
      return ctx.error(str_cat("bias ", bias->type_string(), " must be f32[N] for ", y.type_string()));
    }
    const int64_t n = bias->dim(0), rows = n == 0 ? 0 : y.numel() / n;
    const float* b = bias->data<float>();
    float* out = y.data<float>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < n; ++j) out[r * n + j] += b[j];
    }
  }
  return apply_epilogue(ctx);
}

Status infer_fused_gemm(InferContext& ctx) {
  OPFUSE_TRY(anchor_def("Gemm").infer(ctx));
  return infer_epilogue(ctx);
}

Status fused_gemm_kernel(KernelContext& ctx) {
  OPFUSE_TRY(anchor_def("Gemm").reference(ctx));
  return apply_epilogue(ctx);
}

OpDef fused_anchor(const std::string& anchor, const std::string& name, InferFn infer, KernelFn kernel,
                   std::string summary) {
  const OpDef& base = anchor_def(anchor);
  OpDef d;
  d.name = name;
  d.domain = std::string(kFusedDomain);
  d.min_opset = d.max_opset = 1;
  d.min_inputs = 2;
  d.max_inputs = 4;
  d.attrs = base.attrs;
  d.attrs.push_back({"epilogue", AttrType::kStrings, AttrValue(std::vector<std::string>{}), false});
  d.kind = FusionKind::kAnchor;
  d.infer = infer;
  d.reference = kernel;
  d.flops = base.flops;
  d.summary = std::move(summary);
  return d;
}

}  // namespace

std::vector<OpDef> fused_matmul_ops() {
  return {fused_anchor("MatMul", "FusedMatMul", infer_fused_matmul, fused_matmul_kernel,
                       "MatMul(A, B) + bias[N], then an epilogue of post-ops (residual R)"),
          fused_anchor("Gemm", "FusedGemm", infer_fused_gemm, fused_gemm_kernel,
                       "Gemm(A, B, [C]), then an epilogue of post-ops (residual R)")};
}

}  // namespace opfuse
