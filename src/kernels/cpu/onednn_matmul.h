// MatMul (and, through the shared plan builder, Gemm) on oneDNN's matmul primitive. Batched
// products with numpy broadcasting are described to oneDNN as reshaped views of the node's
// row-major buffers (batch dims folded into M when B is not batched, collapsed to one batch dim
// when both batch shapes agree); a constant B is packed once into the primitive's preferred
// layout, a computed B (attention's Q*K^T, P*V) is read in place.
#pragma once

#include <optional>

#include "kernels/cpu/onednn_common.h"

namespace opfuse::onednn {

// One operand of the product as the primitive sees it.
struct MatmulOperand {
  int input = -1;                     // node input index
  Dims tensor_dims;                   // the node value's dims (checked at run time)
  Dims dims, strides;                 // the view given to oneDNN
  const Tensor* constant = nullptr;   // the data, when known at compile time
  float scale = 1.0f;                 // folded into constant data (Gemm's alpha / beta)
};

struct MatmulSpec {
  MatmulOperand a, b;
  std::optional<MatmulOperand> bias;  // broadcast over dst (dims of 1 broadcast)
  Dims y_tensor_dims, y_dims;         // output 0 and its view
};

// Builds the plan; a scaled operand must be constant. `post_ops` apply to the output.
PrimitivePlan build_matmul_plan(const MatmulSpec& spec, const dnnl::post_ops& post_ops);

// A MatMul node (also opfuse::FusedMatMul: inputs 0 and 1) as a spec, or nullopt when the
// kernel does not handle it (dtype, dynamic or zero dims, unbroadcastable batches).
std::optional<MatmulSpec> matmul_spec(const KernelCompileContext& ctx);
// A Gemm node (also opfuse::FusedGemm: inputs 0 to 2) as a spec: transposes as strides, alpha
// and beta folded into constant B and C; nullopt when a computed operand would need scaling.
std::optional<MatmulSpec> gemm_spec(const KernelCompileContext& ctx);

KernelImpl onednn_matmul_kernel();  // "onednn.matmul"

}  // namespace opfuse::onednn
