// opfuse::FusedMatMul and opfuse::FusedGemm (ops/fused_matmul.cc) on oneDNN's matmul primitive:
// the bias as the primitive's bias, the epilogue as post-ops (eltwise, and the residual input 3
// as a binary add in the output's plain layout). Unsupported cases run the reference kernel.
#pragma once

#include "kernels/kernel.h"

namespace opfuse::onednn {

KernelImpl onednn_fused_matmul_kernel();  // "onednn.fused_matmul"
KernelImpl onednn_fused_gemm_kernel();    // "onednn.fused_gemm"

}  // namespace opfuse::onednn
