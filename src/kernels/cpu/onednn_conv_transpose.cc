#include "kernels/cpu/onednn_conv_transpose.h"

#include "kernels/cpu/onednn_conv.h"
#include "kernels/cpu/onednn_post_ops.h"
#include "ops/fused.h"

namespace opfuse::onednn {
namespace {

PrimitivePlan build_deconv_plan(const KernelCompileContext& ctx, const ConvGeometry& g,
                                const dnnl::post_ops& post_ops) {
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
  const dnnl::primitive_attr attr = make_attr(post_ops);
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
  const auto pd = prefer_direct_kernel(make_pd(x_md, y_md), make_pd, g, /*gemm_ok_for_pointwise=*/false);
  return assemble_conv_plan<deconvolution_forward>(ctx, g, pd, strided_desc(w_dims, w_strides), m);
}

bool deconv_supports(const KernelCompileContext& ctx) {
  const auto g = conv_geometry(ctx, true);
  if (!g) return false;
  return try_dnnl<bool>([&] {
           build_deconv_plan(ctx, *g, dnnl::post_ops());
           return true;
         }).has_value();
}

Result<std::unique_ptr<Kernel>> deconv_create(const KernelCompileContext& ctx) {
  const auto g = conv_geometry(ctx, true);
  if (!g) {
    return Status::internal_error(
        str_cat(ctx.node.describe(), ": not an onednn.conv_transpose node"));
  }
  return make_kernel("onednn.conv_transpose", ctx.node,
                     [&] { return build_deconv_plan(ctx, *g, dnnl::post_ops()); });
}

// opfuse::FusedConvTranspose: the same primitive with the epilogue as post-ops, the residual
// (input 3) as a binary add in the output's plain layout; from the first post-op oneDNN would
// not keep NaN through (onednn_post_ops.h), the rest runs as our own pass.
struct FusedDeconvPlan {
  PrimitivePlan deconv;
  std::vector<PostOp> rest;
};

std::optional<FusedDeconvPlan> fused_deconv_plan(const KernelCompileContext& ctx) {
  if (ctx.node.domain() != kFusedDomain) return std::nullopt;
  const auto g = conv_geometry(ctx, true);
  auto epilogue = read_epilogue(ctx.node);
  if (!g || !epilogue.is_ok()) return std::nullopt;
  if (ctx.node.has_input(3) && static_f32_dims(ctx.node.input(3)) != g->y) return std::nullopt;
  const std::span<const PostOp> all(*epilogue);
  // With fewer output channels than a vector holds, oneDNN 2.6's deconvolution with any post-op
  // is an order of magnitude slower than without (PaddleOCR's detector head, 24 -> 1 channels,
  // 2x2 stride 2 to 640x640: 65 ms with eltwise_linear vs 3.8 ms plain, Zen 5 AVX-512): those
  // run every post-op in our own pass.
  const bool few_channels = g->y.size() > 1 && g->y[1] < 16;
  const auto head = all.first(few_channels ? 0 : placed_post_ops(all, ctx, nan_keeping_post_ops(all, ctx)));
  std::vector<PostOp> rest(all.begin() + static_cast<std::ptrdiff_t>(head.size()), all.end());
  if (!hwy_cpu::vector_epilogue(rest)) return std::nullopt;
  bool residual_in_rest = false;
  for (const PostOp& op : rest) residual_in_rest |= op.spec->reads_residual;
  int residual = -1;
  const auto ops = make_post_ops(head, plain_desc(g->y), residual);
  if (!ops || (residual >= 0 || residual_in_rest) != ctx.node.has_input(3)) return std::nullopt;
  auto plan = try_dnnl<PrimitivePlan>([&] { return build_deconv_plan(ctx, *g, *ops); });
  if (!plan) return std::nullopt;
  if (residual >= 0) {
    plan->bindings.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(residual) | DNNL_ARG_SRC_1, 3, g->y,
                              plain_desc(g->y), {}});
  }
  return FusedDeconvPlan{std::move(*plan), std::move(rest)};
}

bool fused_deconv_supports(const KernelCompileContext& ctx) { return fused_deconv_plan(ctx).has_value(); }

Result<std::unique_ptr<Kernel>> fused_deconv_create(const KernelCompileContext& ctx) {
  auto plan = fused_deconv_plan(ctx);
  if (!plan) {
    return Status::internal_error(str_cat(ctx.node.describe(), ": not an onednn.fused_conv_transpose node"));
  }
  OPFUSE_ASSIGN_OR_RETURN(auto deconv, make_kernel("onednn.fused_conv_transpose", ctx.node,
                                                    [&] { return std::move(plan->deconv); }));
  return with_host_epilogue(ctx.node, std::move(deconv), plan->rest);
}

}  // namespace

KernelImpl onednn_fused_conv_transpose_kernel() {
  return {"onednn.fused_conv_transpose", "FusedConvTranspose", fused_deconv_supports, fused_deconv_create};
}

KernelImpl onednn_conv_transpose_kernel() {
  return {"onednn.conv_transpose", "ConvTranspose", deconv_supports, deconv_create};
}

}  // namespace opfuse::onednn
