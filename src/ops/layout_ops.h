// Copies between the plain and the blocked layout of f32 activations (ops/layout_ops.cc), for the
// reference kernels of ops that read or write blocked tensors, and the stages of a fused
// pointwise + depthwise conv.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "core/tensor.h"
#include "ir/graph.h"

namespace opfuse {

// Plain f32 [N, C, H, W] as blocked [N, ceil(C/lanes), H, W, lanes], padded lanes zero.
Result<Tensor> blocked_copy(const Tensor& plain, int64_t lanes);
// Blocked f32 [N, Cb, H, W, lanes] holding `channels` channels as plain [N, channels, H, W].
Result<Tensor> plain_copy(const Tensor& blocked, int64_t channels);

// What an opfuse::BlockedConvDepthwise node computes, as the two BlockedConv nodes it stands
// for, in a graph of their own: inputs typed as the node's (constants where `constants`, indexed
// like the node's inputs, holds data), the pointwise conv, then the depthwise conv reading its
// output. Its reference and the kernels that run the stages apart use them.
struct DepthwiseStages {
  std::unique_ptr<Graph> graph;
  Node* pointwise = nullptr;
  Node* depthwise = nullptr;
};
Result<DepthwiseStages> depthwise_stages(const Node& node, std::span<const Tensor* const> constants);

}  // namespace opfuse
