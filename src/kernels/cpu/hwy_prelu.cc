// PRelu in one pass with the slope in registers: y = x < 0 ? slope * x : x.
//
// Face models (MobileFaceNet, ArcFace-style) put a PRelu with one slope per channel after most
// convs, so in the blocked layout the slope is [1, C/16, 1, 1, 16] against [1, C/16, H, W, 16]:
// a 16-float row read again for every pixel. The generic elementwise kernel gathers that row
// into a chunk buffer and runs compare, multiply and select as three passes over it; measured
// on fr_feature (Zen 4, AVX-512, 2 threads) it moved 30-37 GB/s, 0.62 of 3.0 ms per run in 33
// PRelus. Here each output vector is one load, one multiply, one compare-select and one store.
//
// Plan (create): the output index space is collapsed (size-1 dims dropped, neighbours the slope
// treats alike merged) and cut into units the slope is simple over: a row where it is one value
// (plain NCHW: a channel's pixels), a stretch of rows that read the same slope row (blocked:
// a channel block's pixels), or the whole tensor when the slope has X's shape.
#ifndef OPFUSE_KERNELS_CPU_HWY_PRELU_DECLS_
#define OPFUSE_KERNELS_CPU_HWY_PRELU_DECLS_
#include <algorithm>
#include <utility>
#include <vector>

#include "kernels/cpu/collapsed_view.h"
#include "kernels/cpu/hwy_kernels.h"
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/hwy_prelu.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// NaN < 0 is false, so NaN passes through as the reference's select does; -0 stays -0.
template <class D, class V>
HWY_INLINE V PRelu(D d, V x, V s) {
  return hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Mul(x, s), x);
}

// n floats of x into y. period 0: one slope s[0] for all; else the slope row s[0, period)
// repeats along the stretch (period == n: the slope has x's elements).
void PReluStretch(const float* HWY_RESTRICT x, float* y, size_t n, const float* HWY_RESTRICT s, size_t period) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  if (period == 0) {
    const auto vs = hn::Set(d, s[0]);
    size_t i = 0;
    for (; i + lanes <= n; i += lanes) hn::StoreU(PRelu(d, hn::LoadU(d, x + i), vs), d, y + i);
    for (; i < n; ++i) y[i] = x[i] < 0 ? s[0] * x[i] : x[i];
    return;
  }
  for (size_t row = 0; row < n; row += period) {
    const float* xr = x + row;
    float* yr = y + row;
    size_t k = 0;
    for (; k + lanes <= period; k += lanes) hn::StoreU(PRelu(d, hn::LoadU(d, xr + k), hn::LoadU(d, s + k)), d, yr + k);
    for (; k < period; ++k) yr[k] = xr[k] < 0 ? s[k] * xr[k] : xr[k];
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace opfuse::hwy_cpu {
HWY_EXPORT(PReluStretch);

namespace {

// A unit of work longer than this is cut (at whole slope rows) so both threads get some.
constexpr int64_t kMaxPiece = 16384;

struct PReluPlan {
  std::vector<int64_t> dims;     // collapsed output dims
  std::vector<int64_t> strides;  // the slope's stride per collapsed dim (0: broadcast)
  int64_t numel = 1;
  int64_t unit = 1;    // floats per unit (a multiple of period when period > 0)
  int64_t period = 0;  // the slope row's length within a unit; 0: one slope value per unit
  int64_t piece = 1;   // floats per parallel piece: unit, or a cut of it
};

PReluPlan make_plan(const std::vector<int64_t>& x, const std::vector<int64_t>& slope) {
  const size_t rank = x.size();
  std::vector<int64_t> padded(rank, 1), stride(rank, 0);
  std::copy(slope.begin(), slope.end(), padded.begin() + static_cast<std::ptrdiff_t>(rank - slope.size()));
  for (int64_t a = static_cast<int64_t>(rank) - 1, s = 1; a >= 0; --a) {
    stride[a] = padded[a] == 1 ? 0 : s;
    s *= padded[a];
  }
  // The slope as a view over X's dims: neighbours merge where it broadcasts over both or over
  // neither (its dims are contiguous), never across the two.
  CollapsedView v = collapse_view(x, stride);
  PReluPlan p;
  p.dims = std::move(v.dims);
  p.strides = std::move(v.strides);
  p.numel = v.numel;
  const size_t r = p.dims.size();
  const int64_t inner = p.dims[r - 1];
  if (p.strides[r - 1] == 0) {
    p.unit = inner;  // a row of one slope value
  } else {
    p.period = inner;  // the slope row; the rows before it (if any) repeat it
    p.unit = r >= 2 ? inner * p.dims[r - 2] : inner;
  }
  p.piece = p.unit;
  if (p.unit > kMaxPiece) {
    const int64_t step = std::max<int64_t>(p.period, 1);
    p.piece = std::max<int64_t>(step, kMaxPiece / step * step);
  }
  return p;
}

// The slope's element for the unit starting at flat output position `flat`.
int64_t slope_offset(const PReluPlan& p, int64_t flat) {
  int64_t off = 0;
  for (size_t k = p.dims.size(); k-- > 0;) {
    off += (flat % p.dims[k]) * p.strides[k];
    flat /= p.dims[k];
  }
  return off;
}

class PReluKernel final : public Kernel {
 public:
  PReluKernel(std::vector<int64_t> x, std::vector<int64_t> slope)
      : x_(std::move(x)), slope_(std::move(slope)), plan_(make_plan(x_, slope_)) {}

  std::string_view name() const override { return "hwy.prelu"; }
  int in_place_input() const override { return 0; }  // each element is read before it is written

  Status run(std::span<const Tensor* const> inputs, std::span<Tensor* const> outputs) const override {
    if (inputs.size() < 2 || inputs[0] == nullptr || inputs[1] == nullptr || inputs[0]->dims() != x_ ||
        inputs[1]->dims() != slope_ || outputs.empty() || outputs[0] == nullptr || outputs[0]->dims() != x_) {
      return Status::internal_error("hwy.prelu: the tensors differ from the plan");
    }
    const float* x = inputs[0]->data<float>();
    const float* s = inputs[1]->data<float>();
    float* y = outputs[0]->data<float>();
    const PReluPlan& p = plan_;
    if (p.numel == 0) return Status::ok();
    const int64_t pieces_per_unit = (p.unit + p.piece - 1) / p.piece;
    const int64_t pieces = p.numel / p.unit * pieces_per_unit;
#pragma omp parallel for schedule(static) if (p.numel > kParallelThreshold)
    for (int64_t i = 0; i < pieces; ++i) {
      const int64_t unit_start = i / pieces_per_unit * p.unit;
      const int64_t within = i % pieces_per_unit * p.piece;
      const int64_t n = std::min(p.piece, p.unit - within);
      const int64_t start = unit_start + within;
      HWY_DYNAMIC_DISPATCH(PReluStretch)(x + start, y + start, static_cast<size_t>(n),
                                         s + slope_offset(p, unit_start) + (p.period == p.unit ? within : 0),
                                         static_cast<size_t>(p.period == p.unit ? n : p.period));
    }
    return Status::ok();
  }

 private:
  std::vector<int64_t> x_, slope_;
  PReluPlan plan_;
};

bool supports(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  const auto x = static_dims_of(node.input(0));
  const auto slope = static_dims_of(node.input(1));
  const auto y = static_dims_of(node.output(0));
  if (!x || !slope || !y || *x != *y || slope->size() > x->size()) return false;
  // Unidirectional broadcast, as shape inference checked: each slope dim is 1 or X's.
  const size_t lead = x->size() - slope->size();
  for (size_t a = 0; a < slope->size(); ++a) {
    if ((*slope)[a] != 1 && (*slope)[a] != (*x)[lead + a]) return false;
  }
  return true;
}

Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  return std::unique_ptr<Kernel>(
      std::make_unique<PReluKernel>(*static_dims_of(node.input(0)), *static_dims_of(node.input(1))));
}

}  // namespace

KernelImpl prelu_kernel() { return KernelImpl{"hwy.prelu", "PRelu", supports, create}; }

}  // namespace opfuse::hwy_cpu
#endif  // HWY_ONCE
