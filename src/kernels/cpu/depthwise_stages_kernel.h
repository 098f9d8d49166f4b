// opfuse::BlockedConvDepthwise as its two convs, one after the other
// (kernels/cpu/depthwise_stages_kernel.cc).
#pragma once

#include "kernels/kernel.h"

namespace opfuse {

KernelImpl depthwise_stages_kernel();  // "stages"

}  // namespace opfuse
