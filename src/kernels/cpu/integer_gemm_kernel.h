// "cpu.gemm_i16" (kernels/cpu/integer_gemm_kernel.cc): opfuse::FusedMatMulInteger, the
// dynamically quantized product, with exact integer sums on 16-bit multiply-adds.
#pragma once

#include "kernels/kernel.h"

namespace opfuse {

KernelImpl integer_gemm_kernel();

}  // namespace opfuse
