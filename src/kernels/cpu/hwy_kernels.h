// CPU kernels vectorised with Google Highway (dynamic dispatch: compiled for every x86 target,
// the best one the CPU supports is picked at run time) and threaded with OpenMP. They handle f32
// with static shapes; anything else is declined so the reference kernel runs.
//
// Files, one per concept: hwy_elementwise.cc (every op with a ScalarExpr), hwy_softmax.cc
// (Softmax, LogSoftmax, LayerNormalization), hwy_prelu.cc (PRelu), hwy_reduce.cc (ReduceSum/Mean/Max/Min over a block
// of axes, and global average pooling), hwy_movers.cc (Transpose, Expand, Slice, Concat, Gather: element movers),
// hwy_resize.cc (Resize nearest/linear over H,W of NCHW), hwy_convert.cc (Cast between float and
// small integer types, DynamicQuantizeLinear), hwy_math-inl.h (vector
// exp/log/tanh/erf with IEEE fix-ups).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/kernel.h"

namespace opfuse {

// Every Highway kernel, for the dispatch table (kernels/kernel_list.cc appends them last).
std::vector<KernelImpl> hwy_kernels();

namespace hwy_cpu {

// Below this many output elements a kernel runs on one thread: waking OpenMP threads costs more.
inline constexpr int64_t kParallelThreshold = int64_t{1} << 15;

// The value's dims when its dtype is f32 (or `dtype`) and its shape is fully known.
std::optional<std::vector<int64_t>> static_dims_of(const Value* v, DType dtype = DType::kF32);

// Per-concept KernelImpl lists (each file's own).
// PRelu with the slope in registers (hwy_prelu.cc), before the elementwise kernel.
KernelImpl prelu_kernel();
std::vector<KernelImpl> elementwise_kernels();
std::vector<KernelImpl> softmax_kernels();
std::vector<KernelImpl> reduce_kernels();
// GlobalAveragePool, and AveragePool whose windows are whole axes, as a ReduceMean
// (hwy_reduce.cc); listed before oneDNN's pooling in kernels/kernel_list.cc.
KernelImpl global_average_pool_kernel();
KernelImpl whole_axis_average_pool_kernel();
std::vector<KernelImpl> layout_kernels();
std::vector<KernelImpl> resize_kernels();
std::vector<KernelImpl> convert_kernels();  // hwy_convert.cc: Cast, DynamicQuantizeLinear
// min(0, x...) and max(0, x...) of n floats folded into *lo and *hi, NaN left out, and when
// valid_lanes is below the dispatched vector's lanes the lanes past it in every vector too (the
// padded lanes of a blocked tensor's last block; n whole vectors). DynamicQuantizeLinear's range.
void range_with_zero(const float* x, size_t n, size_t valid_lanes, float* lo, float* hi);

}  // namespace hwy_cpu
}  // namespace opfuse
