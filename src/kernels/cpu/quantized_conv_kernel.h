// "cpu.conv_i16" (kernels/cpu/quantized_conv_kernel.cc): opfuse::QuantizedConv, a quantized
// convolution of float X (dynamically, or by a constant scale and zero point), with X quantized
// as it is copied and exact integer sums on 16-bit multiply-adds, on the blocked layout whose
// block is one vector (nChw8c on AVX2, nChw16c on AVX-512) or on plain tensors.
//
// Why: below VNNI, oneDNN 2.6's int8 convolution multiplies u8 by s8 in saturating 16-bit pair
// sums (not exact), so ConvInteger ran as a float32 conv of dequantized operands behind a
// DynamicQuantizeLinear in the plain layout and reorders around it: the quantized IS-Net took
// 1.1-1.4x its float32 twin's time on a Zen 3 (docs/benchmarks.md).
#pragma once

#include "kernels/kernel.h"

namespace opfuse {

KernelImpl quantized_conv_kernel();

}  // namespace opfuse
