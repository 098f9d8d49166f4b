#include "runtime/flush_denormals.h"

#include <omp.h>

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define OPFUSE_HAS_MXCSR 1
#endif

namespace opfuse {
namespace {

#ifdef OPFUSE_HAS_MXCSR
constexpr unsigned kFlushToZero = 0x8000;       // MXCSR.FTZ: denormal results become 0
constexpr unsigned kDenormalsAreZero = 0x0040;  // MXCSR.DAZ: denormal operands read as 0
#endif

}  // namespace

ScopedFlushDenormals::ScopedFlushDenormals(bool enable) {
#ifdef OPFUSE_HAS_MXCSR
  if (!enable) return;
  enabled_ = true;
  // One slot per thread of the team; thread 0 is the calling thread.
  saved_.assign(static_cast<size_t>(omp_get_max_threads()), 0);
#pragma omp parallel num_threads(static_cast<int>(saved_.size()))
  {
    const size_t t = static_cast<size_t>(omp_get_thread_num());
    if (t < saved_.size()) {
      saved_[t] = _mm_getcsr();
      _mm_setcsr(saved_[t] | kFlushToZero | kDenormalsAreZero);
    }
  }
#else
  (void)enable;
#endif
}

ScopedFlushDenormals::~ScopedFlushDenormals() {
#ifdef OPFUSE_HAS_MXCSR
  if (!enabled_) return;
#pragma omp parallel num_threads(static_cast<int>(saved_.size()))
  {
    const size_t t = static_cast<size_t>(omp_get_thread_num());
    if (t < saved_.size()) _mm_setcsr(saved_[t]);
  }
#endif
}

}  // namespace opfuse
