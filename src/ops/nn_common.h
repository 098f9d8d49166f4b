// Shared pieces of the neural-network op family (ops/conv.cc, pool.cc, matmul.cc,
// batch_norm.cc): sliding-window attribute handling, float-type dispatch and flops helpers.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ops/op_def.h"

namespace opfuse {

// The per-family record lists; nn_ops() (ops/nn.cc) concatenates them.
std::vector<OpDef> conv_ops();        // Conv, ConvTranspose
std::vector<OpDef> pool_ops();        // MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool
std::vector<OpDef> matmul_ops();      // MatMul, Gemm
std::vector<OpDef> batch_norm_ops();  // BatchNormalization

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

// The sliding-window attributes of Conv, ConvTranspose and the pools, checked and expanded to
// one entry per spatial dim. `pads` are ONNX-ordered: all begins, then all ends.
struct WindowAttrs {
  AutoPad auto_pad = AutoPad::kNotSet;
  std::vector<int64_t> kernel;  // -1 where unknown (weights with a non-static spatial dim)
  std::vector<int64_t> strides, dilations, pads;
};

// Reads auto_pad, kernel_shape, strides, dilations and pads. `weight_kernel` holds the weight's
// spatial dims (-1 unknown) for Conv/ConvTranspose, or nullopt for pools (kernel_shape is then
// required). Errors are user errors prefixed with `who` (the node's description).
Result<WindowAttrs> read_window_attrs(const AttrReader& attrs, size_t spatial_rank,
                                      const std::optional<std::vector<int64_t>>& weight_kernel,
                                      bool has_dilations, const std::string& who);

// Output size and resolved padding of one spatial dim of a Conv or pool.
struct WindowDim {
  int64_t out = -1;  // -1 when the input dim is unknown
  int64_t pad_begin = 0, pad_end = 0;
};
// `in` < 0 or `kernel` < 0 means unknown (the result's `out` is then -1). Fails when the
// (dilated) kernel is larger than the padded input.
Result<WindowDim> window_dim(const WindowAttrs& w, size_t axis, int64_t in, bool ceil_mode,
                             const std::string& who);

// Spatial sizes of a ConvTranspose output and the begin padding that places the input.
Result<WindowDim> conv_transpose_dim(const WindowAttrs& w, size_t axis, int64_t in,
                                     const std::vector<int64_t>& output_padding,
                                     const std::vector<int64_t>& output_shape,
                                     const std::string& who);

// A resolved sliding window over up to 3 spatial dims, as the kernels use it. 1-d and 2-d ops
// are expressed as 3-d ones with leading unit dims (size 1, kernel 1, no padding), so each
// kernel has one loop nest.
struct Geometry3 {
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, dilation[3] = {1, 1, 1}, pad_begin[3] = {0, 0, 0};
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t kernel_size() const { return kernel[0] * kernel[1] * kernel[2]; }
  // 1x1 kernel, stride 1, no padding: output position p reads input position p.
  bool is_pointwise() const;
};
// Fills axis `axis` of `spatial` spatial dims into the trailing slots of `g`.
void set_geometry_axis(Geometry3& g, size_t spatial, size_t axis, int64_t in, const WindowAttrs& w,
                       const WindowDim& d);

// Dims of a shape, -1 where not known.
std::vector<int64_t> dims_or_unknown(const Shape& shape);
// The static dims of a node's input/output value, if fully known.
std::optional<std::vector<int64_t>> static_value_dims(const Value* value);

// Checks that every present input in `indices` has the same float dtype as input 0 and returns
// it; a user error otherwise (also for unknown or non-float dtypes).
Result<DType> check_float_inputs(const InferContext& ctx, const std::vector<size_t>& indices);

// Runs a float kernel: `fn(float{} or double{}, inputs)` computes the outputs in float (for f32
// and f16 inputs) or double (f64). f16 inputs are widened to f32 and f32 results narrowed back to
// f16, so each kernel is written once per compute type.
using FloatKernelFn = std::function<Result<std::vector<Tensor>>(std::vector<const Tensor*>)>;
Status run_float_kernel(KernelContext& ctx, const FloatKernelFn& f32, const FloatKernelFn& f64);

}  // namespace opfuse
