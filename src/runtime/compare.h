// How opfuse measures agreement between two runs (eager vs graph, fused vs unfused, opfuse vs
// PyTorch): the largest absolute difference relative to the largest absolute reference value.
#pragma once

#include "ops/eager.h"

namespace opfuse {

// max |got - want| / max |want|. NaN must meet NaN; a dims mismatch or a NaN on one side only
// is infinitely different.
double max_relative_difference(const Tensor& got, const Tensor& want);
// The worst of the per-output differences; an output missing from `got` is infinitely different.
double max_relative_difference(const TensorMap& got, const TensorMap& want);

}  // namespace opfuse
