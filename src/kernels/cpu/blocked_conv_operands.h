// The operands our own BlockedConv kernels (cpu.conv, cpu.dwconv) take from the node, read and
// checked in one place: X and Y blocked ([N, C/b, H, W, b]), W 4-d, all static f32; the
// weights and the bias ([W's first dim]) constant; an epilogue with a vector form, whose "add"
// reads input 3 (the residual). Each kernel then checks the geometry it handles.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/kernel.h"
#include "ops/fused.h"

namespace opfuse {

struct BlockedConvOperands {
  std::vector<int64_t> x, w, y;
  const Tensor* weights = nullptr;
  const Tensor* bias = nullptr;  // null when the node has none
  std::vector<PostOp> epilogue;
  bool residual = false;
};

// nullopt when the node is not such a BlockedConv (or has an input scale, input 4).
std::optional<BlockedConvOperands> blocked_conv_operands(const KernelCompileContext& ctx);

}  // namespace opfuse
