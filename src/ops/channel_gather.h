// opfuse::ChannelGather's copy (ops/channel_gather.cc), shared by its reference kernel and the
// graph-mode kernel (kernels/cpu/channel_gather_kernel.cc), which writes into the memory plan's
// buffer without the zero fill a reference kernel's output gets.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace opfuse {

// Writes every element of y (allocated with its final dims; padded lanes of a blocked y as 0):
// y[n, c, ...] = inputs[sources[c]][n, channels[c], ...], plain or, when `blocked`, in the
// blocked layouts of ops/layout_ops.cc. The caller has checked the inputs against the attributes
// (the reference kernel does; graph mode compiles only nodes that passed shape inference).
void gather_channels(std::span<const Tensor* const> inputs, Tensor& y, const std::vector<int64_t>& sources,
                     const std::vector<int64_t>& channels, bool blocked);

}  // namespace opfuse
