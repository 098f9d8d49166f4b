// Copies between the plain and the blocked layout of f32 activations (ops/layout_ops.cc), for the
// reference kernels of ops that read or write blocked tensors.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace opfuse {

// Plain f32 [N, C, H, W] as blocked [N, ceil(C/lanes), H, W, lanes], padded lanes zero.
Result<Tensor> blocked_copy(const Tensor& plain, int64_t lanes);
// Blocked f32 [N, Cb, H, W, lanes] holding `channels` channels as plain [N, channels, H, W].
Result<Tensor> plain_copy(const Tensor& blocked, int64_t channels);

}  // namespace opfuse
