#include "kernels/cpu/onednn_conv_transpose.h"

#include "kernels/cpu/onednn_conv.h"
#include "kernels/cpu/onednn_post_ops.h"
#include "ops/fused.h"

namespace opfuse::onednn {
namespace {

// The deconvolution alone: a bias only when it is computed at run time (bias_for_own_pass).
PrimitivePlan build_deconv_plan(const KernelCompileContext& ctx, const ConvGeometry& g) {
  using dnnl::deconvolution_forward;
  const int64_t c = g.x[1], mg = g.w[1], cg = c / g.group, m = mg * g.group;
  const Dims kernel(g.w.begin() + 2, g.w.end());
  int64_t k_size = 1;
  for (int64_t k : kernel) k_size *= k;
  // ONNX stores W as [C, M/g, k...] = [g, C/g, M/g, k...]; oneDNN indexes deconvolution weights
  // as [g, M/g (out), C/g (in), k...], so describe ONNX's buffer with swapped strides.
  Dims w_dims = {mg, cg}, w_strides = {k_size, mg * k_size};
  if (g.group > 1) {
    w_dims.insert(w_dims.begin(), g.group);
    w_strides.insert(w_strides.begin(), cg * mg * k_size);
  }
  const Dims k_strides = row_major_strides(kernel);
  w_dims.insert(w_dims.end(), kernel.begin(), kernel.end());
  w_strides.insert(w_strides.end(), k_strides.begin(), k_strides.end());

  const dnnl::memory::desc x_md = plain_desc(g.x), y_md = plain_desc(g.y);
  const dnnl::memory::desc b_md = g.has_bias ? plain_desc({m}) : dnnl::memory::desc();
  const dnnl::primitive_attr attr = make_attr();
  auto make_pd = [&](const dnnl::memory::desc& src, const dnnl::memory::desc& dst) {
    const auto desc = g.has_bias
        ? deconvolution_forward::desc(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::deconvolution_direct, src,
                                      any_desc(w_dims), b_md, dst, g.strides, g.dilations,
                                      g.pad_l, g.pad_r)
        : deconvolution_forward::desc(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::deconvolution_direct, src,
                                      any_desc(w_dims), dst, g.strides, g.dilations, g.pad_l,
                                      g.pad_r);
    return deconvolution_forward::primitive_desc(desc, attr, cpu_engine());
  };
  // Fewer output channels than a block: the direct kernel's blocked output pads them to 16 and
  // does as much work as for 16, and the input's reorder is most of the rest. PP-OCR's head, 24 ->
  // 1 channels, 2x2 stride 2 from 320x320 (Zen 4, AVX-512, 2 threads): the plain GEMM 0.44 ms,
  // the blocked direct kernel with its reorders 5.5 ms.
  auto plain = make_pd(x_md, y_md);
  const bool few_channels = m < 16 && !is_reference_impl(plain);
  const auto pd = few_channels ? plain : prefer_direct_kernel(plain, make_pd, g, /*gemm_ok_for_pointwise=*/false);
  return assemble_conv_plan<deconvolution_forward>(ctx, g, pd, strided_desc(w_dims, w_strides), m);
}

// oneDNN 2.6's deconvolution applies its bias and every post-op in loops of its own after the
// product. PP-OCR's detector head, 24 -> 24 channels, 2x2 stride 2 to 320x320 (Zen 4, AVX-512, 2
// threads): the product 1.0 ms (nChw16c) to 3.8 ms (nchw), +3-5 ms with the bias, +30-50 ms with
// a relu post-op (24 -> 1 channels to 640x640 on a Zen 5: 65 ms with eltwise_linear against 3.8
// ms). So a constant bias and the whole epilogue run in our own pass after it, channel by
// channel (HostEpilogueKernel); the primitive gets neither.
ChannelBias bias_for_own_pass(const KernelCompileContext& ctx, ConvGeometry& g) {
  const Tensor* b = g.has_bias ? ctx.f32_constant(2, {g.y[1]}) : nullptr;
  if (b == nullptr) return {};  // none, or computed at run time: oneDNN adds it
  g.has_bias = false;
  ChannelBias out;
  out.values.assign(b->data<float>(), b->data<float>() + g.y[1]);
  for (size_t i = 2; i < g.y.size(); ++i) out.spatial *= g.y[i];
  return out;
}

bool deconv_supports(const KernelCompileContext& ctx) {
  auto g = conv_geometry(ctx, true);
  if (!g) return false;
  bias_for_own_pass(ctx, *g);
  return try_dnnl<bool>([&] {
           build_deconv_plan(ctx, *g);
           return true;
         }).has_value();
}

Result<std::unique_ptr<Kernel>> deconv_create(const KernelCompileContext& ctx) {
  auto g = conv_geometry(ctx, true);
  if (!g) {
    return Status::internal_error(
        str_cat(ctx.node.describe(), ": not an onednn.conv_transpose node"));
  }
  ChannelBias bias = bias_for_own_pass(ctx, *g);
  OPFUSE_ASSIGN_OR_RETURN(auto deconv, make_kernel("onednn.conv_transpose", ctx.node,
                                                    [&] { return build_deconv_plan(ctx, *g); }));
  return with_host_epilogue(ctx.node, std::move(deconv), {}, std::move(bias));
}

// opfuse::FusedConvTranspose: the same primitive, then the bias and the whole epilogue in our
// own pass (above); an "add" reads the residual input 3 in the output's plain layout.
struct FusedDeconvPlan {
  PrimitivePlan deconv;
  std::vector<PostOp> epilogue;
  ChannelBias bias;
};

std::optional<FusedDeconvPlan> fused_deconv_plan(const KernelCompileContext& ctx) {
  if (ctx.node.domain() != kFusedDomain) return std::nullopt;
  auto g = conv_geometry(ctx, true);
  auto epilogue = read_epilogue(ctx.node);
  if (!g || !epilogue.is_ok() || !hwy_cpu::vector_epilogue(*epilogue)) return std::nullopt;
  bool residual = false;
  for (const PostOp& op : *epilogue) residual |= op.spec->reads_residual;
  if (residual != ctx.node.has_input(3)) return std::nullopt;
  if (residual && static_f32_dims(ctx.node.input(3)) != g->y) return std::nullopt;
  ChannelBias bias = bias_for_own_pass(ctx, *g);
  auto plan = try_dnnl<PrimitivePlan>([&] { return build_deconv_plan(ctx, *g); });
  if (!plan) return std::nullopt;
  return FusedDeconvPlan{std::move(*plan), std::move(*epilogue), std::move(bias)};
}

bool fused_deconv_supports(const KernelCompileContext& ctx) { return fused_deconv_plan(ctx).has_value(); }

Result<std::unique_ptr<Kernel>> fused_deconv_create(const KernelCompileContext& ctx) {
  auto plan = fused_deconv_plan(ctx);
  if (!plan) {
    return Status::internal_error(str_cat(ctx.node.describe(), ": not an onednn.fused_conv_transpose node"));
  }
  OPFUSE_ASSIGN_OR_RETURN(auto deconv, make_kernel("onednn.fused_conv_transpose", ctx.node,
                                                    [&] { return std::move(plan->deconv); }));
  return with_host_epilogue(ctx.node, std::move(deconv), plan->epilogue, std::move(plan->bias));
}

}  // namespace

KernelImpl onednn_fused_conv_transpose_kernel() {
  return {"onednn.fused_conv_transpose", "FusedConvTranspose", fused_deconv_supports, fused_deconv_create};
}

KernelImpl onednn_conv_transpose_kernel() {
  return {"onednn.conv_transpose", "ConvTranspose", deconv_supports, deconv_create};
}

}  // namespace opfuse::onednn
