// y = x * s + t, then Relu when asked, over a stretch of a blocked tensor inside one channel
// block, s and t one vector each (the block's channels): the fused-region executor's path for a
// BatchNorm (+ ReLU) that no conv absorbed, as DenseNet's Concat + BN + ReLU (hwy_executor.cc).
// Compiled with -ffp-contract=off: the product and the sum are rounded separately, as the
// graph's Mul and Add are, so the path gives the interpreter's bits.
#pragma once

#include <cstddef>

namespace opfuse::hwy_cpu {

// The vector's lanes: the pattern length the path takes.
size_t channel_affine_lanes();
// n a multiple of channel_affine_lanes(); s and t that many floats.
void channel_affine(const float* x, float* y, size_t n, const float* s, const float* t, bool relu);

}  // namespace opfuse::hwy_cpu
