// Resize of 4-D NCHW f32 over H and W, nearest or linear (bilinear), with constant scales or
// sizes; also of a blocked f32[N, Cb, H, W, b] (the layout pass's form, scale 1 on the block).
// Every per-axis mapping (source index and weights for each output index) is computed at
// compile time with the same coordinate rules as the reference (ops/resize_kernel.cc); the run
// is then a gather (nearest) or a 4-tap blend (linear) per output row, rows spread over OpenMP
// threads. Declined: cubic, tf_crop_and_resize, and any case where N or C would be remapped.
// On NCHW a linear resize is separable, in two steps at the machine's width: a horizontal blend
// of a source row (vector gathers from L1) and a vertical blend of two rows. Upsampling blends
// each source row horizontally once, for all the output rows that read it, so most output rows
// are a vertical blend only, streamed; downscaling blends vertically first. (The scalar 4-tap
// loop per output pixel, compiled for baseline x86-64, took 22 ms for DeepLabV3's final
// 21 x 65 x 65 -> 520 x 520 upsampling on a Zen 3, which the layout pass keeps plain; vertical
// then horizontal per output row, 8.1-9.4 ms; this, 2.9 ms, about the time to write its 22.7 MB.)
// Nearest on NCHW stays a scalar gather. On a
// blocked tensor each pixel is whole vectors of channels, so the linear blend runs in Highway
// directly: M-LSD's 2x upsampling of 8-channel blocks ran its scalar loop at about 2 GB/s.
#ifndef OPFUSE_KERNELS_CPU_HWY_RESIZE_DECLS_
#define OPFUSE_KERNELS_CPU_HWY_RESIZE_DECLS_
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/hwy_kernels.h"
#include "ops/op_def.h"
#include "ops/resize_internal.h"
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/hwy_resize.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One output row of a linear resize of pixels of `lanes` floats (a block: one or more vectors):
// o[x] = a0 * (w0[x] * r0[i0[x]] + w1[x] * r0[i1[x]]) + a1 * (the same of r1).
void BlendBlockedRow(const float* r0, const float* r1, float a0, float a1, const int64_t* i0, const int64_t* i1,
                     const float* w0, const float* w1, int64_t out_width, int64_t lanes, float* o) {
  const hn::ScalableTag<float> d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  const auto va0 = hn::Set(d, a0), va1 = hn::Set(d, a1);
  for (int64_t x = 0; x < out_width; ++x, o += lanes) {
    const auto vw0 = hn::Set(d, w0[x]), vw1 = hn::Set(d, w1[x]);
    const float *t0 = r0 + i0[x] * lanes, *t1 = r0 + i1[x] * lanes;
    const float *b0 = r1 + i0[x] * lanes, *b1 = r1 + i1[x] * lanes;
    int64_t c = 0;
    for (; c + n <= lanes; c += n) {
      const auto top = hn::MulAdd(vw1, hn::LoadU(d, t1 + c), hn::Mul(vw0, hn::LoadU(d, t0 + c)));
      const auto bottom = hn::MulAdd(vw1, hn::LoadU(d, b1 + c), hn::Mul(vw0, hn::LoadU(d, b0 + c)));
      hn::StoreU(hn::MulAdd(va1, bottom, hn::Mul(va0, top)), d, o + c);
    }
    for (; c < lanes; ++c) {  // a block narrower than this target's vector
      o[c] = a0 * (w0[x] * t0[c] + w1[x] * t1[c]) + a1 * (w0[x] * b0[c] + w1[x] * b1[c]);
    }
  }
}

// Linear resize of an NCHW plane, one row at a time in two steps at the machine's width:
// o[x] = a0 * top[x] + a1 * bottom[x] over n floats (the vertical blend) ...
void BlendRows(const float* top, const float* bottom, float a0, float a1, int64_t n, float* o) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto va0 = hn::Set(d, a0), va1 = hn::Set(d, a1);
  int64_t x = 0;
  for (; x + lanes <= n; x += lanes) {
    hn::StoreU(hn::MulAdd(va1, hn::LoadU(d, bottom + x), hn::Mul(va0, hn::LoadU(d, top + x))), d, o + x);
  }
  for (; x < n; ++x) o[x] = a0 * top[x] + a1 * bottom[x];
}

// ... and o[x] = w0[x] * r[i0[x]] + w1[x] * r[i1[x]] over the output width (the horizontal one,
// through vector gathers from a row in L1).
void BlendColumns(const float* r, const int32_t* i0, const int32_t* i1, const float* w0, const float* w1,
                  int64_t out_width, float* o) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t x = 0;
  for (; x + lanes <= out_width; x += lanes) {
    const auto left = hn::GatherIndex(d, r, hn::LoadU(di, i0 + x));
    const auto right = hn::GatherIndex(d, r, hn::LoadU(di, i1 + x));
    hn::StoreU(hn::MulAdd(hn::LoadU(d, w1 + x), right, hn::Mul(hn::LoadU(d, w0 + x), left)), d, o + x);
  }
  for (; x < out_width; ++x) o[x] = w0[x] * r[i0[x]] + w1[x] * r[i1[x]];
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace opfuse::hwy_cpu {
HWY_EXPORT(BlendBlockedRow);
HWY_EXPORT(BlendRows);
HWY_EXPORT(BlendColumns);

namespace {

struct Geometry {
  int64_t in_len = 0, out_len = 0;
  double scale = 1, len_resized = 1;
};

// The reference's coordinate_transformation_mode formulas (tf_crop_and_resize is declined).
double source_coordinate(ResizeCoordMode mode, const Geometry& g, int64_t xo) {
  const double x = static_cast<double>(xo);
  switch (mode) {
    case ResizeCoordMode::kHalfPixel: return (x + 0.5) / g.scale - 0.5;
    case ResizeCoordMode::kPytorchHalfPixel: return g.len_resized == 1 ? 0.0 : (x + 0.5) / g.scale - 0.5;
    case ResizeCoordMode::kAlignCorners:
      return g.len_resized == 1 ? 0.0 : x * static_cast<double>(g.in_len - 1) / (g.len_resized - 1);
    case ResizeCoordMode::kAsymmetric: return x / g.scale;
    case ResizeCoordMode::kTfHalfPixelForNn: return (x + 0.5) / g.scale;
    case ResizeCoordMode::kTfCropAndResize: break;
  }
  return x;
}

int64_t nearest_index(ResizeNearestMode mode, double x) {
  const double fl = std::floor(x);
  switch (mode) {
    case ResizeNearestMode::kRoundPreferFloor: return static_cast<int64_t>(x - fl == 0.5 ? fl : std::round(x));
    case ResizeNearestMode::kRoundPreferCeil: return static_cast<int64_t>(x - fl == 0.5 ? fl + 1 : std::round(x));
    case ResizeNearestMode::kFloor: return static_cast<int64_t>(fl);
    case ResizeNearestMode::kCeil: return static_cast<int64_t>(std::ceil(x));
  }
  return static_cast<int64_t>(fl);
}

// Per output index: two source indices and weights (nearest: weight 1 on the first).
struct AxisMap {
  std::vector<int64_t> i0, i1;
  std::vector<float> w0, w1;
};

AxisMap axis_map(const ResizeAttrs& a, const Geometry& g) {
  AxisMap m;
  const int64_t last = g.in_len - 1;
  for (int64_t xo = 0; xo < g.out_len; ++xo) {
    double x = source_coordinate(a.coord, g, xo);
    if (a.mode == ResizeMode::kNearest) {
      const int64_t i = std::clamp<int64_t>(nearest_index(a.nearest, x), 0, last);
      m.i0.push_back(i);
      m.i1.push_back(i);
      m.w0.push_back(1.0f);
      m.w1.push_back(0.0f);
    } else {
      x = std::clamp(x, 0.0, static_cast<double>(last));
      const double fl = std::floor(x);
      const int64_t i = static_cast<int64_t>(fl);
      m.i0.push_back(i);
      m.i1.push_back(std::min<int64_t>(i + 1, last));
      m.w0.push_back(static_cast<float>(1 - (x - fl)));
      m.w1.push_back(static_cast<float>(x - fl));
    }
  }
  return m;
}

bool is_identity(const AxisMap& m) {
  for (size_t i = 0; i < m.i0.size(); ++i) {
    if (m.i0[i] != static_cast<int64_t>(i) || (m.w1[i] != 0 && m.i1[i] != m.i0[i])) return false;
  }
  return true;
}

class ResizeKernel final : public Kernel {
 public:
  std::vector<int64_t> in_dims, out_dims;
  AxisMap h, w;
  bool linear = false;
  // Floats per pixel: 1 for NCHW; the block for a blocked f32[N, Cb, H, W, b] (ops/layout_ops.cc),
  // whose last axis is not resized.
  int64_t lanes = 1;
  // Linear on NCHW: BlendRows and BlendColumns, with w's source indices as int32 (vector
  // gathers), columns first when upsampling H.
  bool plain_blend = false, columns_first = false;
  std::vector<int32_t> w_i0, w_i1;
  std::string_view name() const override { return "hwy.resize"; }
  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    if (in[0] == nullptr || in[0]->dims() != in_dims || out[0] == nullptr || out[0]->dims() != out_dims) {
      return Status::internal_error("hwy.resize: a tensor does not have its planned shape");
    }
    const float* x = in[0]->data<float>();
    float* y = out[0]->data<float>();
    const int64_t planes = in_dims[0] * in_dims[1], ih = in_dims[2], iw = in_dims[3];
    const int64_t oh = out_dims[2], ow = out_dims[3], l = lanes;
    const int64_t rows = planes * oh;
    const bool parallel = rows * ow * l > kParallelThreshold;
#pragma omp parallel if (parallel)
    {
      // NCHW linear: this thread's rows blended horizontally, by source row (plane * ih + row),
      // or its vertically blended source row (downscaling, below).
      struct Blended {
        int64_t key = -1;
        std::vector<float> row;
      } slots[2];
      if (plain_blend) {
        for (Blended& b : slots) b.row.resize(static_cast<size_t>(columns_first ? ow : iw));
      }
      // The slot holding source row `key` blended horizontally, made now (not in slot `keep`) if absent.
      const auto columns = [&](int64_t key, const float* src, int keep) -> const float* {
        for (const Blended& b : slots) {
          if (b.key == key) return b.row.data();
        }
        Blended& b = slots[keep == 0 ? 1 : 0];
        HWY_DYNAMIC_DISPATCH(BlendColumns)(src, w_i0.data(), w_i1.data(), w.w0.data(), w.w1.data(), ow, b.row.data());
        b.key = key;
        return b.row.data();
      };
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t p = r / oh, yo = r % oh;
        const float* plane = x + p * ih * iw * l;
        const float* r0 = plane + h.i0[yo] * iw * l;
        const float* r1 = plane + h.i1[yo] * iw * l;
        float* o = y + r * ow * l;
        if (!linear) {
          if (l == 1) {
            for (int64_t xo = 0; xo < ow; ++xo) o[xo] = r0[w.i0[xo]];
          } else {
            for (int64_t xo = 0; xo < ow; ++xo) std::memcpy(o + xo * l, r0 + w.i0[xo] * l, l * sizeof(float));
          }
          continue;
        }
        const float a0 = h.w0[yo], a1 = h.w1[yo];
        if (!plain_blend) {
          HWY_DYNAMIC_DISPATCH(BlendBlockedRow)(r0, r1, a0, a1, w.i0.data(), w.i1.data(), w.w0.data(), w.w1.data(), ow, l, o);
        } else if (columns_first) {
          // Upsampling: each source row serves about oh / ih output rows in a row; it is blended
          // horizontally once for all of them, and each output row is a vertical blend of two.
          const int64_t k0 = p * ih + h.i0[yo], k1 = p * ih + h.i1[yo];
          const int keep = slots[0].key == k1 ? 0 : slots[1].key == k1 ? 1 : -1;
          const float* top = columns(k0, r0, keep);
          const float* bottom = columns(k1, r1, slots[0].row.data() == top ? 0 : 1);
          HWY_DYNAMIC_DISPATCH(BlendRows)(top, bottom, a0, a1, ow, o);
        } else {
          HWY_DYNAMIC_DISPATCH(BlendRows)(r0, r1, a0, a1, iw, slots[0].row.data());
          HWY_DYNAMIC_DISPATCH(BlendColumns)(slots[0].row.data(), w_i0.data(), w_i1.data(), w.w0.data(), w.w1.data(), ow, o);
        }
      }
    }
    return Status::ok();
  }
};

const Tensor* given(const KernelCompileContext& ctx, size_t i) {
  const Tensor* t = i < ctx.constants.size() ? ctx.constants[i] : nullptr;
  return t && t->numel() > 0 ? t : nullptr;
}

// The kernel, or nullptr when the node is not one this kernel handles.
std::unique_ptr<ResizeKernel> plan(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  auto in = static_dims_of(node.input(0));
  auto out = static_dims_of(node.output(0));
  if (!in || !out || (in->size() != 4 && in->size() != 5) || out->size() != in->size()) return nullptr;
  const int rank = static_cast<int>(in->size());
  for (size_t i = 1; i < node.inputs().size(); ++i) {  // roi/scales/sizes must be known constants
    if (node.input(i) != nullptr && (i >= ctx.constants.size() || ctx.constants[i] == nullptr)) return nullptr;
  }
  auto attrs = parse_resize_attrs(node, AttrReader(node));
  if (!attrs.is_ok()) return nullptr;
  const ResizeAttrs& a = attrs.value();
  if (a.mode == ResizeMode::kCubic || a.coord == ResizeCoordMode::kTfCropAndResize) return nullptr;
  const Tensor* scales = given(ctx, kResizeScales);
  const Tensor* sizes = given(ctx, kResizeSizes);
  if ((scales != nullptr) == (sizes != nullptr)) return nullptr;
  if ((scales ? scales : sizes)->numel() != rank) return nullptr;
  std::vector<AxisMap> maps;
  for (int i = 0; i < rank; ++i) {
    Geometry g;
    g.in_len = (*in)[i];
    g.out_len = (*out)[i];
    if (g.in_len == 0 || g.out_len == 0) return nullptr;
    if (scales) {
      const float s = static_cast<float>(scales->get_double(i));
      if (!(s > 0)) return nullptr;
      g.scale = s;
      g.len_resized = static_cast<double>(g.in_len) * g.scale;
    } else {
      g.scale = static_cast<double>(g.out_len) / static_cast<double>(g.in_len);
      g.len_resized = static_cast<double>(g.out_len);
    }
    maps.push_back(axis_map(a, g));
  }
  if ((*in)[0] != (*out)[0] || (*in)[1] != (*out)[1] || !is_identity(maps[0]) || !is_identity(maps[1])) {
    return nullptr;
  }
  if (rank == 5 && ((*in)[4] != (*out)[4] || !is_identity(maps[4]))) return nullptr;
  auto k = std::make_unique<ResizeKernel>();
  k->in_dims = *in;
  k->out_dims = *out;
  k->h = std::move(maps[2]);
  k->w = std::move(maps[3]);
  k->linear = a.mode == ResizeMode::kLinear;
  k->lanes = rank == 5 ? (*in)[4] : 1;
  k->plain_blend = k->linear && k->lanes == 1;
  k->columns_first = k->out_dims[2] >= k->in_dims[2];
  if (k->plain_blend) {
    if (k->in_dims[3] > std::numeric_limits<int32_t>::max()) return nullptr;
    k->w_i0.assign(k->w.i0.begin(), k->w.i0.end());
    k->w_i1.assign(k->w.i1.begin(), k->w.i1.end());
  }
  return k;
}

bool supports(const KernelCompileContext& ctx) { return plan(ctx) != nullptr; }

Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
  return std::unique_ptr<Kernel>(plan(ctx));
}

}  // namespace

std::vector<KernelImpl> resize_kernels() {
  return {KernelImpl{"hwy.resize", "Resize", supports, create}};
}

}  // namespace opfuse::hwy_cpu
#endif  // HWY_ONCE
