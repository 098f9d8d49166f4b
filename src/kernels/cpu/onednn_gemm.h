// Gemm (transA/transB, alpha, beta, C broadcast to [M, N]) on oneDNN's matmul primitive, with
// C as its bias. Cases needing a scale on a computed operand fall back to the reference kernel.
#pragma once

#include "kernels/kernel.h"

namespace opfuse::onednn {

KernelImpl onednn_gemm_kernel();  // "onednn.gemm"

}  // namespace opfuse::onednn
