// oneDNN kernels of the blocked-layout ops (ops/layout_ops.cc): a blocked tensor
// f32[N, Cb, H, W, b] is, byte for byte, oneDNN's nChw16c (b = 16) or nChw8c (b = 8) memory of
// the logical [N, C, H, W] (C <= Cb * b; oneDNN pads C up to a multiple of b the same way), or
// its nhwc memory when Cb = 1 and b = C (channels-last). So
// the kernels only describe the same buffers with blocked memory descriptors:
//   opfuse::ToBlocked / FromBlocked / Reblock -> one oneDNN reorder (it writes zeros into padded lanes);
//   opfuse::BlockedConv            -> convolution_forward with blocked src (or plain nchw for a
//                                      first conv) and dst, the epilogue's cheap leading post-ops
//                                      inside it (the residual add as a sum post-op over Y, which
//                                      holds R: the plan shares R's buffer with Y when R dies
//                                      there, else R is copied in; a binary post-op where sum
//                                      has no fast kernel), the rest as our own pass
//                                      (HostEpilogueKernel).
//   opfuse::BlockedConvDepthwise   -> the pointwise conv's convolution_forward with its whole
//                                      epilogue and then the depthwise conv as post-ops
//                                      (append_dw), when oneDNN runs that as one jit kernel
//                                      (jit_1x1 computing rows of the expanded tensor into a
//                                      per-thread buffer and convolving them); never its
//                                      ref_fused_convolution, which runs the two apart.
// Weights are packed once at creation into the primitive's preferred layout, like onednn.conv.
#include "kernels/cpu/onednn_blocked.h"

#include <string>

#include "kernels/cpu/onednn_conv.h"
#include "kernels/cpu/onednn_post_ops.h"
#include "kernels/omp_threads.h"
#include "ops/fused.h"
#include "ops/layout_ops.h"

namespace opfuse::onednn {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The oneDNN layout of `c` channels in blocks of `lanes`.
std::optional<dnnl::memory::format_tag> block_tag(int64_t lanes, int64_t c) {
  if (lanes == 16) return dnnl::memory::format_tag::nChw16c;
  if (lanes == 8) return dnnl::memory::format_tag::nChw8c;
  if (lanes == c) return dnnl::memory::format_tag::nhwc;
  return std::nullopt;
}

// `lanes`: the blocked tensor's last dim.
dnnl::memory::desc blocked_desc(const Dims& logical, int64_t lanes) {
  return dnnl::memory::desc(logical, dnnl::memory::data_type::f32, *block_tag(lanes, logical[1]));
}

// The logical [N, C, H, W] of a blocked [N, Cb, H, W, b] holding `c` channels.
std::optional<Dims> logical_dims(const Dims& blocked, int64_t c) {
  if (blocked.size() != 5 || !block_tag(blocked[4], c) || blocked[1] != ceil_div(c, blocked[4])) {
    return std::nullopt;
  }
  return Dims{blocked[0], c, blocked[2], blocked[3]};
}

// ---------------------------------------------------------------- reorders

struct ReorderGeometry {
  Dims from_dims, to_dims;
  dnnl::memory::desc from_md, to_md;
};

std::optional<ReorderGeometry> reorder_geometry(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  const auto x = static_f32_dims(node.input(0));
  const auto y = static_f32_dims(node.output(0));
  if (!x || !y) return std::nullopt;
  if (node.op_type() == "Reblock") {  // blocked -> blocked: both hold `channels`
    const int64_t c = AttrReader(node).get_int("channels");
    const auto from = logical_dims(*x, c), to = logical_dims(*y, c);
    if (!from || !to || *from != *to) return std::nullopt;
    return ReorderGeometry{*x, *y, blocked_desc(*from, (*x)[4]), blocked_desc(*to, (*y)[4])};
  }
  const bool to_blocked = node.op_type() == "ToBlocked";
  const Dims& plain = to_blocked ? *x : *y;
  const Dims& blocked = to_blocked ? *y : *x;
  if (plain.size() != 4) return std::nullopt;
  const auto logical = logical_dims(blocked, plain[1]);
  if (!logical || *logical != plain) return std::nullopt;
  const dnnl::memory::desc p = plain_desc(plain), b = blocked_desc(plain, blocked[4]);
  return to_blocked ? ReorderGeometry{*x, *y, p, b} : ReorderGeometry{*x, *y, b, p};
}

PrimitivePlan build_reorder_plan(const ReorderGeometry& g) {
  const dnnl::reorder::primitive_desc pd(cpu_engine(), g.from_md, cpu_engine(), g.to_md, make_attr());
  PrimitivePlan plan;
  plan.scratchpad = pd.scratchpad_desc();
  plan.prim = dnnl::reorder(pd);
  plan.dst_dims = g.to_dims;
  plan.dst_md = g.to_md;
  plan.bindings.push_back({DNNL_ARG_FROM, 0, g.from_dims, g.from_md, {}});
  return plan;
}

bool reorder_supports(const KernelCompileContext& ctx) {
  if (ctx.node.domain() != kFusedDomain) return false;
  const auto g = reorder_geometry(ctx);
  return g && try_dnnl<bool>([&] {
                build_reorder_plan(*g);
                return true;
              }).has_value();
}

Result<std::unique_ptr<Kernel>> reorder_create(const KernelCompileContext& ctx) {
  const auto g = reorder_geometry(ctx);
  if (!g) return Status::internal_error(str_cat(ctx.node.describe(), ": not an onednn.reorder node"));
  return make_kernel("onednn.reorder", ctx.node, [&] { return build_reorder_plan(*g); });
}

// ---------------------------------------------------------------- BlockedConv

struct BlockedConvGeometry {
  ConvGeometry conv;  // logical dims
  Dims x_dims, y_dims;  // the tensors' dims (X plain or blocked; Y blocked)
  bool x_blocked = true;
};

std::optional<BlockedConvGeometry> blocked_conv_geometry(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  if (node.domain() != kFusedDomain || node.outputs().size() != 1) return std::nullopt;
  const auto x = static_f32_dims(node.input(0));
  const auto w = static_f32_dims(node.input(1));
  const auto y = static_f32_dims(node.output(0));
  if (!x || !w || !y || w->size() != 4 || y->size() != 5) return std::nullopt;
  BlockedConvGeometry g;
  const int64_t block = AttrReader(node).get_int("block");
  const int64_t c = (*w)[1] * AttrReader(node).get_int("group"), m = (*w)[0];
  g.x_blocked = x->size() == 5;
  const auto x_logical = g.x_blocked ? logical_dims(*x, c) : std::optional<Dims>(*x);
  const auto y_logical = logical_dims(*y, m);
  if (!x_logical || !y_logical) return std::nullopt;
  // The attribute's layout (0: channels-last) must be the one the dims spell.
  if ((*y)[4] != (block == 0 ? m : block) || (g.x_blocked && (*x)[4] != (block == 0 ? c : block))) {
    return std::nullopt;
  }
  auto conv = conv_geometry_for(ctx, x_logical, y_logical, false);
  if (!conv || conv->x.size() != 4) return std::nullopt;
  g.conv = *conv;
  g.x_dims = *x;
  g.y_dims = *y;
  return g;
}

PrimitivePlan build_blocked_conv_plan(const KernelCompileContext& ctx, const BlockedConvGeometry& bg,
                                      const std::vector<PostOp>& epilogue, ResidualAs residual_as) {
  using dnnl::convolution_forward;
  const ConvGeometry& g = bg.conv;
  const int64_t m = g.w[0];
  Dims w_dims = g.w;
  if (g.group > 1) {  // ONNX's [M, C/g, k...] is oneDNN's [g, M/g, C/g, k...]
    w_dims[0] = m / g.group;
    w_dims.insert(w_dims.begin(), g.group);
  }
  const dnnl::memory::desc x_md = bg.x_blocked ? blocked_desc(g.x, bg.x_dims[4]) : plain_desc(g.x);
  const dnnl::memory::desc y_md = blocked_desc(g.y, bg.y_dims[4]);
  const dnnl::memory::desc b_md = g.has_bias ? plain_desc({m}) : dnnl::memory::desc();
  int residual = -1;
  const auto ops = make_post_ops(epilogue, y_md, residual, residual_as);
  if (!ops) throw dnnl::error(dnnl_unimplemented, "post-op without a oneDNN counterpart");
  auto make_pd = [&](const dnnl::memory::desc& src, const dnnl::memory::desc& dst) {
    const auto desc = g.has_bias
        ? convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                    dnnl::algorithm::convolution_direct, src, any_desc(w_dims), b_md,
                                    dst, g.strides, g.dilations, g.pad_l, g.pad_r)
        : convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                    dnnl::algorithm::convolution_direct, src, any_desc(w_dims), dst,
                                    g.strides, g.dilations, g.pad_l, g.pad_r);
    return convolution_forward::primitive_desc(desc, make_attr(*ops), cpu_engine());
  };
  // Some shapes have only oneDNN's reference loops on the blocked layout (measured: dilated
  // 3x3 convs with dilation 12-36, DeepLabV3's ASPP, 1000x slower). Then let oneDNN pick the
  // layout and reorder around the primitive inside the kernel, as onednn.conv does on plain data.
  auto pd = make_pd(x_md, y_md);
  if (is_reference_impl(pd)) {
    auto any = try_dnnl<convolution_forward::primitive_desc>([&] { return make_pd(any_desc(g.x), any_desc(g.y)); });
    if (any && !is_reference_impl(*any)) pd = *any;
  }
  PrimitivePlan plan = assemble_conv_plan<convolution_forward>(ctx, g, pd, plain_desc(w_dims), m,
                                                                {bg.x_dims, bg.y_dims, x_md, y_md});
  if (residual >= 0 && residual_as == ResidualAs::kSum) {
    // The sum accumulates into dst, so dst must be Y itself, not a temporary in another layout.
    if (plan.dst_reorder) throw dnnl::error(dnnl_unimplemented, "sum post-op with a dst reorder");
    plan.accumulate_input = 3;
  } else if (residual >= 0) {
    plan.bindings.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(residual) | DNNL_ARG_SRC_1, 3,
                             bg.y_dims, y_md, {}});
  }
  return plan;
}

// The residual add as a sum post-op where oneDNN runs it without falling back to reference
// loops (and Y is R's buffer when R dies here), else as a binary post-op.
PrimitivePlan build_blocked_conv_plan(const KernelCompileContext& ctx, const BlockedConvGeometry& bg,
                                      const std::vector<PostOp>& epilogue) {
  auto with_sum = try_dnnl<PrimitivePlan>([&] { return build_blocked_conv_plan(ctx, bg, epilogue, ResidualAs::kSum); });
  if (with_sum) return *with_sum;
  return build_blocked_conv_plan(ctx, bg, epilogue, ResidualAs::kBinary);
}

// The epilogue's leading post-ops that run inside the primitive; the rest run after it as our
// own pass (onednn_post_ops.h: HostEpilogueKernel).
std::span<const PostOp> in_primitive(const KernelCompileContext& ctx, const std::vector<PostOp>& epilogue) {
  return std::span<const PostOp>(epilogue).first(
      placed_post_ops(epilogue, ctx, cheap_conv_post_ops(epilogue, ctx)));
}

bool blocked_conv_supports(const KernelCompileContext& ctx) {
  const auto g = blocked_conv_geometry(ctx);
  auto epilogue = read_epilogue(ctx.node);
  if (!g || !epilogue.is_ok()) return false;
  if (ctx.node.has_input(3) && static_f32_dims(ctx.node.input(3)) != g->y_dims) return false;
  const auto head = in_primitive(ctx, *epilogue);
  if (!hwy_cpu::vector_epilogue(std::span<const PostOp>(*epilogue).subspan(head.size()))) return false;
  return try_dnnl<bool>([&] {
           build_blocked_conv_plan(ctx, *g, {head.begin(), head.end()});
           return true;
         }).has_value();
}

Result<std::unique_ptr<Kernel>> blocked_conv_create(const KernelCompileContext& ctx) {
  const auto g = blocked_conv_geometry(ctx);
  OPFUSE_ASSIGN_OR_RETURN(auto epilogue, read_epilogue(ctx.node));
  if (!g) return Status::internal_error(str_cat(ctx.node.describe(), ": not an onednn.blocked_conv node"));
  const auto head = in_primitive(ctx, epilogue);
  OPFUSE_ASSIGN_OR_RETURN(auto conv, make_kernel("onednn.blocked_conv", ctx.node, [&] {
                            return build_blocked_conv_plan(ctx, *g, {head.begin(), head.end()});
                          }));
  return with_host_epilogue(ctx.node, std::move(conv), std::span<const PostOp>(epilogue).subspan(head.size()));
}

// ---------------------------------------------------------------- BlockedConvDepthwise

// A BlockedConvDepthwise node seen as its pointwise stage (whose geometry, weights and bias the
// primitive takes) plus the depthwise filter its post-op applies.
struct ConvDepthwise {
  DepthwiseStages stages;
  std::vector<const Tensor*> pointwise_constants;  // X, W, B of the pointwise stage
  BlockedConvGeometry pointwise;
  std::vector<PostOp> pointwise_epilogue, depthwise_epilogue;
  const Tensor* wd = nullptr;
  const Tensor* bd = nullptr;
  int64_t stride = 1;
  Dims y_dims;
};

std::optional<ConvDepthwise> conv_depthwise(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  if (node.domain() != kFusedDomain || ctx.constants.size() < 4) return std::nullopt;
  ConvDepthwise c;
  auto stages = depthwise_stages(node, ctx.constants);
  const auto y = static_f32_dims(node.output(0));
  auto pe = read_epilogue(node);
  if (!stages.is_ok() || !y || !pe.is_ok()) return std::nullopt;
  c.stages = std::move(*stages);
  auto de = read_epilogue(*c.stages.depthwise);
  if (!de.is_ok()) return std::nullopt;
  c.pointwise_constants = {nullptr, ctx.constants[1], ctx.constants[2]};
  KernelCompileContext pointwise{*c.stages.pointwise, c.pointwise_constants, ctx.threads};
  const auto g = blocked_conv_geometry(pointwise);
  if (!g || !g->x_blocked || !g->conv.pointwise || g->conv.group != 1) return std::nullopt;
  const int64_t m = g->conv.w[0];
  c.wd = ctx.f32_constant(3, {m, 1, 3, 3});
  c.bd = ctx.f32_constant(4, {m});
  if (c.wd == nullptr || (node.has_input(4) && c.bd == nullptr)) return std::nullopt;
  c.pointwise = *g;
  c.pointwise_epilogue = std::move(*pe);
  c.depthwise_epilogue = std::move(*de);
  c.stride = AttrReader(node).get_int("depthwise_stride");
  c.y_dims = *y;
  return c;
}

// The depthwise epilogue's leading post-ops that run inside the primitive.
std::span<const PostOp> depthwise_in_primitive(const KernelCompileContext& ctx, const ConvDepthwise& c) {
  return std::span<const PostOp>(c.depthwise_epilogue)
      .first(cheap_conv_post_ops(c.depthwise_epilogue, ctx));
}

PrimitivePlan build_conv_depthwise_plan(const KernelCompileContext& ctx, const ConvDepthwise& c) {
  using dnnl::convolution_forward;
  const BlockedConvGeometry& bg = c.pointwise;
  const ConvGeometry& g = bg.conv;
  const int64_t m = g.w[0];
  const auto y_logical = logical_dims(c.y_dims, m);
  if (!y_logical) throw dnnl::error(dnnl_invalid_arguments, "output not blocked like the expanded tensor");
  const dnnl::memory::desc x_md = blocked_desc(g.x, bg.x_dims[4]);
  const dnnl::memory::desc e_md = blocked_desc(g.y, bg.y_dims[4]);
  const dnnl::memory::desc y_md = blocked_desc(*y_logical, c.y_dims[4]);
  // Nothing may run between the two convs, so the whole pointwise epilogue is a post-op.
  int residual = -1;
  auto ops = make_post_ops(c.pointwise_epilogue, e_md, residual);
  if (!ops || residual >= 0) throw dnnl::error(dnnl_unimplemented, "pointwise epilogue without oneDNN post-ops");
  const auto f32 = dnnl::memory::data_type::f32;
  ops->append_dw(f32, f32, f32, 3, c.stride, 1, 0, {});
  const auto head = depthwise_in_primitive(ctx, c);
  ops = make_post_ops(head, y_md, residual, ResidualAs::kBinary, *ops);
  if (!ops || residual >= 0) throw dnnl::error(dnnl_unimplemented, "depthwise epilogue without oneDNN post-ops");
  const dnnl::memory::desc b_md = plain_desc({m});
  const auto desc = g.has_bias
      ? convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, x_md,
                                  any_desc(g.w), b_md, e_md, g.strides, g.dilations, g.pad_l, g.pad_r)
      : convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, x_md,
                                  any_desc(g.w), e_md, g.strides, g.dilations, g.pad_l, g.pad_r);
  const convolution_forward::primitive_desc pd(desc, make_attr(*ops), cpu_engine());
  KernelCompileContext pointwise{*c.stages.pointwise, c.pointwise_constants, ctx.threads};
  // Refuses ref_fused_convolution (a reference implementation by name): the fusion is only
  // worth it as one jit kernel.
  PrimitivePlan plan = assemble_conv_plan<convolution_forward>(pointwise, g, pd, plain_desc(g.w), m,
                                                                {bg.x_dims, c.y_dims, x_md, y_md});
  const int dw = DNNL_ARG_ATTR_POST_OP_DW;
  const dnnl::memory::desc wd_md = pd.query_md(dnnl::query::exec_arg_md, dw | DNNL_ARG_WEIGHTS);
  const dnnl::memory::desc bd_md = pd.query_md(dnnl::query::exec_arg_md, dw | DNNL_ARG_BIAS);
  plan.bindings.push_back({dw | DNNL_ARG_WEIGHTS, -1, {m, 1, 3, 3}, wd_md,
                           pack(plain_desc({m, 1, 1, 3, 3}), c.wd->raw_data(), wd_md)});
  const std::vector<float> zeros(static_cast<size_t>(m), 0.0f);
  plan.bindings.push_back({dw | DNNL_ARG_BIAS, -1, {m}, bd_md,
                           pack(plain_desc({m}), c.bd ? c.bd->raw_data() : zeros.data(), bd_md)});
  return plan;
}

bool conv_depthwise_supports(const KernelCompileContext& ctx) {
  const auto c = conv_depthwise(ctx);
  if (!c) return false;
  const auto& pe = c->pointwise_epilogue;
  if (nan_keeping_post_ops(pe, ctx) != pe.size() || placed_post_ops(pe, ctx, pe.size()) != pe.size()) {
    return false;  // a post-op must run in our own pass, between the convs
  }
  const auto rest = std::span<const PostOp>(c->depthwise_epilogue).subspan(depthwise_in_primitive(ctx, *c).size());
  if (!hwy_cpu::vector_epilogue(rest)) return false;
  return try_dnnl<bool>([&] {
           ScopedOmpThreads scoped(threads_for_work(ctx.node));
           build_conv_depthwise_plan(ctx, *c);
           return true;
         }).has_value();
}

Result<std::unique_ptr<Kernel>> conv_depthwise_create(const KernelCompileContext& ctx) {
  const auto c = conv_depthwise(ctx);
  if (!c) return Status::internal_error(str_cat(ctx.node.describe(), ": not an onednn.blocked_conv node"));
  OPFUSE_ASSIGN_OR_RETURN(auto conv, make_kernel("onednn.blocked_conv", ctx.node,
                                                 [&] { return build_conv_depthwise_plan(ctx, *c); }));
  const auto rest = std::span<const PostOp>(c->depthwise_epilogue).subspan(depthwise_in_primitive(ctx, *c).size());
  return with_host_epilogue(ctx.node, std::move(conv), rest);
}

}  // namespace

KernelImpl onednn_to_blocked_kernel() {
  return {"onednn.reorder", "ToBlocked", reorder_supports, reorder_create};
}
KernelImpl onednn_from_blocked_kernel() {
  return {"onednn.reorder", "FromBlocked", reorder_supports, reorder_create};
}
KernelImpl onednn_reblock_kernel() {
  return {"onednn.reorder", "Reblock", reorder_supports, reorder_create};
}
KernelImpl onednn_blocked_conv_kernel() {
  return {"onednn.blocked_conv", "BlockedConv", blocked_conv_supports, blocked_conv_create};
}
KernelImpl onednn_blocked_conv_depthwise_kernel() {
  return {"onednn.blocked_conv", "BlockedConvDepthwise", conv_depthwise_supports, conv_depthwise_create};
}

}  // namespace opfuse::onednn
