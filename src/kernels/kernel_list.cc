// The dispatch table: every optimised kernel, in order of preference per op.
#include "kernels/kernel.h"
#include "kernels/cpu/hwy_kernels.h"

namespace opfuse {

const std::vector<KernelImpl>& all_kernels() {
  static const std::vector<KernelImpl> kernels = [] {
    std::vector<KernelImpl> list = {};
    // Highway kernels (kernels/cpu/hwy_kernels.h) last: specialised libraries win when they apply.
    for (const KernelImpl& k : hwy_kernels()) list.push_back(k);
    return list;
  }();
  return kernels;
}

}  // namespace opfuse
