// Helpers shared by the reduction family's files (reduction.cc, reduction_norm.cc). Not a public
// header: other families should not depend on it.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/op_def.h"

namespace opfuse {

// Below this many elements touched, a kernel runs single-threaded: forking OpenMP threads costs
// more than the work.
inline constexpr int64_t kReduceParallelThreshold = int64_t{1} << 15;

// Checks one axis against `rank` and makes it non-negative; the error names the node, the axis
// and the rank.
Result<int64_t> reduction_axis(const Node& node, int64_t axis, int64_t rank);
// Normalises, de-duplicates (a repeat is an error) and sorts a list of axes.
Result<std::vector<int64_t>> reduction_axes(const Node& node, const std::vector<int64_t>& axes,
                                            int64_t rank);

// The input shape with `axes` (normalised; all of them when empty) set to 1, or removed when
// !keepdims. Symbolic and unknown dims that are kept flow through unchanged.
Shape reduced_shape(const Shape& in, const std::vector<int64_t>& axes, bool keepdims);
std::vector<int64_t> reduced_dims(const std::vector<int64_t>& in, const std::vector<int64_t>& axes,
                                  bool keepdims);

// A reduction's iteration space with runs of adjacent kept / reduced dims merged and size-1 dims
// dropped: output element o (row-major over kept dims, which is also its flat index in the
// output) combines the `count` input elements at base(o) + the reduced offsets.
struct ReduceLayout {
  int64_t outer = 1;
  int64_t count = 1;
  std::vector<int64_t> kept_sizes, kept_strides;
  std::vector<int64_t> red_sizes, red_strides;

  int64_t base(int64_t o) const {
    int64_t offset = 0;
    for (size_t i = kept_sizes.size(); i-- > 0;) {
      offset += (o % kept_sizes[i]) * kept_strides[i];
      o /= kept_sizes[i];
    }
    return offset;
  }
  // Calls f(offset) for every reduced element of the output element at `base`, in row-major order.
  template <typename F>
  void for_each_reduced(int64_t base_offset, F&& f) const {
    const size_t nr = red_sizes.size();
    if (count == 0) return;
    if (nr == 0) {
      f(base_offset);
      return;
    }
    const int64_t inner_n = red_sizes[nr - 1];
    const int64_t inner_s = red_strides[nr - 1];
    if (nr == 1) {
      for (int64_t j = 0; j < inner_n; ++j) f(base_offset + j * inner_s);
      return;
    }
    std::vector<int64_t> ctr(nr - 1, 0);
    int64_t offset = base_offset;
    while (true) {
      for (int64_t j = 0; j < inner_n; ++j) f(offset + j * inner_s);
      size_t k = nr - 1;
      while (k-- > 0) {
        offset += red_strides[k];
        if (++ctr[k] < red_sizes[k]) break;
        offset -= red_strides[k] * red_sizes[k];
        ctr[k] = 0;
      }
      if (k == static_cast<size_t>(-1)) return;
    }
  }
};
// `reduced[i]` says whether dim i is reduced.
ReduceLayout make_reduce_layout(const std::vector<int64_t>& dims, const std::vector<bool>& reduced);

// The input's dims when its shape is static, for flops functions.
std::optional<std::vector<int64_t>> static_input_dims(const Node& node, size_t i);

// Softmax, LogSoftmax, LayerNormalization (reduction_norm.cc).
std::vector<OpDef> normalization_ops();
// CumSum, Hardmax, TopK: ops/reduction_axis.cc.
std::vector<OpDef> axis_scan_ops();
// InstanceNormalization, LRN, MeanVarianceNormalization: ops/reduction_channel_norm.cc.
std::vector<OpDef> channel_normalization_ops();

}  // namespace opfuse
