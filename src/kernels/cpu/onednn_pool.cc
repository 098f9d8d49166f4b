#include "kernels/cpu/onednn_pool.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/onednn_common.h"
#include "ops/nn_common.h"

namespace opfuse::onednn {
namespace {

struct PoolGeometry {
  dnnl::algorithm algo = dnnl::algorithm::pooling_max;
  Dims x, y, strides, kernel, dilations, pad_l, pad_r;
  // A 2-d pool on plain NCHW (undilated when average), which cpu.max_pool / cpu.avg_pool run
  // when oneDNN has only a scalar loop.
  bool plain_2d = false;
};

// True when every window along an axis has at least one tap inside the input. A window that
// lies entirely in the padding has no defined value in oneDNN (the reference gives -inf / 0).
bool every_window_sees_input(int64_t in, int64_t out, int64_t k, int64_t s, int64_t d,
                             int64_t pad_l) {
  for (int64_t o = 0; o < out; ++o) {
    bool seen = false;
    for (int64_t t = 0; t < k && !seen; ++t) {
      const int64_t i = o * s - pad_l + t * d;
      seen = i >= 0 && i < in;
    }
    if (!seen) return false;
  }
  return true;
}

std::optional<PoolGeometry> window_pool_geometry(const KernelCompileContext& ctx, bool is_max) {
  const Node& node = ctx.node;
  // MaxPool's Indices output is not something oneDNN's inference pooling produces.
  if (node.outputs().empty() || node.output(1) != nullptr) return std::nullopt;
  const auto x = static_f32_dims(node.input(0));
  const auto y = static_f32_dims(node.output(0));
  if (!x || !y || x->size() < 3 || x->size() > 5 || y->size() != x->size()) return std::nullopt;
  if ((*y)[0] != (*x)[0] || (*y)[1] != (*x)[1]) return std::nullopt;
  const AttrReader attrs(node);
  const size_t spatial = x->size() - 2;
  auto wa = read_window_attrs(attrs, spatial, std::nullopt, is_max, node.describe());
  if (!wa.is_ok()) return std::nullopt;
  const bool ceil_mode = attrs.get_int("ceil_mode") != 0;
  const bool include_pad = !is_max && attrs.get_int("count_include_pad") != 0;
  PoolGeometry g;
  g.algo = is_max ? dnnl::algorithm::pooling_max
                  : include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                : dnnl::algorithm::pooling_avg_exclude_padding;
  g.x = *x, g.y = *y;
  g.plain_2d = spatial == 2 && (is_max || std::all_of(wa->dilations.begin(), wa->dilations.end(),
                                                      [](int64_t d) { return d == 1; }));
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t in = g.x[2 + i], k = wa->kernel[i], s = wa->strides[i], d = wa->dilations[i];
    auto dim = window_dim(*wa, i, in, ceil_mode, node.describe());
    if (!dim.is_ok() || dim->out != g.y[2 + i]) return std::nullopt;
    const int64_t extent = (k - 1) * d + 1;
    // oneDNN's output size is floor((in + pads - extent) / s) + 1: ceil_mode's extra window
    // is expressed as extra end padding.
    const int64_t needed = (dim->out - 1) * s + extent - in - dim->pad_begin;
    int64_t pad_r = dim->pad_end;
    if (needed > pad_r) {
      // oneDNN would count the extra padding in the divisor; the reference does not.
      if (include_pad) return std::nullopt;
      pad_r = needed;
    }
    if ((in + dim->pad_begin + pad_r - extent) / s + 1 != dim->out) return std::nullopt;
    if (!every_window_sees_input(in, dim->out, k, s, d, dim->pad_begin)) return std::nullopt;
    g.strides.push_back(s);
    g.kernel.push_back(k);
    g.dilations.push_back(d - 1);
    g.pad_l.push_back(dim->pad_begin);
    g.pad_r.push_back(pad_r);
  }
  return g;
}

std::optional<PoolGeometry> global_pool_geometry(const KernelCompileContext& ctx, bool is_max) {
  const Node& node = ctx.node;
  if (node.outputs().size() != 1) return std::nullopt;
  const auto x = static_f32_dims(node.input(0));
  const auto y = static_f32_dims(node.output(0));
  if (!x || !y || x->size() < 3 || x->size() > 5 || y->size() != x->size()) return std::nullopt;
  PoolGeometry g;
  g.algo = is_max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding;
  g.x = *x, g.y = *y;
  if (g.y[0] != g.x[0] || g.y[1] != g.x[1]) return std::nullopt;
  for (size_t i = 2; i < g.x.size(); ++i) {
    if (g.y[i] != 1 || g.x[i] < 1) return std::nullopt;
    g.kernel.push_back(g.x[i]);
    g.strides.push_back(1);
    g.dilations.push_back(0);
    g.pad_l.push_back(0);
    g.pad_r.push_back(0);
  }
  return g;
}

// A 2-d pool over a blocked activation (ops/layout_ops.cc) is written as a 3-d pool of
// f32[N, Cb, H, W, b] whose last window axis is trivial (kernel 1, stride 1, no padding): the
// same bytes are oneDNN's nChw16c / nChw8c [N, Cb*b, H, W], where its blocked pooling runs.
// Channels-last data, f32[N, 1, H, W, C], is oneDNN's nhwc [N, C, H, W] the same way.
bool is_blocked_pool(const PoolGeometry& g) {
  return g.x.size() == 5 && (g.x[4] == 16 || g.x[4] == 8 || g.x[1] == 1) && g.y[4] == g.x[4] &&
         g.kernel[2] == 1 && g.strides[2] == 1 && g.dilations[2] == 0 && g.pad_l[2] == 0 &&
         g.pad_r[2] == 0;
}

PrimitivePlan build_pool_plan(const PoolGeometry& g) {
  using dnnl::pooling_v2_forward;
  dnnl::memory::desc x_md = plain_desc(g.x), y_md = plain_desc(g.y);
  Dims strides = g.strides, kernel = g.kernel, dilations = g.dilations, pad_l = g.pad_l, pad_r = g.pad_r;
  if (is_blocked_pool(g)) {
    const auto tag = g.x[4] == 16 ? dnnl::memory::format_tag::nChw16c
                     : g.x[4] == 8 ? dnnl::memory::format_tag::nChw8c
                                   : dnnl::memory::format_tag::nhwc;
    const auto f32 = dnnl::memory::data_type::f32;
    x_md = dnnl::memory::desc({g.x[0], g.x[1] * g.x[4], g.x[2], g.x[3]}, f32, tag);
    y_md = dnnl::memory::desc({g.y[0], g.y[1] * g.y[4], g.y[2], g.y[3]}, f32, tag);
    for (Dims* d : {&strides, &kernel, &dilations, &pad_l, &pad_r}) d->pop_back();
  }
  const pooling_v2_forward::desc desc(dnnl::prop_kind::forward_inference, g.algo, x_md, y_md,
                                      strides, kernel, dilations, pad_l, pad_r);
  const pooling_v2_forward::primitive_desc pd(desc, make_attr(), cpu_engine());
  // oneDNN's `simple_nchw` pooling is a scalar loop (17 ms for a 2x2 max pool of 32x512x512);
  // declined, so that cpu.max_pool / cpu.avg_pool (kernels/cpu/plain_pool.cc) take the node.
  if (g.plain_2d && std::string_view(pd.impl_info_str()).starts_with("simple")) {
    throw dnnl::error(dnnl_unimplemented, "oneDNN has only a scalar loop for this pooling");
  }
  PrimitivePlan plan;
  set_primitive<pooling_v2_forward>(plan, pd);
  plan.dst_dims = g.y;
  plan.dst_md = y_md;
  plan.bindings.push_back({DNNL_ARG_SRC, 0, g.x, x_md, {}});
  return plan;
}

template <std::optional<PoolGeometry> (*Geometry)(const KernelCompileContext&, bool), bool kMax>
bool pool_supports(const KernelCompileContext& ctx) {
  const auto g = Geometry(ctx, kMax);
  return g && try_dnnl<bool>([&] {
                build_pool_plan(*g);
                return true;
              }).has_value();
}

// oneDNN's max pooling drops NaN (a window of NaN gives the lowest float, one NaN among numbers
// is skipped), where ONNX's MaxPool gives NaN. Where the node may see NaN (exact_non_finite),
// the same primitive also pools a mask of the NaN lanes (1 where NaN, else 0), in the same
// layout, and every window whose mask pools to 1 becomes NaN.
class NanExactMaxPool final : public Kernel {
 public:
  explicit NanExactMaxPool(std::unique_ptr<Kernel> pool) : pool_(std::move(pool)) {}
  Status run(std::span<const Tensor* const> inputs, std::span<Tensor* const> outputs) const override {
    OPFUSE_TRY(pool_->run(inputs, outputs));
    const Tensor& x = *inputs[0];
    Tensor& y = *outputs[0];
    const float* xd = x.data<float>();
    bool any_nan = false;  // no early exit: the loop vectorises
    for (int64_t i = 0; i < x.numel(); ++i) any_nan |= xd[i] != xd[i];
    if (!any_nan) return Status::ok();
    OPFUSE_ASSIGN_OR_RETURN(Tensor mask, Tensor::zeros(DType::kF32, x.dims()));
    OPFUSE_ASSIGN_OR_RETURN(Tensor pooled, Tensor::zeros(DType::kF32, y.dims()));
    float* md = mask.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) md[i] = std::isnan(xd[i]) ? 1.0f : 0.0f;
    std::vector<const Tensor*> mask_inputs(inputs.begin(), inputs.end());
    mask_inputs[0] = &mask;
    Tensor* pooled_out = &pooled;
    OPFUSE_TRY(pool_->run(mask_inputs, std::span<Tensor* const>(&pooled_out, 1)));
    const float* pd = pooled.data<float>();
    float* yd = y.data<float>();
    for (int64_t i = 0; i < y.numel(); ++i) {
      if (pd[i] > 0.0f) yd[i] = std::numeric_limits<float>::quiet_NaN();
    }
    return Status::ok();
  }
  std::string_view name() const override { return pool_->name(); }
  std::string implementation() const override { return pool_->implementation() + ", NaN-exact"; }

 private:
  std::unique_ptr<Kernel> pool_;
};

template <std::optional<PoolGeometry> (*Geometry)(const KernelCompileContext&, bool), bool kMax>
Result<std::unique_ptr<Kernel>> pool_create(const KernelCompileContext& ctx) {
  const auto g = Geometry(ctx, kMax);
  if (!g) return Status::internal_error(str_cat(ctx.node.describe(), ": not an onednn.pool node"));
  OPFUSE_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> pool,
                          make_kernel("onednn.pool", ctx.node, [&] { return build_pool_plan(*g); }));
  if (kMax && ctx.by_finiteness(true, false)) {
    return std::unique_ptr<Kernel>(std::make_unique<NanExactMaxPool>(std::move(pool)));
  }
  return pool;
}

}  // namespace

KernelImpl onednn_max_pool_kernel() {
  return {"onednn.pool", "MaxPool", pool_supports<window_pool_geometry, true>,
          pool_create<window_pool_geometry, true>};
}
KernelImpl onednn_average_pool_kernel() {
  return {"onednn.pool", "AveragePool", pool_supports<window_pool_geometry, false>,
          pool_create<window_pool_geometry, false>};
}
KernelImpl onednn_global_average_pool_kernel() {
  return {"onednn.pool", "GlobalAveragePool", pool_supports<global_pool_geometry, false>,
          pool_create<global_pool_geometry, false>};
}
KernelImpl onednn_global_max_pool_kernel() {
  return {"onednn.pool", "GlobalMaxPool", pool_supports<global_pool_geometry, true>,
          pool_create<global_pool_geometry, true>};
}

}  // namespace opfuse::onednn
