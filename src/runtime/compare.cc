#include "runtime/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace opfuse {

double max_relative_difference(const Tensor& got, const Tensor& want) {
  constexpr double kInfinite = std::numeric_limits<double>::infinity();
  if (got.dims() != want.dims()) return kInfinite;
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.get_double(i), w = want.get_double(i);
    if (std::isnan(g) != std::isnan(w)) return kInfinite;
    if (std::isnan(w)) continue;
    diff = std::max(diff, std::abs(g - w));
    ref = std::max(ref, std::abs(w));
  }
  return diff / std::max(ref, 1e-30);
}

double max_relative_difference(const TensorMap& got, const TensorMap& want) {
  double worst = 0;
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    if (it == got.end()) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, max_relative_difference(it->second, w));
  }
  return worst;
}

}  // namespace opfuse
