// ReduceSum / ReduceMean / ReduceMax / ReduceMin over one contiguous block of axes. The input is
// viewed as [outer, count, inner] (count: the reduced dims; size-1 dims ignored):
//   inner == 1: each output is a reduction of a contiguous row (vector accumulators, lanes
//               combined at the end);
//   inner > 1:  outputs are vectors along inner, accumulated over the count slices.
// Axis sets that are not one block (e.g. {0, 2} of [A,B,C] with B > 1) are declined.
// Max/Min propagate NaN exactly like the reference (once NaN, the accumulator stays NaN).
// GlobalAveragePool and whole-axis AveragePool are ReduceMeans too (mean_pool_plan).
#ifndef OPFUSE_KERNELS_CPU_HWY_REDUCE_DECLS_
#define OPFUSE_KERNELS_CPU_HWY_REDUCE_DECLS_
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/hwy_kernels.h"
#include "ops/nn_common.h"
#include "ops/op_def.h"

namespace opfuse::hwy_cpu {
enum class RKind : int { kSum, kMean, kMax, kMin };
}
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/hwy_reduce.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

template <RKind K>
HWY_INLINE VF Combine(VF acc, VF v) {
  if constexpr (K == RKind::kMax) {
    return hn::IfThenElse(hn::Or(hn::Gt(v, acc), hn::IsNaN(v)), v, acc);
  } else if constexpr (K == RKind::kMin) {
    return hn::IfThenElse(hn::Or(hn::Lt(v, acc), hn::IsNaN(v)), v, acc);
  } else {
    return hn::Add(acc, v);
  }
}
template <RKind K>
HWY_INLINE float CombineScalar(float acc, float v) {
  if constexpr (K == RKind::kMax) return (v > acc || std::isnan(v)) ? v : acc;
  if constexpr (K == RKind::kMin) return (v < acc || std::isnan(v)) ? v : acc;
  return acc + v;
}
template <RKind K>
constexpr float Identity() {
  if constexpr (K == RKind::kMax) return -std::numeric_limits<float>::infinity();
  if constexpr (K == RKind::kMin) return std::numeric_limits<float>::infinity();
  return 0.0f;
}

template <RKind K>
void RowsT(const float* x, float* y, size_t rows, size_t n) {
  const DF d;
  const size_t N = hn::Lanes(d);
  alignas(64) float lanes[64];
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    const VF id = hn::Set(d, Identity<K>());
    VF a0 = id, a1 = id, a2 = id, a3 = id;
    size_t i = 0;
    for (; i + 4 * N <= n; i += 4 * N) {
      a0 = Combine<K>(a0, hn::LoadU(d, xr + i));
      a1 = Combine<K>(a1, hn::LoadU(d, xr + i + N));
      a2 = Combine<K>(a2, hn::LoadU(d, xr + i + 2 * N));
      a3 = Combine<K>(a3, hn::LoadU(d, xr + i + 3 * N));
    }
    for (; i + N <= n; i += N) a0 = Combine<K>(a0, hn::LoadU(d, xr + i));
    hn::Store(Combine<K>(Combine<K>(a0, a1), Combine<K>(a2, a3)), d, lanes);
    if constexpr (K == RKind::kSum || K == RKind::kMean) {
      double acc = 0;
      for (size_t l = 0; l < N; ++l) acc += lanes[l];
      for (; i < n; ++i) acc += xr[i];
      if (K == RKind::kMean) acc /= static_cast<double>(n);
      y[r] = static_cast<float>(acc);
    } else {
      float acc = Identity<K>();
      for (size_t l = 0; l < N; ++l) acc = CombineScalar<K>(acc, lanes[l]);
      for (; i < n; ++i) acc = CombineScalar<K>(acc, xr[i]);
      y[r] = acc;
    }
  }
}

template <RKind K>
void ColsT(const float* x, float* y, size_t count, size_t inner, size_t stride) {
  const DF d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  const float scale = 1.0f / static_cast<float>(count);
  for (; i + N <= inner; i += N) {
    // Four accumulators over j: one would wait on its own latency at every slice (a global
    // average pool over nChw16c is one vector wide and thousands of slices deep).
    const VF id = hn::Set(d, Identity<K>());
    VF a0 = id, a1 = id, a2 = id, a3 = id;
    size_t j = 0;
    for (; j + 4 <= count; j += 4) {
      a0 = Combine<K>(a0, hn::LoadU(d, x + j * stride + i));
      a1 = Combine<K>(a1, hn::LoadU(d, x + (j + 1) * stride + i));
      a2 = Combine<K>(a2, hn::LoadU(d, x + (j + 2) * stride + i));
      a3 = Combine<K>(a3, hn::LoadU(d, x + (j + 3) * stride + i));
    }
    for (; j < count; ++j) a0 = Combine<K>(a0, hn::LoadU(d, x + j * stride + i));
    VF acc = Combine<K>(Combine<K>(a0, a1), Combine<K>(a2, a3));
    if (K == RKind::kMean) acc = hn::Mul(acc, hn::Set(d, scale));
    hn::StoreU(acc, d, y + i);
  }
  for (; i < inner; ++i) {
    float acc = Identity<K>();
    for (size_t j = 0; j < count; ++j) acc = CombineScalar<K>(acc, x[j * stride + i]);
    if (K == RKind::kMean) acc *= scale;
    y[i] = acc;
  }
}

void ReduceRows(int kind, const float* x, float* y, size_t rows, size_t n) {
  switch (static_cast<RKind>(kind)) {
    case RKind::kSum: return RowsT<RKind::kSum>(x, y, rows, n);
    case RKind::kMean: return RowsT<RKind::kMean>(x, y, rows, n);
    case RKind::kMax: return RowsT<RKind::kMax>(x, y, rows, n);
    case RKind::kMin: return RowsT<RKind::kMin>(x, y, rows, n);
  }
}

// y[i] = combine over j of x[j * stride + i], for i < width.
void ReduceCols(int kind, const float* x, float* y, size_t count, size_t width, size_t stride) {
  switch (static_cast<RKind>(kind)) {
    case RKind::kSum: return ColsT<RKind::kSum>(x, y, count, width, stride);
    case RKind::kMean: return ColsT<RKind::kMean>(x, y, count, width, stride);
    case RKind::kMax: return ColsT<RKind::kMax>(x, y, count, width, stride);
    case RKind::kMin: return ColsT<RKind::kMin>(x, y, count, width, stride);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace opfuse::hwy_cpu {
HWY_EXPORT(ReduceRows);
HWY_EXPORT(ReduceCols);

namespace {

struct ReducePlan {
  int64_t outer = 1, count = 1, inner = 1;
};

class ReduceKernel final : public Kernel {
 public:
  RKind kind = RKind::kSum;
  ReducePlan plan;
  std::vector<int64_t> in_dims, out_dims;
  std::string_view name() const override { return "hwy.reduce"; }
  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    if (in[0] == nullptr || in[0]->dims() != in_dims || out[0] == nullptr || out[0]->dims() != out_dims) {
      return Status::internal_error("hwy.reduce: a tensor does not have its planned shape");
    }
    const float* x = in[0]->data<float>();
    float* y = out[0]->data<float>();
    const ReducePlan p = plan;
    const int k = static_cast<int>(kind);
    const bool parallel = p.outer * p.count * p.inner > kParallelThreshold;
    if (p.inner == 1) {
      const int64_t block = std::max<int64_t>(1, 16384 / std::max<int64_t>(p.count, 1));
      const int64_t blocks = (p.outer + block - 1) / block;
#pragma omp parallel for schedule(dynamic, 1) if (parallel && blocks > 1)
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t first = b * block;
        HWY_DYNAMIC_DISPATCH(ReduceRows)(k, x + first * p.count, y + first,
                                         std::min(block, p.outer - first), p.count);
      }
    } else {
      // Column blocks of the inner dim keep the accumulators in registers and spread work even
      // when outer is 1. A static split gives each thread a contiguous share of the channel
      // groups, the share the conv before it wrote from the same core, so it reads them from its
      // own L2: efficientnet_b0's 17 squeeze-excitation pools over nChw16c took 117 us per run
      // against 263 with (dynamic, 1), which interleaved the groups between the threads, and 174
      // with oneDNN's pooling (Zen 5, 2 threads, `opfuse profile --level O3`, 60 runs).
      const int64_t cols = 256;
      const int64_t col_blocks = (p.inner + cols - 1) / cols;
#pragma omp parallel for collapse(2) schedule(static) if (parallel)
      for (int64_t o = 0; o < p.outer; ++o) {
        for (int64_t cb = 0; cb < col_blocks; ++cb) {
          const int64_t c0 = cb * cols;
          HWY_DYNAMIC_DISPATCH(ReduceCols)(k, x + o * p.count * p.inner + c0, y + o * p.inner + c0,
                                           p.count, std::min(cols, p.inner - c0), p.inner);
        }
      }
    }
    return Status::ok();
  }
};

// The reduced axes as the node asks for them, or nullopt when unknown / not plain.
std::optional<std::vector<bool>> reduced_axes(const KernelCompileContext& ctx, int64_t rank) {
  const Node& node = ctx.node;
  const AttrReader attrs(node);
  std::vector<int64_t> axes;
  if (node.op_type() == "ReduceSum") {
    if (node.has_input(1)) {
      const Tensor* c = ctx.constants.size() > 1 ? ctx.constants[1] : nullptr;
      if (c == nullptr) return std::nullopt;
      axes = c->to_int_vector();
    }
    if (axes.empty() && attrs.get_int("noop_with_empty_axes") != 0) return std::nullopt;
  } else if (attrs.has("axes")) {
    axes = attrs.get_ints("axes");
  }
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    if (a < 0) a += rank;
    if (reduced[a] && !axes.empty()) return std::nullopt;  // repeated: the reference reports it
    reduced[a] = true;
  }
  return reduced;
}

// Outer kept dims, then the reduced block, then inner kept dims; size-1 dims fit anywhere.
std::optional<ReducePlan> plan_over(const std::vector<int64_t>& dims, const std::vector<bool>& reduced) {
  ReducePlan p;
  int stage = 0;  // 0: outer, 1: reduced, 2: inner
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t n = dims[i];
    if (n == 1) continue;
    if (reduced[i]) {
      if (stage == 2) return std::nullopt;
      stage = 1;
      p.count *= n;
    } else {
      if (stage == 1) stage = 2;
      (stage == 0 ? p.outer : p.inner) *= n;
    }
  }
  if (p.count == 0 || p.outer * p.inner == 0) return std::nullopt;  // empty: the reference
  return p;
}

std::optional<ReducePlan> plan_for(const KernelCompileContext& ctx) {
  auto dims = static_dims_of(ctx.node.input(0));
  if (!dims || !static_dims_of(ctx.node.output(0))) return std::nullopt;
  auto reduced = reduced_axes(ctx, static_cast<int64_t>(dims->size()));
  if (!reduced) return std::nullopt;
  return plan_over(*dims, *reduced);
}

// GlobalAveragePool, and an AveragePool whose windows are whole axes or single elements (what
// O3 makes of GlobalAveragePool on a blocked tensor: AveragePool [H, W, 1] over
// [N, Cb, H, W, 16]), is a mean over one block of axes: the ReduceMean plan. Cheaper than
// oneDNN's pooling on the small tensors of squeeze-excitation blocks, where a call's fixed cost
// dominates (efficientnet_b0 runs 17 of them).
std::optional<ReducePlan> mean_pool_plan(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  auto x = static_dims_of(node.input(0));
  auto y = static_dims_of(node.output(0));
  if (!x || !y || x->size() < 3 || y->size() != x->size() || (*y)[0] != (*x)[0] || (*y)[1] != (*x)[1]) {
    return std::nullopt;
  }
  const size_t spatial = x->size() - 2;
  std::vector<bool> reduced(x->size(), false);
  if (node.op_type() == "GlobalAveragePool") {
    std::fill(reduced.begin() + 2, reduced.end(), true);
  } else {
    const AttrReader attrs(node);
    auto wa = read_window_attrs(attrs, spatial, std::nullopt, true, node.describe());
    if (!wa.is_ok()) return std::nullopt;
    for (size_t i = 0; i < spatial; ++i) {
      const int64_t in = (*x)[2 + i];
      auto dim = window_dim(*wa, i, in, attrs.get_int("ceil_mode") != 0, node.describe());
      if (!dim.is_ok() || dim->out != (*y)[2 + i] || dim->pad_begin != 0 || dim->pad_end != 0 ||
          wa->dilations[i] != 1) {
        return std::nullopt;
      }
      if (wa->kernel[i] == in && dim->out == 1) {
        reduced[2 + i] = true;
      } else if (wa->kernel[i] != 1 || wa->strides[i] != 1 || dim->out != in) {
        return std::nullopt;
      }
    }
  }
  return plan_over(*x, reduced);
}

bool supports(const KernelCompileContext& ctx) { return plan_for(ctx).has_value(); }
bool supports_mean_pool(const KernelCompileContext& ctx) { return mean_pool_plan(ctx).has_value(); }

template <RKind K>
Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
  auto k = std::make_unique<ReduceKernel>();
  k->kind = K;
  k->plan = *plan_for(ctx);
  k->in_dims = *static_dims_of(ctx.node.input(0));
  k->out_dims = *static_dims_of(ctx.node.output(0));
  return std::unique_ptr<Kernel>(std::move(k));
}

Result<std::unique_ptr<Kernel>> create_mean_pool(const KernelCompileContext& ctx) {
  auto k = std::make_unique<ReduceKernel>();
  k->kind = RKind::kMean;
  k->plan = *mean_pool_plan(ctx);
  k->in_dims = *static_dims_of(ctx.node.input(0));
  k->out_dims = *static_dims_of(ctx.node.output(0));
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace

KernelImpl global_average_pool_kernel() {
  return {"hwy.reduce", "GlobalAveragePool", supports_mean_pool, create_mean_pool};
}
KernelImpl whole_axis_average_pool_kernel() {
  return {"hwy.reduce", "AveragePool", supports_mean_pool, create_mean_pool};
}

std::vector<KernelImpl> reduce_kernels() {
  return {
      KernelImpl{"hwy.reduce", "ReduceSum", supports, create<RKind::kSum>},
      KernelImpl{"hwy.reduce", "ReduceMean", supports, create<RKind::kMean>},
      KernelImpl{"hwy.reduce", "ReduceMax", supports, create<RKind::kMax>},
      KernelImpl{"hwy.reduce", "ReduceMin", supports, create<RKind::kMin>},
  };
}

}  // namespace opfuse::hwy_cpu
#endif  // HWY_ONCE
