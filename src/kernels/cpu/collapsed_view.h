// A strided view of a tensor (element o at sum o_k * strides[k]; stride 0 on broadcast dims)
// with the fewest dims that walk it: dims of size 1 dropped, and neighbours merged where the
// outer one's stride is the inner one's times the inner size, so the merged dim reads the same
// elements (two broadcast dims merge, a broadcast and a read one do not). The element movers
// (hwy_movers.cc) and PRelu's slope (hwy_prelu.cc) plan on it.
#pragma once

#include <cstdint>
#include <vector>

namespace opfuse::hwy_cpu {

struct CollapsedView {
  std::vector<int64_t> dims, strides;  // at least one dim: [1] with stride 0 for a scalar
  int64_t numel = 1;
};

inline CollapsedView collapse_view(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  CollapsedView v;
  for (size_t i = 0; i < dims.size(); ++i) {
    v.numel *= dims[i];
    if (dims[i] == 1) continue;
    if (!v.dims.empty() && v.strides.back() == strides[i] * dims[i]) {
      v.dims.back() *= dims[i];
      v.strides.back() = strides[i];
    } else {
      v.dims.push_back(dims[i]);
      v.strides.push_back(strides[i]);
    }
  }
  if (v.dims.empty()) {
    v.dims.push_back(1);
    v.strides.push_back(0);
  }
  return v;
}

}  // namespace opfuse::hwy_cpu
