// Conv and ConvTranspose through oneDNN's convolution_forward / deconvolution_forward. Weights
// (which must be constant) are reordered once at creation into the layout the primitive prefers;
// activations stay plain NCHW (NCW, NCDHW) in the graph. When oneDNN's only plain-layout
// implementation is its im2col GEMM, the kernel reorders activations to the blocked layout of
// the fast direct implementation and back, inside run().
#pragma once

#include <optional>

#include "kernels/cpu/onednn_common.h"

namespace opfuse::onednn {

// A Conv / ConvTranspose node resolved to static numbers, in oneDNN's terms.
struct ConvGeometry {
  int64_t group = 1;
  Dims x, w, y;  // the node's X, W and Y dims (ONNX layouts)
  Dims strides, dilations, pad_l, pad_r;  // dilations as oneDNN counts them (ONNX's minus 1)
  bool has_bias = false;
  bool pointwise = false;  // 1x1 kernel, stride 1, no padding
};

// The geometry when the node is one the oneDNN kernels handle (f32, static shapes, constant
// weights, pads that oneDNN can express), else nullopt.
std::optional<ConvGeometry> conv_geometry(const KernelCompileContext& ctx, bool transpose);

// Builds the convolution plan; `post_ops` are applied to the output (empty today).
PrimitivePlan build_conv_plan(const KernelCompileContext& ctx, const ConvGeometry& g,
                              const dnnl::post_ops& post_ops);

KernelImpl onednn_conv_kernel();  // "onednn.conv"
// opfuse::FusedConv: the same primitive with the epilogue as oneDNN post-ops (eltwise, and a
// binary add of the residual input 3 in the output's plain layout). Unsupported post-ops leave
// the node to its reference kernel.
KernelImpl onednn_fused_conv_kernel();  // "onednn.fused_conv"

}  // namespace opfuse::onednn
