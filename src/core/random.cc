#include "core/random.h"

#include <cmath>

namespace opfuse {

void fill_uniform(Tensor& t, Random& rng, double lo, double hi) {
  const bool integral = is_integer(t.dtype()) || t.dtype() == DType::kBool;
  if (t.dtype() == DType::kBool) {
    lo = 0;
    hi = 2;
  }
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = rng.uniform(lo, hi);
    t.set_double(i, integral ? std::floor(v) : v);
  }
}

}  // namespace opfuse
