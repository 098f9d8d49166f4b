// "cpu.conv" (kernels/cpu/direct_conv_kernel.cc): opfuse::BlockedConv computed directly on the
// blocked layout whose block is one vector (nChw8c on AVX2, nChw16c on AVX-512), with the weights
// packed once, the bias added in registers and the epilogue run over each output row while it is
// in L1.
//
// Why: on AVX2 oneDNN 2.6's direct 3x3 kernel (`jit:avx2`) ran ResNet-50's 3x3 convs at
// 1.12-1.42x ONNX Runtime's time per conv on a Zen 3, while its 1x1 kernel was faster than ORT's
// except on small products (about 2^19 multiply-adds: 1x1 convs on 16x16 and 8x8 maps), which it
// runs on one thread of two.
#pragma once

#include "core/target.h"
#include "kernels/kernel.h"

namespace opfuse {

// A BlockedConv of one group whose window is larger than 1x1, or a small unstrided unpadded 1x1
// on two threads or more (larger products are left to the 1x1 kernels), with X and Y on the
// vector's block, an even number of output blocks, constant weights and bias, no input scale,
// and an epilogue with a vector form.
KernelImpl direct_conv_kernel();

// Whether the table prefers it to oneDNN's blocked conv on this target (see the .cc).
bool direct_conv_wins(const Target& target);

}  // namespace opfuse
