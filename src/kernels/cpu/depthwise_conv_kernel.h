// "cpu.dwconv" (kernels/cpu/depthwise_conv_kernel.cc): a depthwise opfuse::BlockedConv (one input
// and one output channel per group) computed on the blocked layout whose block is one vector
// (nChw8c on AVX2), each channel block's window weights held in registers across a row of
// outputs.
//
// Why: oneDNN 2.6's AVX2 depthwise kernel (`jit_dw:avx2`) ran small depthwise convs (fr_landmark's
// 64-128 channels on 16x16 and 8x8 maps) on a Zen 3 at 10-13 G multiply-adds per second on one
// core, 0.2-0.3 of the FMA peak, and barely faster on two threads; they were a quarter of that
// model's time at O3. On MobileNet's larger maps it kept up with this kernel there. At AVX-512
// it is the other way round: `jit_dw:avx512_core` runs stride-1 convs of many channels on maps
// from 56x56 up slower, and any whose epilogue it leaves to a pass of its own
// (depthwise_conv_preferred).
#pragma once

#include "core/target.h"
#include "kernels/kernel.h"

namespace opfuse {

// A BlockedConv whose groups are its channels (weights [C, 1, kh, kw], C outputs), with X and Y on
// the vector's block, a 3 or 5 wide window, strides of 1 or 2 (the same on both axes), no
// dilation, constant weights and bias, no input scale, and an epilogue with a vector form.
KernelImpl depthwise_conv_kernel();

// Whether the table prefers it to oneDNN's blocked conv for this node on this target: below
// AVX-512 convs of at most 2^18 multiply-adds; from AVX-512 up stride-1 convs of at least four
// channel blocks on output maps of at least 56x56, or with an epilogue oneDNN would finish in a
// pass of its own (the .cc has the measurements).
bool depthwise_conv_preferred(const Target& target, const KernelCompileContext& ctx);

}  // namespace opfuse
