// gather_strided (kernels/cpu/strided_gather.h) against the element-by-element definition: every
// start and length over views with runs of 1 to 12 floats, broadcast dims and reversed strides,
// read through the contiguous source (short runs by a loop, long ones by memcpy, repeated rows
// copied once and doubled) and through at().
#include <gtest/gtest.h>

#include <numeric>

#include "core/status.h"
#include "kernels/cpu/strided_gather.h"

namespace opfuse {
namespace {

struct View {
  std::vector<int64_t> dims, strides;
  int64_t base;
};

float expected_at(const View& v, const std::vector<float>& src, int64_t flat) {
  int64_t offset = v.base;
  for (size_t k = v.dims.size(); k-- > 0;) {
    offset += (flat % v.dims[k]) * v.strides[k];
    flat /= v.dims[k];
  }
  return src[static_cast<size_t>(offset)];
}

TEST(StridedGather, EveryRangeOfEveryViewMatchesTheDefinition) {
  std::vector<float> src(4096);
  std::iota(src.begin(), src.end(), 0.0f);
  const std::vector<View> views = {
      {{50, 2}, {4, 1}, 2},         // a detector's [.., 2:4] of [50, 4]: runs of 2
      {{7, 3, 5}, {40, 8, 1}, 1},   // runs of 5
      {{6, 12}, {20, 1}, 0},        // runs of 12: memcpy
      {{4, 9}, {0, 1}, 3},          // a broadcast row
      {{5, 8}, {-8, 1}, 40},        // rows in reverse
      {{3, 4, 2}, {16, 1, 4}, 0},   // a transposed inner pair (stride 4)
      {{10}, {0}, 17},              // a splat
      {{3, 7, 4}, {4, 0, 1}, 5},    // a per-channel row over the pixels of a blocked tensor
      {{2, 3, 5, 16}, {80, 16, 0, 1}, 0},  // the same with an outer dim: rows copied and doubled
  };
  std::vector<int64_t> index;
  for (const View& v : views) {
    const int64_t total = std::accumulate(v.dims.begin(), v.dims.end(), int64_t{1}, std::multiplies<>());
    for (int64_t start = 0; start < total; start += 3) {
      for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{7}, total - start}) {
        if (start + n > total) continue;
        for (const float* contiguous : {static_cast<const float*>(src.data()), static_cast<const float*>(nullptr)}) {
          SCOPED_TRACE(str_cat("view ", &v - views.data(), " start ", start, " n ", n, contiguous ? " in place" : " at()"));
          std::vector<float> got(static_cast<size_t>(n), -1.0f);
          gather_strided(v.dims, v.strides, v.base, start, n, got.data(), index,
                         [&](int64_t i) { return src[static_cast<size_t>(i)]; }, contiguous);
          for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[static_cast<size_t>(i)], expected_at(v, src, start + i)) << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace opfuse
