// Pieces Conv (ops/conv.cc) and ConvTranspose (ops/conv_transpose.cc) share: attribute
// schema, shape checks for inference, and the validated setup their kernels start from.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ops/nn_common.h"

namespace opfuse {

// auto_pad, dilations, group, kernel_shape, pads, strides with their ONNX defaults.
std::vector<AttrSpec> conv_attr_specs();

// 2 * multiply-adds of a Conv or ConvTranspose: each element of `driving` (Conv's output,
// ConvTranspose's input) takes W's per-leading-channel size of them (W[0] channels). -1 when
// the shapes are not static.
int64_t conv_family_flops(const Value* driving, const Value* weights);

// ConvTranspose's extra attributes, checked.
struct TransposeAttrs {
  std::vector<int64_t> output_padding;  // empty or one per spatial dim
  std::vector<int64_t> output_shape;    // empty or one per spatial dim
};
Result<TransposeAttrs> read_transpose_attrs(const AttrReader& attrs, size_t spatial,
                                            const std::string& who);

// What a Conv / ConvTranspose kernel needs, validated against the concrete tensors (kernels
// must not trust that shape inference saw these exact shapes).
struct ConvSetup {
  int64_t group = 1;
  Geometry3 geo;
  std::vector<int64_t> out_dims;
};
Result<ConvSetup> conv_setup(const Node& node, const Tensor& x, const Tensor& w, const Tensor* b,
                             bool transpose);

// Inference-time checks shared by both ops: ranks, group, channel counts (Conv's W is
// [M, C/g, k...], ConvTranspose's [C, M/g, k...]). Nullopt when X's rank is unknown. X and W
// are inputs `x` and `w` of the node (QLinearConv has scales and zero points between them).
struct ConvInferInfo {
  size_t spatial = 0;
  int64_t group = 1;
  std::vector<int64_t> weight_kernel;  // -1 unknown
};
Result<std::optional<ConvInferInfo>> check_conv_shapes(const InferContext& ctx, bool transpose,
                                                       size_t x = 0, size_t w = 1);
// B (input `b`), when present with a known shape, must be [out_channels].
Status check_bias(const InferContext& ctx, const Dim& out_channels, size_t b = 2);

// Conv's output shape from X, W and B (inputs `x`, `w`, `b`) and the window attributes, symbolic
// dims kept; nullopt when X's rank is unknown. Shared by Conv (ops/conv.cc), ConvInteger and
// QLinearConv (ops/integer_conv.cc).
Result<std::optional<Shape>> conv_output_shape(const InferContext& ctx, size_t x = 0, size_t w = 1,
                                               size_t b = 2);

// The ConvTranspose record (ops/conv_transpose.cc); conv_ops() lists it after Conv.
OpDef conv_transpose_def();

}  // namespace opfuse
