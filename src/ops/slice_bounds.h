// ONNX Slice's clamping rules for one axis, shared by shape inference (ops/tensor_index.cc) and
// the Highway slice kernel (kernels/cpu/hwy_movers.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

namespace opfuse {

// The first index and the element count of start:end:step on an axis of size `dim` (step != 0).
// Any int64 start/end/step is valid input (models write INT64_MAX for "to the end" and
// fuzzers write it as a step): nothing here can overflow.
inline std::pair<int64_t, int64_t> resolve_slice(int64_t start, int64_t end, int64_t step, int64_t dim) {
  if (dim == 0) return {0, 0};
  if (start < 0) start += dim;  // INT64_MIN + dim cannot overflow: dim >= 0
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    return {start, end > start ? (end - start - 1) / step + 1 : 0};
  }
  start = std::clamp<int64_t>(start, 0, dim - 1);
  end = std::clamp<int64_t>(end, -1, dim - 1);
  // |step| as unsigned: -INT64_MIN does not fit an int64.
  const uint64_t stride = uint64_t{0} - static_cast<uint64_t>(step);
  return {start, start > end ? static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) / stride) + 1 : 0};
}

// The step to walk an axis of size `dim` with: a step longer than the axis takes one element,
// as a step of the axis size does, so strides and index maps built from it stay within int64
// (steps of INT64_MAX occur).
inline int64_t bounded_slice_step(int64_t step, int64_t dim) {
  const int64_t bound = std::max<int64_t>(dim, 1);
  return std::clamp<int64_t>(step, -bound, bound);
}

}  // namespace opfuse
