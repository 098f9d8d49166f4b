#include "kernels/cpu/onednn_conv.h"

#include "kernels/cpu/onednn_post_ops.h"

#include <span>
#include <string>
#include <unordered_map>

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
  return g;
}

PrimitivePlan build_conv_plan(const KernelCompileContext& ctx, const ConvGeometry& g,
                              const dnnl::post_ops& post_ops) {
  using dnnl::convolution_forward;
  const int64_t m = g.w[0];
  // ONNX's [M, C/g, k...] is oneDNN's grouped [g, M/g, C/g, k...] with the same memory order.
  Dims w_dims = g.w;
  if (g.group > 1) {
    w_dims[0] = m / g.group;
    w_dims.insert(w_dims.begin(), g.group);
  }
  const dnnl::memory::desc x_md = plain_desc(g.x), y_md = plain_desc(g.y);
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
// The epilogue normally goes into the convolution primitive as post-ops (eltwise ones, and the
// residual add as a binary post-op reading input 3 in its plain layout). Exception: when the
// convolution runs oneDNN 2.6's GEMM implementation (plain 1x1 convs: ResNet's and MobileNet's
// pointwise convs), only ReLU is cheap there; other post-ops are applied element by element
// with index arithmetic (measured: clip 3-7x, binary add or sum 10-60x the convolution's own
// time). Then the kernel is split: the convolution with its leading ReLUs, then one oneDNN
// binary primitive run in place on the output, y = rest(y + r) (r = the residual when the rest
// starts with the add, else a zero scalar; a later add is a binary post-op of that primitive).
// The split costs one pass over y, one fewer than the unfused ops.

namespace {

using PostOps = std::vector<PostOp>;

// The convolution with the residual add as a binary post-op.
std::optional<PrimitivePlan> in_primitive_plan(const KernelCompileContext& ctx, const ConvGeometry& g,
                                               const PostOps& epilogue) {
  int residual = -1;
  const auto ops = make_post_ops(epilogue, plain_desc(g.y), residual);
  if (!ops) return std::nullopt;
  auto plan = try_dnnl<PrimitivePlan>([&] { return build_conv_plan(ctx, g, *ops); });
  if (plan && residual >= 0) {
    plan->bindings.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(residual) | DNNL_ARG_SRC_1, 3, g.y,
                              plain_desc(g.y), {}});
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

// The split form's second step: y = post_ops(y + src1) with a oneDNN binary primitive, in place.
// src1 is the residual (input 3) or a zero scalar; `residual_arg` binds input 3 as a binary
// post-op argument when the add comes later in the list.
class SplitEpilogueKernel final : public Kernel {
 public:
  SplitEpilogueKernel(std::unique_ptr<Kernel> conv, const dnnl::binary::primitive_desc& pd,
                      bool src1_is_residual, int residual_arg)
      : conv_(std::move(conv)), add_(pd), md_(pd.dst_desc()), src1_md_(pd.src_desc(1)),
        scratchpad_(pd.scratchpad_desc()), src1_is_residual_(src1_is_residual),
        residual_arg_(residual_arg) {}

  Status run(std::span<const Tensor* const> inputs, std::span<Tensor* const> outputs) const override {
    OPFUSE_TRY(conv_->run(inputs, outputs));  // the conv plan does not bind input 3
    Tensor* y = outputs.empty() ? nullptr : outputs[0];
    const Tensor* r = inputs.size() > 3 ? inputs[3] : nullptr;
    const bool wants_r = src1_is_residual_ || residual_arg_ != 0;
    if (y == nullptr || y->dtype() != DType::kF32 || y->nbytes() != md_.get_size() ||
        (wants_r && (r == nullptr || r->dtype() != DType::kF32 || r->nbytes() != md_.get_size()))) {
      return Status::internal_error("onednn.fused_conv: residual or output differ from the plan");
    }
    try {
      const dnnl::engine& engine = cpu_engine();
      thread_local dnnl::stream stream(cpu_engine());
      float zero = 0.0f;
      dnnl::memory ym(md_, engine, y->raw_data());
      std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC_0, ym}, {DNNL_ARG_DST, ym}};
      void* r_data = r ? const_cast<void*>(r->raw_data()) : nullptr;
      args.emplace(DNNL_ARG_SRC_1, src1_is_residual_ ? dnnl::memory(md_, engine, r_data)
                                                     : dnnl::memory(src1_md_, engine, &zero));
      if (residual_arg_ != 0) args.emplace(residual_arg_, dnnl::memory(md_, engine, r_data));
      std::vector<char> pad(scratchpad_.get_size());
      if (!pad.empty()) args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(scratchpad_, engine, pad.data()));
      add_.execute(stream, args);
      stream.wait();
    } catch (const dnnl::error& e) {
      return Status::internal_error(str_cat("onednn.fused_conv epilogue failed: ", e.what()));
    }
    return Status::ok();
  }
  std::string_view name() const override { return conv_->name(); }

 private:
  std::unique_ptr<Kernel> conv_;
  dnnl::binary add_;
  dnnl::memory::desc md_, src1_md_, scratchpad_;
  bool src1_is_residual_;
  int residual_arg_;  // DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1, or 0
};

struct SplitPart {
  dnnl::binary::primitive_desc pd;
  bool src1_is_residual = false;
  int residual_arg = 0;
};

struct FusedPlan {
  PrimitivePlan conv;
  std::optional<SplitPart> split;  // the second primitive, when split
};

std::optional<FusedPlan> fused_plan(const KernelCompileContext& ctx) {
  if (ctx.node.domain() != kFusedDomain) return std::nullopt;
  const auto g = conv_geometry(ctx, false);
  auto epilogue = read_epilogue(ctx.node);
  if (!g || !epilogue.is_ok()) return std::nullopt;
  bool residual = false;
  for (const PostOp& op : *epilogue) residual |= op.spec->dnnl == DnnlPostOp::kBinaryAdd;
  if (residual && (!ctx.node.has_input(3) || static_f32_dims(ctx.node.input(3)) != g->y)) {
    return std::nullopt;
  }
  auto whole = in_primitive_plan(ctx, *g, *epilogue);
  // oneDNN 2.6's GEMM-based conv applies every post-op slowly, even a lone ReLU (measured on
  // mobilenet_v3_large's 1x1 16->64 conv at 112x112: 1.3 ms plain, 6.0-6.6 ms with eltwise_relu),
  // so on that path the whole epilogue runs as a second, in-place binary primitive.
  const size_t keep = 0;
  if (whole) {
    const std::string impl = impl_of(whole->prim);
    const bool gemm = impl.find("gemm") != std::string::npos || impl.find("ref") != std::string::npos;
    if (!gemm || keep == epilogue->size()) return FusedPlan{std::move(*whole), std::nullopt};
  }
  if (keep == epilogue->size()) return std::nullopt;
  const PostOps head(epilogue->begin(), epilogue->begin() + keep);
  PostOps rest(epilogue->begin() + keep, epilogue->end());
  SplitPart split{{}, rest.front().spec->dnnl == DnnlPostOp::kBinaryAdd, 0};
  if (split.src1_is_residual) rest.erase(rest.begin());
  auto conv = in_primitive_plan(ctx, *g, head);
  int residual_index = -1;
  const dnnl::memory::desc y_md = plain_desc(g->y);
  const auto rest_ops = make_post_ops(rest, y_md, residual_index);
  if (!conv || !rest_ops) return std::nullopt;
  if (residual_index >= 0) split.residual_arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(residual_index) | DNNL_ARG_SRC_1;
  const dnnl::memory::desc src1_md = split.src1_is_residual ? y_md : plain_desc(Dims(g->y.size(), 1));
  auto pd = try_dnnl<dnnl::binary::primitive_desc>([&] {
    const dnnl::binary::desc desc(dnnl::algorithm::binary_add, y_md, src1_md, y_md);
    return dnnl::binary::primitive_desc(desc, make_attr(*rest_ops), cpu_engine());
  });
  if (!pd) return std::nullopt;
  split.pd = *pd;
  return FusedPlan{std::move(*conv), std::move(split)};
}

bool fused_conv_supports(const KernelCompileContext& ctx) { return fused_plan(ctx).has_value(); }

Result<std::unique_ptr<Kernel>> fused_conv_create(const KernelCompileContext& ctx) {
  auto plan = fused_plan(ctx);
  if (!plan) {
    return Status::internal_error(str_cat(ctx.node.describe(), ": not an onednn.fused_conv node"));
  }
  OPFUSE_ASSIGN_OR_RETURN(auto kernel, make_kernel("onednn.fused_conv", ctx.node,
                                                   [&] { return std::move(plan->conv); }));
  if (!plan->split) return kernel;
  try {
    return std::unique_ptr<Kernel>(std::make_unique<SplitEpilogueKernel>(
        std::move(kernel), plan->split->pd, plan->split->src1_is_residual, plan->split->residual_arg));
  } catch (const dnnl::error& e) {
    return Status::internal_error(str_cat(ctx.node.describe(), ": oneDNN epilogue primitive: ", e.what()));
  }
}

}  // namespace

KernelImpl onednn_fused_conv_kernel() {
  return {"onednn.fused_conv", "FusedConv", fused_conv_supports, fused_conv_create};
}

}  // namespace opfuse::onednn
