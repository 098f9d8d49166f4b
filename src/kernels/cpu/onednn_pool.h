// MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool through oneDNN's pooling primitive
// (plain layouts). ceil_mode becomes extra end padding sized so oneDNN's output matches the
// node's; MaxPool's Indices output, windows lying wholly in the padding, and count_include_pad
// with a ceil_mode overhang are left to the reference kernel.
#pragma once

#include "kernels/kernel.h"

namespace opfuse::onednn {

// All named "onednn.pool".
KernelImpl onednn_max_pool_kernel();
KernelImpl onednn_average_pool_kernel();
KernelImpl onednn_global_average_pool_kernel();
KernelImpl onednn_global_max_pool_kernel();

}  // namespace opfuse::onednn
