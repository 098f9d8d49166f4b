// Conv and ConvTranspose through oneDNN's convolution_forward / deconvolution_forward. Weights
// (which must be constant) are reordered once at creation into the layout the primitive prefers;
// activations stay plain NCHW (NCW, NCDHW) in the graph. When oneDNN's only plain-layout
// implementation is its im2col GEMM, the kernel reorders activations to the blocked layout of
// the fast direct implementation and back, inside run().
#pragma once

#include <optional>
#include <span>
#include <string>

#include "kernels/cpu/onednn_common.h"
#include "ops/fused.h"

namespace opfuse::onednn {

// A Conv / ConvTranspose node resolved to static numbers, in oneDNN's terms.
struct ConvGeometry {
  int64_t group = 1;
  Dims x, w, y;  // the node's X, W and Y dims (ONNX layouts)
  // The same as the primitive sees them: a 1-d convolution runs as a 2-d one of height 1 (oneDNN
  // 2.6 gives 1-d convs only its GEMM implementation, which runs a grouped conv as one tiny GEMM
  // per group: Silero VAD's 258-channel depthwise conv over 8 positions took 72 us).
  Dims x_prim, w_prim, y_prim;
  Dims strides, dilations, pad_l, pad_r;  // of the primitive; dilations as oneDNN counts them (ONNX's minus 1)
  bool has_bias = false;
  bool pointwise = false;  // 1x1 kernel, stride 1, no padding
};

// The geometry when the node is one the oneDNN kernels handle (f32, static shapes, constant
// weights, pads that oneDNN can express), else nullopt.
std::optional<ConvGeometry> conv_geometry(const KernelCompileContext& ctx, bool transpose);
// The same with X's and Y's logical dims given (kernels whose activations are not plain tensors,
// e.g. onednn.blocked_conv on nChw16c data).
std::optional<ConvGeometry> conv_geometry_for(const KernelCompileContext& ctx,
                                              const std::optional<Dims>& x,
                                              const std::optional<Dims>& y, bool transpose);

// On plain activations oneDNN may only offer its im2col GEMM (or reference loops) for a
// (de)convolution, 4-6x slower than its direct blocked kernels for spatial kernels; two
// activation reorders cost far less. So when the plain choice is GEMM/reference, take the
// blocked-layout primitive (make_pd(any, any)) if oneDNN has a non-reference one. Pointwise
// convs keep the plain GEMM when `gemm_ok_for_pointwise`: it is as fast there.
template <typename PrimitiveDesc, typename MakePd>
PrimitiveDesc prefer_direct_kernel(PrimitiveDesc plain, MakePd make_pd, const ConvGeometry& g,
                                   bool gemm_ok_for_pointwise) {
  const std::string impl = plain.impl_info_str();
  const bool slow = impl.find("gemm") != std::string::npos || is_reference_impl(plain);
  if (!slow || (gemm_ok_for_pointwise && g.pointwise)) return plain;
  auto blocked = try_dnnl<PrimitiveDesc>([&] { return make_pd(any_desc(g.x_prim), any_desc(g.y_prim)); });
  if (blocked && !is_reference_impl(*blocked)) {
    return *blocked;
  }
  return plain;
}

// The activations as the caller keeps them: their tensor dims and oneDNN descriptors (plain
// NCHW, or the O3 blocked layout).
struct ConvActivations {
  Dims x_dims, y_dims;
  dnnl::memory::desc x_md, y_md;
};

// The plan around a chosen (de)convolution primitive: activation reorders when it runs blocked,
// input 0 bound at run time, the weights (described by `w_user_md` over the ONNX buffer) packed
// once into the primitive's layout, and the bias (constant: packed; else bound from input 2).
template <typename Primitive>
PrimitivePlan assemble_conv_plan(const KernelCompileContext& ctx, const ConvGeometry& g,
                                 const typename Primitive::primitive_desc& pd,
                                 const dnnl::memory::desc& w_user_md, int64_t out_channels,
                                 const ConvActivations& act) {
  PrimitivePlan plan;
  set_primitive<Primitive>(plan, pd);
  add_layout_reorders(plan, act.x_md, pd.src_desc(), act.y_md, pd.dst_desc());
  plan.dst_dims = act.y_dims;
  plan.dst_md = act.y_md;
  plan.bindings.push_back({DNNL_ARG_SRC, 0, act.x_dims, act.x_md, {}});
  plan.bindings.push_back({DNNL_ARG_WEIGHTS, -1, g.w, pd.weights_desc(),
                           pack(w_user_md, ctx.constants[1]->raw_data(), pd.weights_desc())});
  if (ctx.node.domain() == kFusedDomain && ctx.node.has_input(kInputScale)) {
    const auto s = static_f32_dims(ctx.node.input(kInputScale));
    if (!s) throw dnnl::error(dnnl_invalid_arguments, "input scale without static f32 dims");
    plan.weight_scale = make_weight_scale(w_user_md, pd.weights_desc(), g.w, g.group,
                                          static_cast<int>(kInputScale), *s);
  }
  if (g.has_bias) {
    const dnnl::memory::desc b_md = plain_desc({out_channels});
    const Tensor* b = ctx.constants.size() > 2 ? ctx.constants[2] : nullptr;
    if (b != nullptr) {
      plan.bindings.push_back({DNNL_ARG_BIAS, -1, {out_channels}, b_md, pack(b_md, b->raw_data(), b_md)});
    } else {
      plan.bindings.push_back({DNNL_ARG_BIAS, 2, {out_channels}, b_md, {}});
    }
  }
  return plan;
}

// On plain NCHW activations.
template <typename Primitive>
PrimitivePlan assemble_conv_plan(const KernelCompileContext& ctx, const ConvGeometry& g,
                                 const typename Primitive::primitive_desc& pd,
                                 const dnnl::memory::desc& w_user_md, int64_t out_channels) {
  return assemble_conv_plan<Primitive>(ctx, g, pd, w_user_md, out_channels,
                                       {g.x, g.y, plain_desc(g.x_prim), plain_desc(g.y_prim)});
}

// Builds the convolution plan; `post_ops` are applied to the output (empty today).
PrimitivePlan build_conv_plan(const KernelCompileContext& ctx, const ConvGeometry& g,
                              const dnnl::post_ops& post_ops);

KernelImpl onednn_conv_kernel();  // "onednn.conv"
// opfuse::FusedConv: the same primitive with the epilogue as oneDNN post-ops (eltwise, and a
// binary add of the residual input 3 in the output's plain layout). Unsupported post-ops leave
// the node to its reference kernel.
KernelImpl onednn_fused_conv_kernel();  // "onednn.fused_conv"

}  // namespace opfuse::onednn
