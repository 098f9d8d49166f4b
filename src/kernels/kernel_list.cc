// The dispatch table: every optimised kernel, in order of preference per op.
#include "kernels/kernel.h"

namespace opfuse {

const std::vector<KernelImpl>& all_kernels() {
  static const std::vector<KernelImpl> kernels = {};
  return kernels;
}

}  // namespace opfuse
