// The OpenMP thread count of the calling thread, set for a scope (restored after). oneDNN sizes
// a primitive's work split for the thread count current when the primitive is created and
// forks that many threads on every run, so a kernel is created and run under the same count.
#pragma once

#include <omp.h>

namespace opfuse {

class ScopedOmpThreads {
 public:
  // threads <= 0: leave the count as it is.
  explicit ScopedOmpThreads(int threads) : saved_(omp_get_max_threads()), set_(threads > 0) {
    if (set_) omp_set_num_threads(threads);
  }
  ~ScopedOmpThreads() {
    if (set_) omp_set_num_threads(saved_);
  }
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int saved_;
  bool set_;
};

}  // namespace opfuse
