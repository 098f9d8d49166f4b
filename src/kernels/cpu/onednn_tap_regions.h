// "onednn.tap_regions": a padded, dilated BlockedConv split into output regions that each see
// only in-range taps (kernels/cpu/onednn_tap_regions.cc).
#pragma once

#include <cstdint>

#include "kernels/kernel.h"

namespace opfuse::onednn {

KernelImpl onednn_tap_regions_kernel();

// Below this fraction of the formula's multiply-adds reading real input (the rest read
// padding), the region split is taken; DeepLabV3's ASPP convs on a 32x32 map read 0.56
// (dilation 12) and 0.25 (dilation 24).
inline constexpr double kMaxInRangeFraction = 0.75;

}  // namespace opfuse::onednn
