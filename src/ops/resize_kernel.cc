// The Resize reference kernel. Interpolation is separable: for every axis and every output index
// we precompute the input taps (index * stride, weight) that contribute, then each output element
// sums the products of its per-axis taps. Nearest has 1 tap, linear 2, cubic 4; zero-weight taps
// are dropped, so an axis that is not resized costs one tap. This handles any rank and any subset
// of resized axes with one code path.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/reduction_internal.h"
#include "ops/resize_internal.h"

namespace opfuse {

Status resize_kernel(KernelContext& ctx);

namespace {

constexpr int kMaxTaps = 4;

struct AxisTaps {
  std::vector<int8_t> count;    // per output index; 0: outside the crop, write the extrapolation
  std::vector<int64_t> offset;  // kMaxTaps per output index: input index * stride
  std::vector<double> weight;   // kMaxTaps per output index
};

struct AxisGeometry {
  int64_t in_len = 0;
  int64_t out_len = 0;
  double scale = 1;         // output length / input length as ONNX defines it
  double len_resized = 1;   // in_len * scale: fractional when scales were given (as in ONNX's
                            // reference, which align_corners and the conformance data use)
  double roi_start = 0, roi_end = 1;
};

// Maps an output coordinate to the input coordinate (ONNX coordinate_transformation_mode).
double source_coordinate(ResizeCoordMode mode, const AxisGeometry& g, int64_t x_out) {
  const double x = static_cast<double>(x_out);
  const double in_max = static_cast<double>(g.in_len - 1);
  switch (mode) {
    case ResizeCoordMode::kHalfPixel: return (x + 0.5) / g.scale - 0.5;
    case ResizeCoordMode::kPytorchHalfPixel:
      return g.len_resized == 1 ? 0.0 : (x + 0.5) / g.scale - 0.5;
    case ResizeCoordMode::kAlignCorners:
      return g.len_resized == 1 ? 0.0 : x * in_max / (g.len_resized - 1);
    case ResizeCoordMode::kAsymmetric: return x / g.scale;
    case ResizeCoordMode::kTfHalfPixelForNn: return (x + 0.5) / g.scale;
    case ResizeCoordMode::kTfCropAndResize:
      if (g.len_resized == 1) return 0.5 * (g.roi_start + g.roi_end) * in_max;
      return g.roi_start * in_max + x * (g.roi_end - g.roi_start) * in_max / (g.len_resized - 1);
  }
  return x;
}

int64_t nearest_index(ResizeNearestMode mode, double x) {
  const double fl = std::floor(x);
  switch (mode) {
    case ResizeNearestMode::kRoundPreferFloor: return static_cast<int64_t>(x - fl == 0.5 ? fl : std::round(x));
    case ResizeNearestMode::kRoundPreferCeil:
      return static_cast<int64_t>(x - fl == 0.5 ? fl + 1 : std::round(x));
    case ResizeNearestMode::kFloor: return static_cast<int64_t>(fl);
    case ResizeNearestMode::kCeil: return static_cast<int64_t>(std::ceil(x));
  }
  return static_cast<int64_t>(fl);
}

// Keys' cubic convolution kernel with parameter a, at distance d >= 0.
double cubic_weight(double a, double d) {
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

AxisTaps build_taps(const ResizeAttrs& attrs, const AxisGeometry& g, int64_t stride) {
  AxisTaps taps;
  taps.count.assign(g.out_len, 0);
  taps.offset.assign(g.out_len * kMaxTaps, 0);
  taps.weight.assign(g.out_len * kMaxTaps, 0.0);
  const int64_t last = g.in_len - 1;
  auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i, 0, last); };
  for (int64_t xo = 0; xo < g.out_len; ++xo) {
    double x = source_coordinate(attrs.coord, g, xo);
    if (attrs.coord == ResizeCoordMode::kTfCropAndResize && (x < 0 || x > static_cast<double>(last))) {
      continue;  // count 0: extrapolation_value
    }
    int64_t idx[kMaxTaps];
    double w[kMaxTaps];
    int n = 0;
    if (attrs.mode == ResizeMode::kNearest) {
      idx[0] = clamp(nearest_index(attrs.nearest, x));
      w[0] = 1;
      n = 1;
    } else if (attrs.mode == ResizeMode::kLinear) {
      // Clamping the coordinate is the same as ONNX's edge padding for two taps.
      x = std::clamp(x, 0.0, static_cast<double>(last));
      const double fl = std::floor(x);
      const double t = x - fl;
      idx[0] = static_cast<int64_t>(fl);
      idx[1] = std::min<int64_t>(idx[0] + 1, last);
      w[0] = 1 - t;
      w[1] = t;
      n = 2;
    } else {
      const double fl = std::floor(x);
      const double t = x - fl;
      double sum = 0;
      for (int k = 0; k < 4; ++k) {
        const int64_t i = static_cast<int64_t>(fl) + k - 1;
        double wk = cubic_weight(attrs.cubic_a, std::fabs(t - (k - 1)));
        if (i < 0 || i > last) {
          if (attrs.exclude_outside) wk = 0;  // renormalised below
        }
        idx[k] = clamp(i);
        w[k] = wk;
        sum += wk;
      }
      n = 4;
      if (attrs.exclude_outside) {
        if (sum == 0) {  // every tap outside: fall back to the nearest edge
          idx[0] = clamp(static_cast<int64_t>(std::round(x)));
          w[0] = 1;
          n = 1;
        } else {
          for (int k = 0; k < 4; ++k) w[k] /= sum;
        }
      }
    }
    int kept = 0;
    for (int k = 0; k < n; ++k) {
      if (w[k] == 0 && !(k == n - 1 && kept == 0)) continue;
      taps.offset[xo * kMaxTaps + kept] = idx[k] * stride;
      taps.weight[xo * kMaxTaps + kept] = w[k];
      ++kept;
    }
    taps.count[xo] = static_cast<int8_t>(kept);
  }
  return taps;
}

template <typename T>
T store_interpolated(double v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // Cubic overshoots: saturate instead of wrapping (uint8 images).
    v = std::nearbyint(v);
    v = std::clamp(v, static_cast<double>(std::numeric_limits<T>::lowest()),
                   static_cast<double>(std::numeric_limits<T>::max()));
  }
  return element_from_double<T>(v);
}

template <typename T>
void resize_typed(const Tensor& in, Tensor& out, const std::vector<AxisTaps>& axes,
                  const ResizeAttrs& attrs) {
  const T* x = in.data<T>();
  T* y = out.data<T>();
  const int64_t rank = out.rank();
  const int64_t inner = out.dim(rank - 1);
  const int64_t rows = inner > 0 ? out.numel() / inner : 0;
  const bool copy = attrs.mode == ResizeMode::kNearest;
  const T extrapolated = store_interpolated<T>(attrs.extrapolation_value);
  const AxisTaps& last_axis = axes[rank - 1];
#pragma omp parallel for schedule(static) if (rows > 1 && out.numel() >= kReduceParallelThreshold)
  for (int64_t row = 0; row < rows; ++row) {
    // The taps of the leading axes are the same along the row: combine them once.
    std::vector<std::pair<int64_t, double>> lead = {{0, 1.0}};
    bool outside = false;
    int64_t rem = row;
    for (int64_t a = rank - 2; a >= 0; --a) {
      const int64_t c = rem % out.dim(a);
      rem /= out.dim(a);
      const AxisTaps& t = axes[a];
      const int n = t.count[c];
      if (n == 0) {
        outside = true;
        break;
      }
      std::vector<std::pair<int64_t, double>> next;
      next.reserve(lead.size() * n);
      for (const auto& [off, w] : lead) {
        for (int k = 0; k < n; ++k) {
          next.emplace_back(off + t.offset[c * kMaxTaps + k], w * t.weight[c * kMaxTaps + k]);
        }
      }
      lead = std::move(next);
    }
    T* out_row = y + row * inner;
    for (int64_t xo = 0; xo < inner; ++xo) {
      const int n = last_axis.count[xo];
      if (outside || n == 0) {
        out_row[xo] = extrapolated;
        continue;
      }
      const int64_t* off = &last_axis.offset[xo * kMaxTaps];
      const double* w = &last_axis.weight[xo * kMaxTaps];
      if (copy) {
        out_row[xo] = x[lead[0].first + off[0]];
        continue;
      }
      double acc = 0;
      for (const auto& [lo, lw] : lead) {
        for (int k = 0; k < n; ++k) acc += lw * w[k] * element_to_double(x[lo + off[k]]);
      }
      out_row[xo] = store_interpolated<T>(acc);
    }
  }
}

const Tensor* given(const KernelContext& ctx, size_t i) {
  const Tensor* t = ctx.input_or_null(i);
  return t && t->numel() > 0 ? t : nullptr;
}

}  // namespace

Status resize_kernel(KernelContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(ResizeAttrs attrs, parse_resize_attrs(ctx.node(), ctx.attrs()));
  const Tensor& in = ctx.input(0);
  const Tensor* scales = given(ctx, kResizeScales);
  const Tensor* sizes = given(ctx, kResizeSizes);
  if ((scales != nullptr) == (sizes != nullptr)) {
    return ctx.error(scales ? "both scales and sizes are given; give exactly one"
                            : "neither scales nor sizes is given; give exactly one");
  }
  const int64_t rank = in.rank();
  const Tensor* given_t = scales ? scales : sizes;
  if (given_t->numel() != rank) {
    return ctx.error(str_cat(scales ? "scales" : "sizes", " has ", given_t->numel(),
                             " entries but X ", in.type_string(), " has rank ", rank));
  }
  const Tensor* roi = nullptr;
  if (attrs.coord == ResizeCoordMode::kTfCropAndResize) {
    roi = ctx.input_or_null(kResizeRoi);
    if (roi == nullptr || roi->numel() != 2 * rank) {
      return ctx.error(str_cat("tf_crop_and_resize needs roi with 2 x rank = ", 2 * rank,
                               " entries, got ", roi ? roi->type_string() : "none"));
    }
  }
  if (rank == 0) {
    ctx.set_output(0, in);
    return Status::ok();
  }
  std::vector<AxisGeometry> geo(rank);
  std::vector<int64_t> out_dims(rank);
  for (int64_t i = 0; i < rank; ++i) {
    AxisGeometry& g = geo[i];
    g.in_len = in.dim(i);
    if (scales) {
      const float s = static_cast<float>(scales->get_double(i));
      if (!(s > 0)) return ctx.error(str_cat("scales[", i, "] = ", s, " is not positive"));
      g.scale = s;
      g.out_len = resize_output_len(g.in_len, s);
      g.len_resized = static_cast<double>(g.in_len) * g.scale;
    } else {
      g.out_len = sizes->get_int(i);
      if (g.out_len < 0) return ctx.error(str_cat("sizes[", i, "] is negative (", g.out_len, ")"));
      g.scale = g.in_len > 0 ? static_cast<double>(g.out_len) / static_cast<double>(g.in_len) : 1.0;
      g.len_resized = static_cast<double>(g.out_len);
    }
    if (g.in_len == 0 && g.out_len > 0) {
      return ctx.error(str_cat("cannot resize axis ", i, " of X ", in.type_string(),
                               " from length 0 to ", g.out_len));
    }
    if (roi) {
      g.roi_start = roi->get_double(i);
      g.roi_end = roi->get_double(rank + i);
    }
    out_dims[i] = g.out_len;
  }
  OPFUSE_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, in.dtype(), out_dims));
  if (out->numel() == 0) return Status::ok();
  std::vector<AxisTaps> taps;
  int64_t stride = 1;
  std::vector<int64_t> strides(rank);
  for (int64_t i = rank - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= in.dim(i);
  }
  for (int64_t i = 0; i < rank; ++i) taps.push_back(build_taps(attrs, geo[i], strides[i]));
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    resize_typed<T>(in, *out, taps, attrs);
  });
  return Status::ok();
}

}  // namespace opfuse
