// Matrix-vector kernels ("cpu.gemv", kernels/cpu/gemv_kernel.cc) for MatMul / Gemm /
// opfuse::FusedMatMul / opfuse::FusedGemm nodes whose A is a single row (M = 1 after folding
// batch dims) and whose B is a constant: the classifier heads of the zoo CNNs. The work there is
// streaming the weights once; the kernel packs them at creation so each thread reads one
// contiguous stream. Also Conv / FusedConv / BlockedConv of a 1x1 kernel over a 1x1 map
// (squeeze-excitation), which is the same product. Listed before the oneDNN kernels of those
// ops; everything else is declined.
#pragma once

#include "kernels/kernel.h"

namespace opfuse {

KernelImpl gemv_matmul_kernel();
KernelImpl gemv_gemm_kernel();
KernelImpl gemv_fused_matmul_kernel();
KernelImpl gemv_fused_gemm_kernel();
KernelImpl gemv_conv_kernel();
KernelImpl gemv_fused_conv_kernel();
KernelImpl gemv_blocked_conv_kernel();

// Columns per packed weight panel: each panel is [K x kGemvPanel] floats, row-major, the last
// one narrower (its width rounded up to 16 floats, zero padded).
inline constexpr int64_t kGemvPanel = 64;

}  // namespace opfuse
