// The dispatch table: every optimised kernel, in order of preference per op.
#include "kernels/kernel.h"

#include "kernels/cpu/onednn_conv.h"
#include "kernels/cpu/onednn_conv_transpose.h"
#include "kernels/cpu/onednn_gemm.h"
#include "kernels/cpu/onednn_matmul.h"
#include "kernels/cpu/onednn_pool.h"

namespace opfuse {

const std::vector<KernelImpl>& all_kernels() {
  static const std::vector<KernelImpl> kernels = {
      // oneDNN (kernels/cpu/onednn_*.cc)
      onednn::onednn_conv_kernel(),
      onednn::onednn_conv_transpose_kernel(),
      onednn::onednn_matmul_kernel(),
      onednn::onednn_gemm_kernel(),
      onednn::onednn_max_pool_kernel(),
      onednn::onednn_average_pool_kernel(),
      onednn::onednn_global_average_pool_kernel(),
      onednn::onednn_global_max_pool_kernel(),
  };
  return kernels;
}

}  // namespace opfuse
