// ConvInteger on oneDNN's int8 convolution: u8 or i8 activations times s8 weights, summed exactly
// in int32 by VNNI (vpdpbusd), with the activation's zero point applied by oneDNN at run time
// (DynamicQuantizeLinear computes it per run).
//
// oneDNN has no weight zero points for convolutions, and exporters quantize weights to uint8
// with one (onnxruntime's quantizer: uint8 weights, zero point 98..195 in IS-Net). So the weights
// are shifted to s8 once at compile time, w8 = w - 128 (u8) or w8 = w (i8), and with
// c[m] = 128 - w_zero[m] (u8) or -w_zero[m] (i8):
//
//   sum (x - xz)(w - wz[m]) = sum (x - xz) w8 + c[m] * S,   S = sum over the window (x - xz)
//
// S depends on the output position and group only: a per-group channel sum of x followed by a
// box sum over the kernel's taps, 1/M of the convolution's work. It is added while the int32
// sums are moved from oneDNN's channels-last result to the NCHW output.
//
// That is the path where the CPU has VNNI. Without it oneDNN multiplies u8 by s8 with
// vpmaddubsw, whose 16-bit pair sums saturate for full-range data (255 * -128 * 2): a silently
// wrong sum. Below avx512_core_vnni the kernel computes the same sums as an f32 convolution of
// x - x_zero by w - w_zero (both exact in f32) on the target's blocked layout, rounded back to
// int32: exact while every partial
// sum stays below 2^24 in magnitude, else off by the float rounding of the sum (relative 6e-8),
// which the Cast to float that follows ConvInteger in an exported model rounds away anyway.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/onednn_common.h"
#include "ops/nn_common.h"
#include "ops/op_def.h"

namespace opfuse::onednn {
namespace {

using dnnl::memory;

struct Geometry {
  int64_t n = 0, c = 0, h = 0, w = 0;     // x
  int64_t m = 0, oh = 0, ow = 0;          // y
  int64_t kh = 0, kw = 0, group = 1;      // weights
  int64_t sh = 1, sw = 1, dh = 1, dw = 1;  // strides, dilations
  int64_t ph = 0, pw = 0, peh = 0, pew = 0;  // pads (begin, end)
};

// oneDNN's weight dims: [M, C/group, kh, kw], or [group, M/group, C/group, kh, kw].
Dims weight_dims(const Geometry& g) {
  const int64_t cg = g.c / g.group, mg = g.m / g.group;
  return g.group == 1 ? Dims{g.m, cg, g.kh, g.kw} : Dims{g.group, mg, cg, g.kh, g.kw};
}

const Tensor* constant_input(const KernelCompileContext& ctx, size_t i) {
  return i < ctx.constants.size() ? ctx.constants[i] : nullptr;
}

bool is_int8(DType t) { return t == DType::kU8 || t == DType::kI8; }

// The geometry when this kernel handles the node, else nullopt.
std::optional<Geometry> plan_geometry(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  if (!node.domain().empty()) return std::nullopt;
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  const Tensor* w = constant_input(ctx, 1);
  if (x == nullptr || !is_int8(x->dtype) || !x->shape || w == nullptr || !is_int8(w->dtype()) || w->rank() != 4) {
    return std::nullopt;
  }
  if (y == nullptr || y->dtype != DType::kI32 || !y->shape) return std::nullopt;
  const auto xd = static_dims(*x->shape);
  const auto yd = static_dims(*y->shape);
  if (!xd || !yd || xd->size() != 4 || yd->size() != 4) return std::nullopt;
  if (const Value* xz = node.input(2); xz != nullptr) {
    const auto zd = xz->shape ? static_dims(*xz->shape) : std::nullopt;
    if (xz->dtype != x->dtype || !zd || numel_of(*zd) != 1) return std::nullopt;
  }
  if (node.input(3) != nullptr) {
    const Tensor* wz = constant_input(ctx, 3);
    if (wz == nullptr || wz->dtype() != w->dtype() || (wz->numel() != 1 && wz->numel() != w->dim(0))) {
      return std::nullopt;
    }
  }
  const AttrReader attrs(node);
  Geometry g;
  g.group = attrs.get_int("group");
  g.n = (*xd)[0], g.c = (*xd)[1], g.h = (*xd)[2], g.w = (*xd)[3];
  g.m = (*yd)[1], g.oh = (*yd)[2], g.ow = (*yd)[3];
  g.kh = w->dim(2), g.kw = w->dim(3);
  if (g.group < 1 || g.c % g.group != 0 || g.m % g.group != 0 || w->dim(0) != g.m ||
      w->dim(1) != g.c / g.group || (*yd)[0] != g.n) {
    return std::nullopt;
  }
  auto wa = read_window_attrs(attrs, 2, std::vector<int64_t>{g.kh, g.kw}, true, node.describe());
  if (!wa.is_ok()) return std::nullopt;
  auto hdim = window_dim(*wa, 0, g.h, false, node.describe());
  auto wdim = window_dim(*wa, 1, g.w, false, node.describe());
  if (!hdim.is_ok() || !wdim.is_ok() || hdim->out != g.oh || wdim->out != g.ow) return std::nullopt;
  g.sh = wa->strides[0], g.sw = wa->strides[1], g.dh = wa->dilations[0], g.dw = wa->dilations[1];
  g.ph = hdim->pad_begin, g.peh = hdim->pad_end, g.pw = wdim->pad_begin, g.pew = wdim->pad_end;
  return g;
}

// oneDNN's int8 convolution for the geometry, with the activation's zero point given at run time;
// nullopt when oneDNN has only its reference loops (or nothing) for it.
std::optional<dnnl::convolution_forward::primitive_desc> int8_conv_pd(const Geometry& g, DType x_type) {
  return try_dnnl<std::optional<dnnl::convolution_forward::primitive_desc>>(
      [&]() -> std::optional<dnnl::convolution_forward::primitive_desc> {
        const memory::data_type xt = x_type == DType::kU8 ? memory::data_type::u8 : memory::data_type::s8;
        const memory::desc src({g.n, g.c, g.h, g.w}, xt, memory::format_tag::nhwc);
        const memory::desc dst({g.n, g.m, g.oh, g.ow}, memory::data_type::s32, memory::format_tag::nhwc);
        const memory::desc wany(weight_dims(g), memory::data_type::s8, memory::format_tag::any);
        dnnl::primitive_attr attr = make_attr();
        attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
        const dnnl::convolution_forward::desc d(
            dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, wany, dst,
            {g.sh, g.sw}, {g.dh - 1, g.dw - 1}, {g.ph, g.pw}, {g.peh, g.pew});
        dnnl::convolution_forward::primitive_desc pd(d, attr, cpu_engine());
        if (is_reference_impl(pd)) return std::nullopt;
        return pd;
      }).value_or(std::nullopt);
}

// Below VNNI: an f32 convolution, on the target's blocked layout (nChw8c on AVX2) where oneDNN
// has a direct kernel for it, else reading plain NCHW into the blocked layout (few input
// channels), else plain in and out (oneDNN's gemm convolution, 1.5-2x slower on IS-Net's 3x3
// convs); weights in the layout it prefers.
std::optional<dnnl::convolution_forward::primitive_desc> f32_conv_pd(const Geometry& g) {
  const memory::format_tag blocked =
      active_target().channel_block() == 16 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c;
  const memory::format_tag plain = memory::format_tag::nchw;
  const std::pair<memory::format_tag, memory::format_tag> layouts[] = {{blocked, blocked}, {plain, blocked}, {plain, plain}};
  for (const auto& layout : layouts) {
    const memory::format_tag src_tag = layout.first, dst_tag = layout.second;
    auto pd = try_dnnl<std::optional<dnnl::convolution_forward::primitive_desc>>(
        [&]() -> std::optional<dnnl::convolution_forward::primitive_desc> {
          const dnnl::convolution_forward::desc d(
              dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
              memory::desc({g.n, g.c, g.h, g.w}, memory::data_type::f32, src_tag), any_desc(weight_dims(g)),
              memory::desc({g.n, g.m, g.oh, g.ow}, memory::data_type::f32, dst_tag), {g.sh, g.sw},
              {g.dh - 1, g.dw - 1}, {g.ph, g.pw}, {g.peh, g.pew});
          dnnl::convolution_forward::primitive_desc pd(d, make_attr(), cpu_engine());
          if (is_reference_impl(pd)) return std::nullopt;
          return pd;
        }).value_or(std::nullopt);
    const bool last = src_tag == plain && dst_tag == plain;
    if (pd && (last || std::string(pd->impl_info_str()).find("gemm") == std::string::npos)) return pd;
  }
  return std::nullopt;
}

// The channel block of a 4-d f32 memory desc: 8 or 16 for nChw8c / nChw16c, 1 for plain NCHW.
int64_t channel_block_of(const memory::desc& md) {
  const auto& blocking = md.data.format_desc.blocking;
  return blocking.inner_nblks == 1 && blocking.inner_idxs[0] == 1 ? blocking.inner_blks[0] : 1;
}

bool use_int8(const Target& target) { return target.isa >= IsaTier::kAvx512CoreVnni; }

// The primitive descriptor of the path this target takes.
std::optional<dnnl::convolution_forward::primitive_desc> conv_pd(const Geometry& g, DType x_type) {
  return use_int8(active_target()) ? int8_conv_pd(g, x_type) : f32_conv_pd(g);
}

// The temporaries of a run (x as oneDNN reads it: channels-last int8, or f32 below VNNI; the
// int32 or f32 sums; oneDNN's scratchpad; window sums), kept per thread and grown, never shrunk:
// IS-Net's 512x512 convolutions need 64 MiB of sums, which freshly allocated would cost page
// faults and zero-filling on every run.
enum Buffer { kConvInput, kSums, kScratchpad, kChannelSum, kWindowSum, kBuffers };
template <typename T>
T* thread_buffer(Buffer which, size_t bytes) {
  thread_local std::vector<char> buffers[kBuffers];
  std::vector<char>& b = buffers[which];
  if (b.size() < bytes + 64) b.resize(bytes + 64);
  const auto address = reinterpret_cast<uintptr_t>(b.data());
  return reinterpret_cast<T*>(b.data() + ((64 - address % 64) % 64));  // cache-line aligned
}

class ConvIntegerKernel final : public Kernel {
 public:
  ConvIntegerKernel(const Geometry& g, DType x_type) : g_(g), x_type_(x_type) {}

  // Creates the primitive from `pd` and packs the weights: shifted to s8 (int8 path) or
  // w - w_zero in f32.
  void build(const dnnl::convolution_forward::primitive_desc& pd, const Tensor& w, const Tensor* w_zero) {
    int8_ = pd.src_desc().data_type() != memory::data_type::f32;
    impl_ = int8_ ? pd.impl_info_str() : str_cat("f32 ", pd.impl_info_str());
    prim_ = dnnl::convolution_forward(pd);
    src_md_ = pd.src_desc();
    dst_md_ = pd.dst_desc();
    scratchpad_md_ = pd.scratchpad_desc();
    const bool unsigned_w = w.dtype() == DType::kU8;
    const int64_t per_m = w.numel() / g_.m;
    std::vector<int32_t> zero(static_cast<size_t>(g_.m), 0);
    for (int64_t m = 0; m < g_.m && w_zero != nullptr; ++m) {
      zero[m] = static_cast<int32_t>(w_zero->get_int(w_zero->numel() == 1 ? 0 : m));
    }
    const auto tag = g_.group == 1 ? memory::format_tag::oihw : memory::format_tag::goihw;
    if (!int8_) {
      std::vector<float> wf(static_cast<size_t>(w.numel()));
      for (int64_t i = 0; i < w.numel(); ++i) wf[i] = static_cast<float>(w.get_int(i) - zero[i / per_m]);
      weights_ = pack(memory::desc(weight_dims(g_), memory::data_type::f32, tag), wf.data(), pd.weights_desc());
      return;
    }
    // w8 and c[m] (see the file comment).
    std::vector<int8_t> w8(static_cast<size_t>(w.numel()));
    for (int64_t i = 0; i < w.numel(); ++i) {
      w8[i] = static_cast<int8_t>(w.get_int(i) - (unsigned_w ? 128 : 0));
    }
    weights_ = pack(memory::desc(weight_dims(g_), memory::data_type::s8, tag), w8.data(), pd.weights_desc());
    comp_.assign(static_cast<size_t>(g_.m), 0);
    for (int64_t m = 0; m < g_.m; ++m) {
      comp_[m] = (unsigned_w ? 128 : 0) - zero[m];
      needs_window_sums_ |= comp_[m] != 0;
    }
  }

  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    const int32_t xz = in.size() > 2 && in[2] != nullptr ? static_cast<int32_t>(in[2]->get_int(0)) : 0;
    const char* x = static_cast<const char*>(in[0]->raw_data());
    if (!int8_) return run_f32(x, xz, out[0]->data<int32_t>());
    char* x_nhwc = thread_buffer<char>(kConvInput, src_md_.get_size());
    int32_t* acc = thread_buffer<int32_t>(kSums, dst_md_.get_size());
    char* scratch = thread_buffer<char>(kScratchpad, scratchpad_md_.get_size());
    dnnl::stream stream(cpu_engine());
    {
      const memory::desc plain({g_.n, g_.c, g_.h, g_.w}, src_md_.data_type(), memory::format_tag::nchw);
      memory from(plain, cpu_engine(), const_cast<char*>(x));
      memory to(src_md_, cpu_engine(), x_nhwc);
      dnnl::reorder(from, to).execute(stream, from, to);
      int32_t zp = xz;
      memory zp_mem({{1}, memory::data_type::s32, memory::format_tag::x}, cpu_engine(), &zp);
      memory w_mem = weights_;
      memory dst(dst_md_, cpu_engine(), acc);
      memory pad(scratchpad_md_, cpu_engine(), scratch);
      prim_.execute(stream, {{DNNL_ARG_SRC, to},
                             {DNNL_ARG_WEIGHTS, w_mem},
                             {DNNL_ARG_DST, dst},
                             {DNNL_ARG_SCRATCHPAD, pad},
                             {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp_mem}});
      stream.wait();
    }
    const int32_t* sums = needs_window_sums_ ? window_sums(x, xz) : nullptr;
    scatter_to_nchw(acc, sums, out[0]->data<int32_t>());
    return Status::ok();
  }

  std::string_view name() const override { return "onednn.conv_integer"; }
  std::string implementation() const override { return impl_; }

 private:
  // y = round(conv_f32(x - x_zero, w - w_zero)), x - x_zero written straight into the layout the
  // convolution reads and the sums read back from the one it writes.
  Status run_f32(const char* x, int32_t xz, int32_t* y) const {
    const int64_t bi = channel_block_of(src_md_), bo = channel_block_of(dst_md_);
    const int64_t cb = (g_.c + bi - 1) / bi, mb = (g_.m + bo - 1) / bo;
    const int64_t in_plane = g_.h * g_.w, out_plane = g_.oh * g_.ow;
    float* xf = thread_buffer<float>(kConvInput, src_md_.get_size());
    float* acc = thread_buffer<float>(kSums, dst_md_.get_size());
    char* scratch = thread_buffer<char>(kScratchpad, scratchpad_md_.get_size());
    const bool parallel = g_.n * cb * in_plane * bi > (int64_t{1} << 15);
    // One block of channels at a time: each output line is written whole, lanes past C as 0.
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t nb = 0; nb < g_.n * cb; ++nb) {
      const int64_t n = nb / cb, c0 = (nb % cb) * bi, live = std::min(bi, g_.c - c0);
      float* to = xf + nb * in_plane * bi;
      for (int64_t l = 0; l < bi; ++l) {
        if (l >= live) {
          for (int64_t p = 0; p < in_plane; ++p) to[p * bi + l] = 0.0f;
          continue;
        }
        const int64_t offset = (n * g_.c + c0 + l) * in_plane;
        if (x_type_ == DType::kU8) {
          const auto* src = reinterpret_cast<const uint8_t*>(x) + offset;
          for (int64_t p = 0; p < in_plane; ++p) to[p * bi + l] = static_cast<float>(static_cast<int32_t>(src[p]) - xz);
        } else {
          const auto* src = reinterpret_cast<const int8_t*>(x) + offset;
          for (int64_t p = 0; p < in_plane; ++p) to[p * bi + l] = static_cast<float>(static_cast<int32_t>(src[p]) - xz);
        }
      }
    }
    dnnl::stream stream(cpu_engine());
    memory src(src_md_, cpu_engine(), xf), dst(dst_md_, cpu_engine(), acc), pad(scratchpad_md_, cpu_engine(), scratch);
    memory w_mem = weights_;
    prim_.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w_mem}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, pad}});
    stream.wait();
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t nm = 0; nm < g_.n * g_.m; ++nm) {
      const int64_t n = nm / g_.m, m = nm % g_.m;
      const float* from = acc + ((n * mb + m / bo) * out_plane) * bo + m % bo;
      int32_t* to = y + nm * out_plane;
      for (int64_t p = 0; p < out_plane; ++p) to[p] = static_cast<int32_t>(std::nearbyint(from[p * bo]));
    }
    return Status::ok();
  }

  // S[n][group][oh][ow]: the sum of x - xz over each output position's window (padding: 0).
  const int32_t* window_sums(const char* x, int32_t xz) const {
    const int64_t cg = g_.c / g_.group, plane = g_.h * g_.w, planes = g_.n * g_.group;
    int32_t* channel_sum = thread_buffer<int32_t>(kChannelSum, static_cast<size_t>(planes * plane) * 4);
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes; ++p) {
      int32_t* dst = channel_sum + p * plane;
      std::fill_n(dst, plane, -static_cast<int32_t>(cg) * xz);
      for (int64_t c = 0; c < cg; ++c) {
        const int64_t offset = (p * cg + c) * plane;  // n * C + group * cg + c == p * cg + c
        if (x_type_ == DType::kU8) {
          const auto* src = reinterpret_cast<const uint8_t*>(x) + offset;
          for (int64_t i = 0; i < plane; ++i) dst[i] += src[i];
        } else {
          const auto* src = reinterpret_cast<const int8_t*>(x) + offset;
          for (int64_t i = 0; i < plane; ++i) dst[i] += src[i];
        }
      }
    }
    int32_t* sums = thread_buffer<int32_t>(kWindowSum, static_cast<size_t>(planes * g_.oh * g_.ow) * 4);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < planes * g_.oh; ++r) {
      const int64_t p = r / g_.oh, oy = r % g_.oh;
      const int32_t* src = channel_sum + p * plane;
      int32_t* dst = sums + r * g_.ow;
      for (int64_t ox = 0; ox < g_.ow; ++ox) {
        int32_t s = 0;
        for (int64_t ky = 0; ky < g_.kh; ++ky) {
          const int64_t iy = oy * g_.sh - g_.ph + ky * g_.dh;
          if (iy < 0 || iy >= g_.h) continue;
          for (int64_t kx = 0; kx < g_.kw; ++kx) {
            const int64_t ix = ox * g_.sw - g_.pw + kx * g_.dw;
            if (ix >= 0 && ix < g_.w) s += src[iy * g_.w + ix];
          }
        }
        dst[ox] = s;
      }
    }
    return sums;
  }

  // y[n][m][p] = acc[n][p][m] + c[m] * S[n][group of m][p], transposed in tiles of 64 positions.
  void scatter_to_nchw(const int32_t* acc, const int32_t* sums, int32_t* y) const {
    constexpr int64_t kTile = 64;
    const int64_t positions = g_.oh * g_.ow, tiles = (positions + kTile - 1) / kTile, mg = g_.m / g_.group;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < g_.n * tiles; ++t) {
      const int64_t n = t / tiles, p0 = (t % tiles) * kTile, p1 = std::min(positions, p0 + kTile);
      for (int64_t m = 0; m < g_.m; ++m) {
        int32_t* dst = y + (n * g_.m + m) * positions;
        const int32_t* src = acc + n * positions * g_.m + m;
        if (sums == nullptr) {
          for (int64_t p = p0; p < p1; ++p) dst[p] = src[p * g_.m];
        } else {
          const int32_t* s = sums + (n * g_.group + m / mg) * positions;
          const int32_t c = comp_[m];
          for (int64_t p = p0; p < p1; ++p) dst[p] = src[p * g_.m] + c * s[p];
        }
      }
    }
  }

  Geometry g_;
  DType x_type_;
  dnnl::convolution_forward prim_;
  memory::desc src_md_, dst_md_, scratchpad_md_;
  memory weights_;
  std::vector<int32_t> comp_;
  bool int8_ = true;                // the VNNI path; false: the f32 one
  bool needs_window_sums_ = false;
  std::string impl_;
};

bool supports(const KernelCompileContext& ctx) {
  const auto g = plan_geometry(ctx);
  return g && conv_pd(*g, ctx.node.input(0)->dtype).has_value();
}

Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
  const auto g = plan_geometry(ctx);
  const auto pd = g ? conv_pd(*g, ctx.node.input(0)->dtype) : std::nullopt;
  if (!pd) return Status::internal_error(str_cat(ctx.node.describe(), ": not an int8 convolution onednn.conv_integer handles"));
  auto kernel = std::make_unique<ConvIntegerKernel>(*g, ctx.node.input(0)->dtype);
  try {
    kernel->build(*pd, *constant_input(ctx, 1), constant_input(ctx, 3));
  } catch (const dnnl::error& e) {
    return Status::internal_error(str_cat(ctx.node.describe(), ": packing int8 weights for oneDNN: ", e.what()));
  }
  return std::unique_ptr<Kernel>(std::move(kernel));
}

}  // namespace

KernelImpl onednn_conv_integer_kernel() { return {"onednn.conv_integer", "ConvInteger", supports, create}; }

}  // namespace opfuse::onednn
