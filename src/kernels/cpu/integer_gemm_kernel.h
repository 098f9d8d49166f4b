// "cpu.gemm_i16" (kernels/cpu/integer_gemm_kernel.cc): opfuse::FusedMatMulInteger, the
// dynamically quantized product, with exact integer sums on 16-bit multiply-adds (with VNNI on
// oneDNN's int8 matmul); and
// MatMulInteger of constant 2-d weights whose int32 sums are read as integers.
#pragma once

#include "kernels/kernel.h"

namespace opfuse {

KernelImpl integer_gemm_kernel();
KernelImpl integer_gemm_sums_kernel();

}  // namespace opfuse
