// "cpu.winograd" (kernels/cpu/winograd_conv_kernel.cc): a 3x3 BlockedConv of stride 1 computed
// by Winograd's minimal filtering F(2x2, 3x3) on the blocked layout whose block is one vector,
// and of stride 2 by its even/odd split (F(2, 2) on the even inputs).
//
// Why: a 3x3 conv's 9 multiply-adds per input channel and output pixel become 4 (16 per 2x2 tile
// of outputs; 6.25 at stride 2), in products of (tiles x C) by (C x M) that run on cpu.conv's register tiles;
// the transforms around them are additions only. cpu.conv and oneDNN's direct kernels already
// run near the FMA peak on AVX2 and ONNX Runtime's MLAS does too: fewer multiplies is what is
// left to win there. On AVX-512 it beats oneDNN's brgconv convs as well (see the .cc).
#pragma once

#include "core/target.h"
#include "kernels/kernel.h"

namespace opfuse {

// A BlockedConv cpu.conv takes (kernels/cpu/direct_conv_kernel.h) with a 3x3 window, stride 1
// or 2 and no dilation (an odd output side ends in tiles that hang over). Tiles whose inputs are not
// all finite (the transforms would spread an Inf to outputs that never read it, as Inf - Inf) are
// computed by cpu.conv's loop instead, so NaN and Inf come out exactly where the reference puts
// them. Declined where chunks would be small and the transformed filters large, unless the
// threads can split the image by panels at stride 1 (see the .cc).
KernelImpl winograd_conv_kernel();

// Whether the table prefers it to the direct and oneDNN kernels on this target (see the .cc).
bool winograd_conv_wins(const Target& target);

}  // namespace opfuse
