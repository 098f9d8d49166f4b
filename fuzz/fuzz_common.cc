#include "fuzz/fuzz_common.h"

#include <omp.h>

#include <cstdio>
#include <cstdlib>

#include "core/tensor.h"

namespace opfuse::fuzz {

void init_limits() {
  set_max_allocation_bytes(kMaxAllocationBytes);
  omp_set_num_threads(1);  // one input at a time; threads only add noise to coverage
}

bool check(const Status& status, const char* stage) {
  if (status.is_ok()) return true;
  if (status.kind() == ErrorKind::kInternal) {
    std::fprintf(stderr, "opfuse internal error in %s: %s\n", stage, status.message().c_str());
    std::abort();
  }
  return false;
}

}  // namespace opfuse::fuzz
