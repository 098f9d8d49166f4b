#include "kernels/cpu/hwy_kernels.h"

namespace opfuse {

std::vector<KernelImpl> hwy_kernels() {
  std::vector<KernelImpl> all = {hwy_cpu::prelu_kernel()};
  for (auto list : {hwy_cpu::elementwise_kernels, hwy_cpu::softmax_kernels,
                    hwy_cpu::reduce_kernels, hwy_cpu::layout_kernels,
                    hwy_cpu::resize_kernels, hwy_cpu::convert_kernels}) {
    for (const KernelImpl& k : list()) all.push_back(k);
  }
  return all;
}

namespace hwy_cpu {

std::optional<std::vector<int64_t>> static_dims_of(const Value* v, DType dtype) {
  if (v == nullptr || v->dtype != dtype || !v->shape) return std::nullopt;
  return static_dims(*v->shape);
}

}  // namespace hwy_cpu
}  // namespace opfuse
