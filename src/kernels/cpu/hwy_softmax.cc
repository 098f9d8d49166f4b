// Row-wise normalisations over the last axis: Softmax, LogSoftmax (max-shifted, so exp never
// overflows) and LayerNormalization (two-pass variance). Rows are spread over OpenMP threads;
// within a row everything is Highway vectors with four independent accumulators.
#ifndef OPFUSE_KERNELS_CPU_HWY_SOFTMAX_DECLS_
#define OPFUSE_KERNELS_CPU_HWY_SOFTMAX_DECLS_
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/hwy_kernels.h"
#include "ops/op_def.h"
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/hwy_softmax.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/hwy_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

HWY_INLINE float RowMax(const float* x, size_t n) {
  const DF d;
  const size_t N = hn::Lanes(d);
  float m = -std::numeric_limits<float>::infinity();
  size_t i = 0;
  if (n >= N) {
    VF vm = hn::Set(d, m);
    auto nan = hn::Lt(vm, vm);  // all false
    for (; i + N <= n; i += N) {
      const VF v = hn::LoadU(d, x + i);
      nan = hn::Or(nan, hn::IsNaN(v));
      vm = hn::Max(vm, v);
    }
    if (!hn::AllFalse(d, nan)) return std::numeric_limits<float>::quiet_NaN();
    m = hn::GetLane(hn::MaxOfLanes(d, vm));
  }
  for (; i < n; ++i) {
    if (x[i] > m || std::isnan(x[i])) m = x[i];
    if (std::isnan(m)) return m;
  }
  return m;
}

// sum(exp(x - m)); with kStore the exponentials are also written to y.
template <bool kStore>
HWY_INLINE float SumExp(const float* x, float* y, size_t n, float m) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF vm = hn::Set(d, m);
  VF s0 = hn::Zero(d), s1 = hn::Zero(d);
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const VF e0 = SoftmaxExp(d, hn::Sub(hn::LoadU(d, x + i), vm));
    const VF e1 = SoftmaxExp(d, hn::Sub(hn::LoadU(d, x + i + N), vm));
    if (kStore) {
      hn::StoreU(e0, d, y + i);
      hn::StoreU(e1, d, y + i + N);
    }
    s0 = hn::Add(s0, e0);
    s1 = hn::Add(s1, e1);
  }
  for (; i + N <= n; i += N) {
    const VF e = SoftmaxExp(d, hn::Sub(hn::LoadU(d, x + i), vm));
    if (kStore) hn::StoreU(e, d, y + i);
    s0 = hn::Add(s0, e);
  }
  double sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
  for (; i < n; ++i) {
    const float e = std::exp(x[i] - m);
    if (kStore) y[i] = e;
    sum += e;
  }
  return static_cast<float>(sum);
}

// Rows of at most kShortRow elements (a detector's two class scores per anchor): one row per
// lane, one vector per column, so the exponentials run as vectors rather than a scalar exp per
// element (ultra-light face detector's [4420, 2] scores: 74 us row by row). Returns how many
// rows it did (whole vectors of rows); the caller does the rest row by row.
constexpr size_t kShortRow = 8;

size_t SoftmaxShortRows(const float* x, float* y, size_t rows, size_t n, bool log) {
  const DF d;
  const size_t N = hn::Lanes(d);
  HWY_ALIGN float col[kShortRow * hn::MaxLanes(DF())];
  size_t r = 0;
  for (; r + N <= rows; r += N) {
    const float* xr = x + r * n;
    for (size_t l = 0; l < N; ++l) {
      for (size_t j = 0; j < n; ++j) col[j * N + l] = xr[l * n + j];
    }
    VF m = hn::Load(d, col);
    auto nan = hn::IsNaN(m);
    for (size_t j = 1; j < n; ++j) {
      const VF v = hn::Load(d, col + j * N);
      nan = hn::Or(nan, hn::IsNaN(v));
      m = hn::Max(m, v);
    }
    // A row holding NaN is NaN throughout, as row by row.
    m = hn::IfThenElse(nan, hn::Set(d, std::numeric_limits<float>::quiet_NaN()), m);
    VF sum = hn::Zero(d);
    for (size_t j = 0; j < n; ++j) {
      const VF e = SoftmaxExp(d, hn::Sub(hn::Load(d, col + j * N), m));
      if (!log) hn::Store(e, d, col + j * N);
      sum = hn::Add(sum, e);
    }
    if (log) {
      // (x - m) - log(sum): x - m is exact near the max, where m + log(sum) would round to
      // m's ulp. The max contributes exp(0) = 1, so sum is in [1, n] (or NaN), and log1p of
      // sum - 1 (exact) keeps the small logarithms that log(sum) near 1 loses.
      const VF rest = hn::Sub(sum, hn::Set(d, 1.0f));
      const VF lse = hn::IfThenElse(hn::IsNaN(sum), sum, hn::Log1p(d, hn::Max(rest, hn::Zero(d))));
      for (size_t j = 0; j < n; ++j) {
        hn::Store(hn::Sub(hn::Sub(hn::Load(d, col + j * N), m), lse), d, col + j * N);
      }
    } else {
      const VF inv = hn::Div(hn::Set(d, 1.0f), sum);
      for (size_t j = 0; j < n; ++j) hn::Store(hn::Mul(hn::Load(d, col + j * N), inv), d, col + j * N);
    }
    float* yr = y + r * n;
    for (size_t l = 0; l < N; ++l) {
      for (size_t j = 0; j < n; ++j) yr[l * n + j] = col[j * N + l];
    }
  }
  return r;
}

void SoftmaxRows(const float* x, float* y, size_t rows, size_t n, bool log) {
  const DF d;
  const size_t N = hn::Lanes(d);
  if (n <= kShortRow) {
    const size_t done = SoftmaxShortRows(x, y, rows, n, log);
    x += done * n;
    y += done * n;
    rows -= done;
  }
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float m = RowMax(xr, n);
    if (log) {
      // (x - m) - log(sum), not x - (m + log(sum)), which rounds to m's ulp near the max.
      const float sum = SumExp<false>(xr, yr, n, m);
      const float lse = static_cast<float>(std::log(static_cast<double>(sum)));
      const VF vm = hn::Set(d, m), vl = hn::Set(d, lse);
      size_t i = 0;
      for (; i + N <= n; i += N) hn::StoreU(hn::Sub(hn::Sub(hn::LoadU(d, xr + i), vm), vl), d, yr + i);
      for (; i < n; ++i) yr[i] = (xr[i] - m) - lse;
    } else {
      const float sum = SumExp<true>(xr, yr, n, m);
      const float inv = static_cast<float>(1.0 / static_cast<double>(sum));
      const VF vi = hn::Set(d, inv);
      size_t i = 0;
      for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, yr + i), vi), d, yr + i);
      for (; i < n; ++i) yr[i] *= inv;
    }
  }
}

HWY_INLINE double RowSum(const float* x, size_t n, float shift, bool square) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF vs = hn::Set(d, shift);
  VF s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  size_t i = 0;
  auto term = [&](const float* p) HWY_ATTR {
    const VF c = hn::Sub(hn::LoadU(d, p), vs);
    return square ? hn::Mul(c, c) : c;
  };
  for (; i + 4 * N <= n; i += 4 * N) {
    s0 = hn::Add(s0, term(x + i));
    s1 = hn::Add(s1, term(x + i + N));
    s2 = hn::Add(s2, term(x + i + 2 * N));
    s3 = hn::Add(s3, term(x + i + 3 * N));
  }
  for (; i + N <= n; i += N) s0 = hn::Add(s0, term(x + i));
  double sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
  for (; i < n; ++i) {
    const double c = static_cast<double>(x[i]) - shift;
    sum += square ? c * c : c;
  }
  return sum;
}

// y = (x - mean) * inv_std * scale + bias per row of length n (bias may be null).
void LayerNormRows(const float* x, float* y, size_t rows, size_t n, const float* scale,
                   const float* bias, float eps, float* mean_out, float* inv_out) {
  const DF d;
  const size_t N = hn::Lanes(d);
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const double mean = n > 0 ? RowSum(xr, n, 0.0f, false) / static_cast<double>(n) : 0.0;
    const float fmean = static_cast<float>(mean);
    // Second pass around the float mean (what the vectors subtract); the small correction term
    // keeps the variance exact to first order in the mean's rounding.
    const double dev = n > 0 ? RowSum(xr, n, fmean, false) / static_cast<double>(n) : 0.0;
    const double var = n > 0 ? RowSum(xr, n, fmean, true) / static_cast<double>(n) - dev * dev : 0.0;
    const double inv = 1.0 / std::sqrt(std::max(var, 0.0) + static_cast<double>(eps));
    if (mean_out) mean_out[r] = fmean;
    if (inv_out) inv_out[r] = static_cast<float>(inv);
    const VF vm = hn::Set(d, fmean), vi = hn::Set(d, static_cast<float>(inv));
    size_t i = 0;
    for (; i + N <= n; i += N) {
      const VF c = hn::Mul(hn::Sub(hn::LoadU(d, xr + i), vm), vi);
      VF v = hn::Mul(c, hn::LoadU(d, scale + i));
      if (bias) v = hn::Add(v, hn::LoadU(d, bias + i));
      hn::StoreU(v, d, yr + i);
    }
    for (; i < n; ++i) {
      float v = (xr[i] - fmean) * static_cast<float>(inv) * scale[i];
      if (bias) v += bias[i];
      yr[i] = v;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace opfuse::hwy_cpu {
HWY_EXPORT(SoftmaxRows);
HWY_EXPORT(LayerNormRows);

namespace {

// Calls f(first_row, row_count) over [0, rows), on several threads when the work is large.
template <typename F>
void for_row_blocks(int64_t rows, int64_t row_len, F f) {
  const bool parallel = rows > 1 && rows * row_len > kParallelThreshold;
  const int64_t block = std::max<int64_t>(1, std::min<int64_t>(64, 8192 / std::max<int64_t>(row_len, 1)));
  const int64_t blocks = (rows + block - 1) / block;
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t first = b * block;
    f(first, std::min(block, rows - first));
  }
}

Status check_shape(const Tensor* t, const std::vector<int64_t>& dims, const char* what) {
  if (t == nullptr || t->dtype() != DType::kF32 || t->dims() != dims) {
    return Status::internal_error(str_cat(what, ": a tensor does not have its planned shape ", dims_to_string(dims)));
  }
  return Status::ok();
}

class SoftmaxKernel final : public Kernel {
 public:
  SoftmaxKernel(std::vector<int64_t> dims, int64_t n, bool log)
      : dims_(std::move(dims)), log_(log), n_(n), rows_(n > 0 ? numel_of(dims_) / n : 0) {}
  std::string_view name() const override { return log_ ? "hwy.log_softmax" : "hwy.softmax"; }
  int in_place_input() const override { return 0; }  // each row is read before written
  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    OPFUSE_TRY(check_shape(in[0], dims_, "hwy.softmax"));
    OPFUSE_TRY(check_shape(out[0], dims_, "hwy.softmax"));
    const float* x = in[0]->data<float>();
    float* y = out[0]->data<float>();
    const int64_t n = n_;
    const bool log = log_;
    for_row_blocks(rows_, n, [&](int64_t first, int64_t count) {
      HWY_DYNAMIC_DISPATCH(SoftmaxRows)(x + first * n, y + first * n, count, n, log);
    });
    return Status::ok();
  }

 private:
  std::vector<int64_t> dims_;
  bool log_;
  int64_t n_ = 1, rows_ = 0;
};

// Softmax over `axis` is a last-axis softmax when every dim after the axis is 1; returns the
// input dims and the row length (the axis' size).
std::optional<std::pair<std::vector<int64_t>, int64_t>> softmax_rows(const KernelCompileContext& ctx) {
  auto dims = static_dims_of(ctx.node.input(0));
  if (!dims || dims->empty() || !static_dims_of(ctx.node.output(0))) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(dims->size());
  int64_t axis = AttrReader(ctx.node).get_int("axis");
  if (axis < -rank || axis >= rank) return std::nullopt;
  if (axis < 0) axis += rank;
  for (int64_t i = axis + 1; i < rank; ++i) {
    if ((*dims)[i] != 1) return std::nullopt;
  }
  return std::make_pair(*dims, (*dims)[axis]);
}

bool supports_softmax(const KernelCompileContext& ctx) { return softmax_rows(ctx).has_value(); }

template <bool kLog>
Result<std::unique_ptr<Kernel>> create_softmax(const KernelCompileContext& ctx) {
  auto [dims, n] = *softmax_rows(ctx);
  return std::unique_ptr<Kernel>(std::make_unique<SoftmaxKernel>(std::move(dims), n, kLog));
}

// LayerNormalization, and opfuse::SkipLayerNormalization (X, R, Scale, B: LayerNorm of X + R),
// whose sum goes row block by row block into Y and is normalised there in place while it is in
// L1, so X + R is never a tensor of its own.
class LayerNormKernel final : public Kernel {
 public:
  std::vector<int64_t> dims, scale_dims, bias_dims, stats_dims;
  int64_t rows = 0, n = 0;
  float eps = 1e-5f;
  bool residual = false;  // SkipLayerNormalization: input 1 is R, Scale and B follow it
  std::string_view name() const override { return residual ? "hwy.skip_layer_norm" : "hwy.layer_norm"; }
  int in_place_input() const override { return 0; }
  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    const size_t p = residual ? 2 : 1;  // where Scale is
    OPFUSE_TRY(check_shape(in[0], dims, "hwy.layer_norm"));
    if (residual) OPFUSE_TRY(check_shape(in[1], dims, "hwy.skip_layer_norm"));
    OPFUSE_TRY(check_shape(in[p], scale_dims, "hwy.layer_norm"));
    const bool has_bias = in.size() > p + 1 && in[p + 1] != nullptr;
    if (has_bias) OPFUSE_TRY(check_shape(in[p + 1], bias_dims, "hwy.layer_norm"));
    OPFUSE_TRY(check_shape(out[0], dims, "hwy.layer_norm"));
    float* stats[2] = {nullptr, nullptr};
    for (size_t i = 1; i < out.size() && i < 3; ++i) {
      if (out[i] == nullptr) continue;
      OPFUSE_TRY(check_shape(out[i], stats_dims, "hwy.layer_norm"));
      stats[i - 1] = out[i]->data<float>();
    }
    const float* x = in[0]->data<float>();
    const float* r = residual ? in[1]->data<float>() : nullptr;
    const float* s = in[p]->data<float>();
    const float* b = has_bias ? in[p + 1]->data<float>() : nullptr;
    float* y = out[0]->data<float>();
    const int64_t len = n;
    const float e = eps;
    for_row_blocks(rows, n, [&](int64_t first, int64_t count) {
      const float* rows_in = x + first * len;
      if (r != nullptr) {  // the sum into Y (a block is at most 8 K floats: L1/L2-resident)
        float* sum = y + first * len;
        for (int64_t i = 0; i < count * len; ++i) sum[i] = rows_in[i] + r[first * len + i];
        rows_in = sum;
      }
      HWY_DYNAMIC_DISPATCH(LayerNormRows)(rows_in, y + first * len, count, len, s, b, e,
                                          stats[0] ? stats[0] + first : nullptr,
                                          stats[1] ? stats[1] + first : nullptr);
    });
    return Status::ok();
  }
};

template <bool kResidual>
bool supports_layer_norm(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  const size_t p = kResidual ? 2 : 1;
  auto dims = static_dims_of(node.input(0));
  auto scale = static_dims_of(node.input(p));
  if (!dims || dims->empty() || !scale) return false;
  if (kResidual && static_dims_of(node.input(1)) != dims) return false;
  if (node.has_input(p + 1) && !static_dims_of(node.input(p + 1))) return false;
  const AttrReader attrs(node);
  if (attrs.get_int("stash_type") != 1) return false;
  const int64_t rank = static_cast<int64_t>(dims->size());
  int64_t axis = attrs.get_int("axis");
  if (axis < -rank || axis >= rank) return false;
  if (axis < 0) axis += rank;
  const int64_t d = numel_of(std::vector<int64_t>(dims->begin() + axis, dims->end()));
  // Scale and B laid out exactly like X[axis:] (numel d); broadcast params are declined.
  if (d == 0 || numel_of(*scale) != d) return false;
  if (node.has_input(p + 1) && numel_of(*static_dims_of(node.input(p + 1))) != d) return false;
  for (size_t i = 0; i < node.outputs().size(); ++i) {
    if (node.output(i) != nullptr && !static_dims_of(node.output(i))) return false;
  }
  return true;
}

template <bool kResidual>
Result<std::unique_ptr<Kernel>> create_layer_norm(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  const size_t p = kResidual ? 2 : 1;
  auto k = std::make_unique<LayerNormKernel>();
  k->residual = kResidual;
  k->dims = *static_dims_of(node.input(0));
  k->scale_dims = *static_dims_of(node.input(p));
  if (node.has_input(p + 1)) k->bias_dims = *static_dims_of(node.input(p + 1));
  const AttrReader attrs(node);
  const int64_t rank = static_cast<int64_t>(k->dims.size());
  int64_t axis = attrs.get_int("axis");
  if (axis < 0) axis += rank;
  k->n = numel_of(std::vector<int64_t>(k->dims.begin() + axis, k->dims.end()));
  k->rows = numel_of(k->dims) / k->n;
  k->stats_dims = k->dims;
  for (int64_t i = axis; i < rank; ++i) k->stats_dims[i] = 1;
  k->eps = attrs.get_float("epsilon");
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace

std::vector<KernelImpl> softmax_kernels() {
  return {
      KernelImpl{"hwy.softmax", "Softmax", supports_softmax, create_softmax<false>},
      KernelImpl{"hwy.log_softmax", "LogSoftmax", supports_softmax, create_softmax<true>},
      KernelImpl{"hwy.layer_norm", "LayerNormalization", supports_layer_norm<false>, create_layer_norm<false>},
      KernelImpl{"hwy.skip_layer_norm", "SkipLayerNormalization", supports_layer_norm<true>,
                 create_layer_norm<true>},
  };
}

}  // namespace opfuse::hwy_cpu
#endif  // HWY_ONCE
