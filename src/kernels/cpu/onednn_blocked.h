// oneDNN kernels of the blocked-layout ops (ops/layout_ops.cc; kernels/cpu/onednn_blocked.cc).
#pragma once

#include "kernels/kernel.h"

namespace opfuse::onednn {

KernelImpl onednn_to_blocked_kernel();    // "onednn.reorder": opfuse::ToBlocked
KernelImpl onednn_from_blocked_kernel();  // "onednn.reorder": opfuse::FromBlocked
KernelImpl onednn_reblock_kernel();       // "onednn.reorder": opfuse::Reblock
KernelImpl onednn_blocked_conv_kernel();  // "onednn.blocked_conv": opfuse::BlockedConv
// "onednn.blocked_conv": opfuse::BlockedConvDepthwise as one jit kernel, where oneDNN has one.
KernelImpl onednn_blocked_conv_depthwise_kernel();

}  // namespace opfuse::onednn
