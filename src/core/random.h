// A small deterministic random generator (SplitMix64) so fixed-seed weights and inputs are the
// same on every machine and standard library (std:: distributions are not portable).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace opfuse {

class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next_u64() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi).
  double uniform(double lo = 0.0, double hi = 1.0) {
    return lo + (hi - lo) * static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
  }

 private:
  uint64_t state_;
};

// Fills a tensor of any dtype: floats uniform in [lo, hi), integers in [lo, hi), bools 0/1.
void fill_uniform(Tensor& t, Random& rng, double lo, double hi);

}  // namespace opfuse
