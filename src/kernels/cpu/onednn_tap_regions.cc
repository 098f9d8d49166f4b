// "onednn.tap_regions" (kernels/cpu/onednn_tap_regions.h).
//
// A dilated conv whose padding is as wide as its dilation reads padding for every tap that falls
// off the map. DeepLabV3's ASPP: 3x3, dilation 12 and 24, on a 32x32 map; along one axis
//
//   output rows     [0, 12)      [12, 20)     [20, 32)        (dilation 12)
//   taps in range   1, 2         0, 1, 2      0, 1
//
// so each (row band, column band) region is a plain conv with only its in-range taps and no
// padding over a crop of X, and the regions together write every pixel of Y once:
//   Y[region] = Conv(X[crop], W[:, :, taps_h, taps_w], B) {dilations, pads = 0}
// (the same sums, without the terms whose input is padding). Each region's conv runs on a
// dense copy of its crop, in the layout oneDNN has a direct kernel for (nChw8c on AVX2 even when
// X is channels-last): oneDNN 2.6 runs reference loops on a strided sub-tensor, and for the
// padded dilated conv itself has, below AVX-512, only its im2col GEMM (Zen 3, 2 threads: 44 ms
// for deeplabv3's dilation-12 conv; ORT's MLAS, which skips the padding taps, 26 ms). Copies in
// and out are oneDNN reorders between the window of X (Y) and the region's buffers. The
// epilogue runs as our own pass over Y (HostEpilogueKernel), so NaN stays NaN.
#include "kernels/cpu/onednn_tap_regions.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/onednn_common.h"
#include "kernels/cpu/onednn_conv.h"
#include "kernels/cpu/onednn_post_ops.h"
#include "ops/fused.h"

namespace opfuse::onednn {
namespace {

// Output positions [out0, out1) of one axis whose in-range taps are [tap0, tap1).
struct Band {
  int64_t out0, out1, tap0, tap1;
};

// The bands of an axis (stride 1), or nothing when some output position has no tap in range.
std::vector<Band> bands_of(int64_t out, int64_t in, int64_t taps, int64_t dilation, int64_t pad) {
  std::vector<Band> bands;
  for (int64_t o = 0; o < out; ++o) {
    int64_t t0 = 0, t1 = taps;
    while (t0 < taps && o - pad + t0 * dilation < 0) ++t0;
    while (t1 > t0 && o - pad + (t1 - 1) * dilation >= in) --t1;
    if (t0 == t1) return {};
    if (!bands.empty() && bands.back().tap0 == t0 && bands.back().tap1 == t1) {
      bands.back().out1 = o + 1;
    } else {
      bands.push_back({o, o + 1, t0, t1});
    }
  }
  return bands;
}

// A blocked tensor [N, Cb, H, W, L] (L lanes: the block, or every channel when channels-last).
struct Blocked {
  int64_t n, cb, h, w, lanes;
  int64_t numel() const { return n * cb * h * w * lanes; }
};

dnnl::memory::desc blocked_md(const Blocked& b, int64_t channels) {
  const auto tag = b.lanes == 16 ? dnnl::memory::format_tag::nChw16c
                   : b.lanes == 8 ? dnnl::memory::format_tag::nChw8c
                                  : dnnl::memory::format_tag::nhwc;
  return dnnl::memory::desc({b.n, channels, b.h, b.w}, dnnl::memory::data_type::f32, tag);
}

// One region: X's window reordered into `src`, the conv into `dst`, reordered into Y's window.
struct Region {
  dnnl::memory::desc window_x, window_y;  // sub-tensors of X and Y
  dnnl::memory::desc src, dst;            // the conv's dense operands
  dnnl::reorder copy_in, copy_out;
  dnnl::convolution_forward conv;
  dnnl::memory weights;  // packed once
  dnnl::memory::desc in_pad, conv_pad, out_pad;  // each primitive's scratchpad (one buffer)
};

struct Split {
  ConvGeometry conv;
  Blocked x, y;
  int64_t c = 0, m = 0;
  std::vector<Band> rows, cols;
  double in_range = 1;  // fraction of the formula's multiply-adds that read X
};

// The split of a BlockedConv this kernel handles: 2-d, dilated, one group, stride 1, blocked (or
// channels-last) X, no input scale, an epilogue our pass can apply, and padding read by enough
// of the work; else nullopt.
std::optional<Split> split_of(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  if (node.domain() != kFusedDomain || node.outputs().size() != 1 || node.has_input(4)) return std::nullopt;
  const auto x = static_f32_dims(node.input(0));
  const auto w = static_f32_dims(node.input(1));
  const auto y = static_f32_dims(node.output(0));
  if (!x || !w || !y || x->size() != 5 || w->size() != 4 || y->size() != 5) return std::nullopt;
  if (node.has_input(3) && static_f32_dims(node.input(3)) != *y) return std::nullopt;
  auto epilogue = read_epilogue(node);
  if (!epilogue.is_ok() || !hwy_cpu::vector_epilogue(*epilogue)) return std::nullopt;
  const AttrReader attrs(node);
  const int64_t block = attrs.get_int("block");
  Split s;
  s.c = (*w)[1];
  s.m = (*w)[0];
  s.x = {(*x)[0], (*x)[1], (*x)[2], (*x)[3], (*x)[4]};
  s.y = {(*y)[0], (*y)[1], (*y)[2], (*y)[3], (*y)[4]};
  if (attrs.get_int("group") != 1 || (block != 0 && block != 8 && block != 16) ||
      s.x.lanes != (block == 0 ? s.c : block) || s.y.lanes != (block == 0 ? s.m : block) ||
      s.x.cb != (s.c + s.x.lanes - 1) / s.x.lanes || s.y.cb != (s.m + s.y.lanes - 1) / s.y.lanes) {
    return std::nullopt;
  }
  const auto g = conv_geometry_for(ctx, Dims{s.x.n, s.c, s.x.h, s.x.w}, Dims{s.y.n, s.m, s.y.h, s.y.w}, false);
  // Dilated only: an undilated conv reads much padding only on a map a few taps wide, where
  // oneDNN's padded direct kernel is fine and regions would be a pixel or two each.
  if (!g || g->x.size() != 4 || g->strides != Dims{1, 1} || (g->dilations[0] == 0 && g->dilations[1] == 0)) {
    return std::nullopt;
  }
  s.rows = bands_of(s.y.h, s.x.h, (*w)[2], g->dilations[0] + 1, g->pad_l[0]);
  s.cols = bands_of(s.y.w, s.x.w, (*w)[3], g->dilations[1] + 1, g->pad_l[1]);
  if (s.rows.empty() || s.cols.empty() || s.rows.size() * s.cols.size() < 2) return std::nullopt;
  double taps = 0;
  for (const Band& r : s.rows) {
    for (const Band& c : s.cols) taps += double(r.out1 - r.out0) * (c.out1 - c.out0) * (r.tap1 - r.tap0) * (c.tap1 - c.tap0);
  }
  s.in_range = taps / (double(s.y.h) * s.y.w * (*w)[2] * (*w)[3]);
  if (s.in_range > kMaxInRangeFraction) return std::nullopt;
  s.conv = *g;
  return s;
}

class TapRegionsKernel final : public Kernel {
 public:
  TapRegionsKernel(const KernelCompileContext& ctx, const Split& s) : split_(s) {
    const ConvGeometry& g = s.conv;
    const Tensor* w = ctx.constants.size() > 1 ? ctx.constants[1] : nullptr;
    const Tensor* b = g.has_bias && ctx.constants.size() > 2 ? ctx.constants[2] : nullptr;
    if (w == nullptr || (g.has_bias && b == nullptr)) throw dnnl::error(dnnl_invalid_arguments, "weights not constant");
    if (b != nullptr) bias_.assign(b->data<float>(), b->data<float>() + s.m);
    const int64_t kh = g.w[2], kw = g.w[3];
    for (const Band& r : s.rows) {
      for (const Band& c : s.cols) {
        Region region;
        const int64_t th = r.tap1 - r.tap0, tw = c.tap1 - c.tap0;
        const int64_t dh = g.dilations[0] + 1, dw = g.dilations[1] + 1;
        const int64_t in_h0 = r.out0 - g.pad_l[0] + r.tap0 * dh, in_w0 = c.out0 - g.pad_l[1] + c.tap0 * dw;
        const int64_t out_h = r.out1 - r.out0, out_w = c.out1 - c.out0;
        const Dims crop = {s.x.n, s.c, out_h + (th - 1) * dh, out_w + (tw - 1) * dw}, out = {s.y.n, s.m, out_h, out_w};
        region.window_x = blocked_md(s.x, s.c).submemory_desc(crop, {0, 0, in_h0, in_w0});
        region.window_y = blocked_md(s.y, s.m).submemory_desc(out, {0, 0, r.out0, c.out0});
        // The taps in range: W[:, :, tap0_h..tap1_h, tap0_w..tap1_w].
        std::vector<float> taps(static_cast<size_t>(s.m * s.c * th * tw));
        const float* wv = w->data<float>();
        for (int64_t oc = 0; oc < s.m * s.c; ++oc) {
          for (int64_t i = 0; i < th; ++i) {
            for (int64_t j = 0; j < tw; ++j) {
              taps[(oc * th + i) * tw + j] = wv[(oc * kh + r.tap0 + i) * kw + c.tap0 + j];
            }
          }
        }
        const Dims w_dims = {s.m, s.c, th, tw};
        // Dilation along an axis with one tap is moot: without it a 1x1 region gets oneDNN's
        // pointwise kernel (jit_1x1).
        const Dims dilations = {th > 1 ? dh - 1 : 0, tw > 1 ? dw - 1 : 0};
        const auto w_any = any_desc(w_dims);
        const auto desc =
            b != nullptr
                ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                                  any_desc(crop), w_any, plain_desc({s.m}), any_desc(out), {1, 1},
                                                  dilations, {0, 0}, {0, 0})
                : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                                  any_desc(crop), w_any, any_desc(out), {1, 1}, dilations, {0, 0}, {0, 0});
        const dnnl::convolution_forward::primitive_desc pd(desc, make_attr(), cpu_engine());
        // A region oneDNN has only reference loops for would undo the point of the split.
        if (is_reference_impl(pd)) throw dnnl::error(dnnl_unimplemented, "a region runs reference loops");
        const std::string impl = pd.impl_info_str();
        if (impl_.find(impl) == std::string::npos) impl_ += (impl_.empty() ? "" : " + ") + impl;
        region.src = pd.src_desc();
        region.dst = pd.dst_desc();
        const dnnl::reorder::primitive_desc in_pd(cpu_engine(), region.window_x, cpu_engine(), region.src, make_attr());
        const dnnl::reorder::primitive_desc out_pd(cpu_engine(), region.dst, cpu_engine(), region.window_y, make_attr());
        region.weights = pack(plain_desc(w_dims), taps.data(), pd.weights_desc());
        region.in_pad = in_pd.scratchpad_desc();
        region.conv_pad = pd.scratchpad_desc();
        region.out_pad = out_pd.scratchpad_desc();
        region.conv = dnnl::convolution_forward(pd);
        region.copy_in = dnnl::reorder(in_pd);
        region.copy_out = dnnl::reorder(out_pd);
        src_bytes_ = std::max(src_bytes_, region.src.get_size());
        dst_bytes_ = std::max(dst_bytes_, region.dst.get_size());
        scratchpad_bytes_ = std::max({scratchpad_bytes_, region.in_pad.get_size(), region.conv_pad.get_size(),
                                      region.out_pad.get_size()});
        regions_.push_back(std::move(region));
      }
    }
  }

  std::string_view name() const override { return "onednn.tap_regions"; }
  std::string implementation() const override {
    return str_cat(regions_.size(), " regions on ", impl_, ", ", static_cast<int>(split_.in_range * 100 + 0.5),
                   "% of the taps");
  }

  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    const Tensor* x = in.empty() ? nullptr : in[0];
    if (x == nullptr || x->dtype() != DType::kF32 || x->numel() != split_.x.numel() || out.empty() ||
        out[0] == nullptr || out[0]->dtype() != DType::kF32 || out[0]->numel() != split_.y.numel()) {
      return Status::internal_error("onednn.tap_regions: an operand does not have its planned shape");
    }
    // Uninitialised (every byte is written before it is read) and cache-line aligned.
    const auto buffer = [](size_t bytes) {
      return std::unique_ptr<char, decltype(&std::free)>(
          static_cast<char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64)), &std::free);
    };
    const auto src = buffer(src_bytes_), dst = buffer(dst_bytes_), scratchpad = buffer(scratchpad_bytes_);
    if (!src || !dst || !scratchpad) return Status::user_error("onednn.tap_regions: out of memory for its buffers");
    const auto pad = [&](const dnnl::memory::desc& md) { return dnnl::memory(md, cpu_engine(), scratchpad.get()); };
    dnnl::stream stream(cpu_engine());
    try {
      for (const Region& r : regions_) {
        const dnnl::memory x_window(r.window_x, cpu_engine(), const_cast<float*>(x->data<float>()));
        const dnnl::memory y_window(r.window_y, cpu_engine(), out[0]->data<float>());
        const dnnl::memory s_mem(r.src, cpu_engine(), src.get()), d_mem(r.dst, cpu_engine(), dst.get());
        r.copy_in.execute(stream, {{DNNL_ARG_FROM, x_window}, {DNNL_ARG_TO, s_mem}, {DNNL_ARG_SCRATCHPAD, pad(r.in_pad)}});
        std::unordered_map<int, dnnl::memory> args = {
            {DNNL_ARG_SRC, s_mem}, {DNNL_ARG_WEIGHTS, r.weights}, {DNNL_ARG_DST, d_mem}, {DNNL_ARG_SCRATCHPAD, pad(r.conv_pad)}};
        if (!bias_.empty()) {
          args.emplace(DNNL_ARG_BIAS, dnnl::memory(plain_desc({split_.m}), cpu_engine(), const_cast<float*>(bias_.data())));
        }
        r.conv.execute(stream, args);
        r.copy_out.execute(stream, {{DNNL_ARG_FROM, d_mem}, {DNNL_ARG_TO, y_window}, {DNNL_ARG_SCRATCHPAD, pad(r.out_pad)}});
      }
      stream.wait();
    } catch (const dnnl::error& e) {
      return Status::internal_error(str_cat("onednn.tap_regions: ", e.what()));
    }
    return Status::ok();
  }

 private:
  Split split_;
  std::vector<Region> regions_;
  std::vector<float> bias_;
  size_t src_bytes_ = 0, dst_bytes_ = 0, scratchpad_bytes_ = 0;
  std::string impl_;
};

bool supports(const KernelCompileContext& ctx) {
  const auto s = split_of(ctx);
  return s && try_dnnl<bool>([&] {
                TapRegionsKernel kernel(ctx, *s);
                return true;
              }).has_value();
}

Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
  const auto s = split_of(ctx);
  if (!s) return Status::internal_error(str_cat(ctx.node.describe(), ": not an onednn.tap_regions node"));
  OPFUSE_ASSIGN_OR_RETURN(auto epilogue, read_epilogue(ctx.node));
  std::unique_ptr<Kernel> kernel;
  try {
    kernel = std::make_unique<TapRegionsKernel>(ctx, *s);
  } catch (const dnnl::error& e) {
    return Status::internal_error(str_cat(ctx.node.describe(), ": onednn.tap_regions could not be created: ", e.what()));
  }
  return with_host_epilogue(ctx.node, std::move(kernel), epilogue);
}

}  // namespace

KernelImpl onednn_tap_regions_kernel() {
  return {"onednn.tap_regions", "BlockedConv", supports, create};
}

}  // namespace opfuse::onednn
