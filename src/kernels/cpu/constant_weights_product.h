// MatMul / Gemm / opfuse::FusedMatMul / opfuse::FusedGemm nodes whose B is a constant: Y[M, N] =
// post(alpha * A[M, K] * B[K, N] + bias), read from the node once for the kernels that pack the
// weights at creation ("cpu.gemv" for M = 1, "cpu.gemm" for larger M).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/kernel.h"
#include "ops/fused.h"

namespace opfuse {

struct ConstantWeightsProduct {
  // A is read as [M, K] row-major (MatMul's batch dims folded into M; B must not be batched).
  int64_t m = 0, k = 0, n = 0;
  // Or, when channel_block > 0, A and Y are channel-blocked images (a 1x1 BlockedConv on
  // nChw8c / nChw16c): `images` products of M pixels each, A stored [images, K/b, M, b] and Y
  // [images, N/b, M, b] with b = channel_block dividing K and N.
  int64_t channel_block = 0;
  int64_t images = 1;
  bool trans_a = false;       // Gemm's transA: A is stored [K, M]
  const Tensor* b = nullptr;  // the constant weights, [K, N] or (trans_b) [N, K]
  bool trans_b = false;
  float alpha = 1.0f;
  // The bias, broadcast along M: Gemm's C (scaled by beta; 1 or N elements) or FusedMatMul's [N],
  // read from input `bias_input`; `bias_constant` when known at compile time.
  int bias_input = -1;
  int64_t bias_numel = 0;
  float bias_scale = 1.0f;
  const Tensor* bias_constant = nullptr;
  std::vector<PostOp> epilogue;  // "add" reads input 3, a residual of Y's shape
  // Weights and bias a caller built itself (cpu.gemv's padded 1x1 conv weights), which `b` and
  // `bias_constant` then point into.
  std::shared_ptr<const Tensor> own_b, own_bias;

  // B's element (i, j) of the [K, N] product, alpha not applied.
  float weight(int64_t i, int64_t j) const {
    const float* w = b->data<float>();
    return trans_b ? w[j * k + i] : w[i * n + j];
  }
  // The constant bias scaled and expanded to N floats; empty when there is none or it is computed.
  std::vector<float> expanded_bias() const;
  bool has_residual() const;
};

// MatMul / FusedMatMul: A [..., M, K] (any leading dims, folded into M), B [K] (N = 1) or
// [1, ..., 1, K, N]; nullopt for anything else (dtypes, dynamic dims, computed B ...).
std::optional<ConstantWeightsProduct> matmul_product(const KernelCompileContext& ctx, bool fused);
// Gemm / FusedGemm: op(B) [K, N] constant, C broadcasting along M ([N], [1, N] or one element);
// alpha = 0 is declined (folded into the weights it would turn an Inf in A into NaN).
std::optional<ConstantWeightsProduct> gemm_product(const KernelCompileContext& ctx, bool fused);

// opfuse::BlockedConv with a 1x1 kernel, no padding, one group, constant weights (and bias),
// whose output has its input's pixels (so stride 1), as the product Y = X W^T + bias over the
// pixels: channel-blocked (channel_block = the block, which must divide both channel counts, so
// no lane is padding) or channels-last (one row-major [images * pixels, C] product, as is a
// blocked map of one pixel).
std::optional<ConstantWeightsProduct> blocked_conv_product(const KernelCompileContext& ctx);

// The fused ops' epilogue: post-ops with a vector form, the residual add reading input 3 (Y's shape).
bool read_fused_tail(const KernelCompileContext& ctx, const std::vector<int64_t>& y,
                     ConstantWeightsProduct& product);

}  // namespace opfuse
