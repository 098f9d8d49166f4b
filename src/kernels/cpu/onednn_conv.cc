#include "kernels/cpu/onednn_conv.h"

#include "kernels/cpu/onednn_post_ops.h"

#include <span>
#include <string>

#include "ops/conv_common.h"
#include "ops/fused.h"
#include "ops/nn_common.h"

namespace opfuse::onednn {
namespace {

const Tensor* constant_input(const KernelCompileContext& ctx, size_t i) {
  return i < ctx.constants.size() ? ctx.constants[i] : nullptr;
}

}  // namespace

std::optional<ConvGeometry> conv_geometry(const KernelCompileContext& ctx, bool transpose) {
  const Node& node = ctx.node;
  if (node.outputs().size() != 1) return std::nullopt;
  return conv_geometry_for(ctx, static_f32_dims(node.input(0)), static_f32_dims(node.output(0)),
                           transpose);
}

std::optional<ConvGeometry> conv_geometry_for(const KernelCompileContext& ctx,
                                              const std::optional<Dims>& x,
                                              const std::optional<Dims>& y, bool transpose) {
  const Node& node = ctx.node;
  const auto w = static_f32_dims(node.input(1));
  const Tensor* w_data = constant_input(ctx, 1);
  if (!x || !w || !y || w_data == nullptr || w_data->dtype() != DType::kF32 ||
      w_data->dims() != *w) {
    return std::nullopt;
  }
  ConvGeometry g;
  g.x = *x, g.w = *w, g.y = *y;
  const size_t rank = g.x.size();
  if (rank < 3 || rank > 5 || g.w.size() != rank || g.y.size() != rank) return std::nullopt;
  const size_t spatial = rank - 2;
  const AttrReader attrs(node);
  g.group = attrs.get_int("group");
  if (g.group < 1) return std::nullopt;
  const int64_t c = g.x[1];
  const int64_t m = transpose ? g.w[1] * g.group : g.w[0];
  const bool channels_ok = transpose ? (g.w[0] == c && c % g.group == 0)
                                     : (g.w[1] * g.group == c && m % g.group == 0);
  if (!channels_ok || g.y[0] != g.x[0] || g.y[1] != m) return std::nullopt;
  if (node.has_input(2)) {
    const auto b = static_f32_dims(node.input(2));
    if (!b || *b != Dims{m}) return std::nullopt;
    g.has_bias = true;
  }

  const std::string who = node.describe();
  const Dims kernel(g.w.begin() + 2, g.w.end());
  auto wa = read_window_attrs(attrs, spatial, kernel, true, who);
  if (!wa.is_ok()) return std::nullopt;
  TransposeAttrs ta;
  if (transpose) {
    auto t = read_transpose_attrs(attrs, spatial, who);
    if (!t.is_ok()) return std::nullopt;
    ta = *t;
  }
  g.pointwise = true;
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t in = g.x[2 + i], k = kernel[i], s = wa->strides[i], d = wa->dilations[i];
    auto dim = transpose ? conv_transpose_dim(*wa, i, in, ta.output_padding, ta.output_shape, who)
                         : window_dim(*wa, i, in, false, who);
    if (!dim.is_ok() || dim->out != g.y[2 + i]) return std::nullopt;
    const int64_t extent = (k - 1) * d + 1;
    // oneDNN derives the output size from the pads, so the end pad is whatever makes its
    // formula give the node's output size: for ConvTranspose that folds output_padding and
    // output_shape in, and goes negative when they extend the output past the end pad
    // (oneDNN's deconvolution handles that; the tests cover it against the reference).
    const int64_t pad_r = transpose ? (in - 1) * s + extent - dim->pad_begin - dim->out
                                    : dim->pad_end;
    if ((!transpose && pad_r < 0) || dim->pad_begin < 0) return std::nullopt;
    if (!transpose && (in + dim->pad_begin + pad_r - extent) / s + 1 != dim->out) {
      return std::nullopt;
    }
    g.strides.push_back(s);
    g.dilations.push_back(d - 1);
    g.pad_l.push_back(dim->pad_begin);
    g.pad_r.push_back(pad_r);
    if (k != 1 || s != 1 || dim->pad_begin != 0 || pad_r != 0) g.pointwise = false;
  }
  g.x_prim = g.x, g.w_prim = g.w, g.y_prim = g.y;
  if (spatial == 1 && !transpose) {
    for (Dims* d : {&g.x_prim, &g.w_prim, &g.y_prim}) d->insert(d->begin() + 2, 1);
    g.strides.insert(g.strides.begin(), 1);
    g.dilations.insert(g.dilations.begin(), 0);
    g.pad_l.insert(g.pad_l.begin(), 0);
    g.pad_r.insert(g.pad_r.begin(), 0);
  }
  return g;
}

PrimitivePlan build_conv_plan(const KernelCompileContext& ctx, const ConvGeometry& g,
                              const dnnl::post_ops& post_ops) {
  using dnnl::convolution_forward;
  const int64_t m = g.w[0];
  // ONNX's [M, C/g, k...] is oneDNN's grouped [g, M/g, C/g, k...] with the same memory order.
  Dims w_dims = g.w_prim;
  if (g.group > 1) {
    w_dims[0] = m / g.group;
    w_dims.insert(w_dims.begin(), g.group);
  }
  const dnnl::memory::desc x_md = plain_desc(g.x_prim), y_md = plain_desc(g.y_prim);
  const dnnl::memory::desc b_md = g.has_bias ? plain_desc({m}) : dnnl::memory::desc();
  const dnnl::primitive_attr attr = make_attr(post_ops);
  auto make_pd = [&](const dnnl::memory::desc& src, const dnnl::memory::desc& dst) {
    const auto desc = g.has_bias
        ? convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                    dnnl::algorithm::convolution_direct, src, any_desc(w_dims),
                                    b_md, dst, g.strides, g.dilations, g.pad_l, g.pad_r)
        : convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                    dnnl::algorithm::convolution_direct, src, any_desc(w_dims),
                                    dst, g.strides, g.dilations, g.pad_l, g.pad_r);
    return convolution_forward::primitive_desc(desc, attr, cpu_engine());
  };
  const auto pd = prefer_direct_kernel(make_pd(x_md, y_md), make_pd, g, /*gemm_ok_for_pointwise=*/true);
  return assemble_conv_plan<convolution_forward>(ctx, g, pd, plain_desc(w_dims), m);
}

namespace {

bool conv_supports(const KernelCompileContext& ctx) {
  const auto g = conv_geometry(ctx, false);
  if (!g) return false;
  return try_dnnl<bool>([&] {
           build_conv_plan(ctx, *g, dnnl::post_ops());
           return true;
         }).has_value();
}

Result<std::unique_ptr<Kernel>> conv_create(const KernelCompileContext& ctx) {
  const auto g = conv_geometry(ctx, false);
  if (!g) return Status::internal_error(str_cat(ctx.node.describe(), ": not an onednn.conv node"));
  return make_kernel("onednn.conv", ctx.node,
                     [&] { return build_conv_plan(ctx, *g, dnnl::post_ops()); });
}

}  // namespace

KernelImpl onednn_conv_kernel() { return {"onednn.conv", "Conv", conv_supports, conv_create}; }

// ---------------------------------------------------------------- opfuse::FusedConv
//
// The epilogue's cheap leading post-ops (relu, clip, linear, the residual add as a binary
// post-op reading input 3) go into the convolution primitive; the rest (sigmoid, swish,
// hardswish, gelu ..., which oneDNN 2.6's conv kernels apply at about 1 ns per element) run
// after it as our own vector pass over the output (HostEpilogueKernel, costs in
// hwy_epilogue.h). On oneDNN 2.6's GEMM implementation (plain 1x1 convs: ResNet's and
// MobileNet's pointwise convs) every post-op is slow, even a lone ReLU (measured on
// mobilenet_v3_large's 1x1 16->64 conv at 112x112: 1.3 ms plain, 6.0-6.6 ms with eltwise_relu),
// so there the whole epilogue runs as our pass: one pass over y, one fewer than unfused ops.

namespace {

using PostOps = std::vector<PostOp>;

// The convolution with `head` as post-ops (the residual add as a binary post-op).
std::optional<PrimitivePlan> in_primitive_plan(const KernelCompileContext& ctx, const ConvGeometry& g,
                                               std::span<const PostOp> head) {
  int residual = -1;
  const auto ops = make_post_ops(head, plain_desc(g.y_prim), residual);
  if (!ops) return std::nullopt;
  auto plan = try_dnnl<PrimitivePlan>([&] { return build_conv_plan(ctx, g, *ops); });
  if (plan && residual >= 0) {
    plan->bindings.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(residual) | DNNL_ARG_SRC_1, 3, g.y,
                              plain_desc(g.y_prim), {}});
  }
  return plan;
}

std::string impl_of(const dnnl::primitive& prim) {
  const_dnnl_primitive_desc_t pd = nullptr;
  const char* info = nullptr;
  if (dnnl_primitive_get_primitive_desc(prim.get(), &pd) != dnnl_success ||
      dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &info) != dnnl_success) {
    return "";
  }
  return info ? info : "";
}

struct FusedPlan {
  PrimitivePlan conv;
  PostOps rest;  // run after the primitive, by HostEpilogueKernel
};

std::optional<FusedPlan> fused_plan(const KernelCompileContext& ctx) {
  if (ctx.node.domain() != kFusedDomain) return std::nullopt;
  const auto g = conv_geometry(ctx, false);
  auto epilogue = read_epilogue(ctx.node);
  if (!g || !epilogue.is_ok()) return std::nullopt;
  bool residual = false;
  for (const PostOp& op : *epilogue) residual |= op.spec->reads_residual;
  if (residual && (!ctx.node.has_input(3) || static_f32_dims(ctx.node.input(3)) != g->y)) {
    return std::nullopt;
  }
  size_t keep = placed_post_ops(*epilogue, ctx, cheap_conv_post_ops(*epilogue, ctx));
  auto conv = in_primitive_plan(ctx, *g, std::span<const PostOp>(*epilogue).first(keep));
  if (conv && keep > 0) {
    const std::string impl = impl_of(conv->prim);
    if (impl.find("gemm") != std::string::npos || impl.find("ref") != std::string::npos) {
      keep = 0;
      conv = in_primitive_plan(ctx, *g, {});
    }
  }
  if (!conv) return std::nullopt;
  PostOps rest(epilogue->begin() + static_cast<std::ptrdiff_t>(keep), epilogue->end());
  if (!hwy_cpu::vector_epilogue(rest)) return std::nullopt;
  return FusedPlan{std::move(*conv), std::move(rest)};
}

bool fused_conv_supports(const KernelCompileContext& ctx) { return fused_plan(ctx).has_value(); }

Result<std::unique_ptr<Kernel>> fused_conv_create(const KernelCompileContext& ctx) {
  auto plan = fused_plan(ctx);
  if (!plan) {
    return Status::internal_error(str_cat(ctx.node.describe(), ": not an onednn.fused_conv node"));
  }
  OPFUSE_ASSIGN_OR_RETURN(auto kernel, make_kernel("onednn.fused_conv", ctx.node,
                                                   [&] { return std::move(plan->conv); }));
  return with_host_epilogue(ctx.node, std::move(kernel), plan->rest);
}

}  // namespace

KernelImpl onednn_fused_conv_kernel() {
  return {"onednn.fused_conv", "FusedConv", fused_conv_supports, fused_conv_create};
}

}  // namespace opfuse::onednn
