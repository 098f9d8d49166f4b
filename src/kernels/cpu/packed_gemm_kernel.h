// Packed-panel GEMM ("cpu.gemm", kernels/cpu/packed_gemm_kernel.cc) for MatMul / Gemm /
// opfuse::FusedMatMul / opfuse::FusedGemm with a constant B and M > 1: the transformer and MLP
// layers. The weights are packed once, at kernel creation, into panels of two vectors' width;
// a register-tiled micro-kernel (6 x 16 on AVX2, 12 x 32 on AVX-512) accumulates over cache-sized
// K blocks, adds the bias to its accumulators and applies the epilogue to each tile in an L1
// buffer before the tile's only store to Y.
//
// Listed before oneDNN's matmul and preferred only where packed_gemm_wins says it beats oneDNN on
// the target, so the choice is made per target, not assumed (a tuning record may still pick it).
#pragma once

#include "core/target.h"
#include "kernels/kernel.h"

namespace opfuse {

KernelImpl packed_matmul_kernel();
KernelImpl packed_gemm_kernel();
KernelImpl packed_fused_matmul_kernel();
KernelImpl packed_fused_gemm_kernel();
// opfuse::BlockedConv with a 1x1 window, stride 1, no padding, one group: a product over the
// pixels, on nChw8c (AVX2) / nChw16c (AVX-512) read in place, or channels-last. Never the
// default (see packed_gemm_wins_conv); `opfuse tune` measures it against oneDNN per model.
KernelImpl packed_blocked_conv_kernel();

// Whether cpu.gemm is preferred over oneDNN's matmul on this target (see the .cc for figures).
bool packed_gemm_wins(const Target& target);
// Whether it is preferred over oneDNN's 1x1 convolution: on no target measured so far (the .cc).
bool packed_gemm_wins_conv(const Target& target);

}  // namespace opfuse
