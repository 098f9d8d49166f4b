// opfuse::FusedAttention on the CPU: streaming (online-softmax) attention. Work is split over
// (batch, head, query block) tasks on OpenMP threads. A task walks the keys in blocks: the
// scores of one [query block x key block] tile are computed into a per-thread scratch buffer
// (dnnl_sgemm, alpha = scale, operands read in place through their leading dimensions, so the
// head split/merge is strides, never a transpose), the mask row is added, and the running row
// max / row sum are updated (exp from hwy_math-inl.h); the accumulated P*V of earlier blocks is
// rescaled by exp(old max - new max) and the tile's P*V added. The output block is divided by the
// row sums and written through the output's strides. The full score matrix never exists.
// A row whose every score is -inf gets sum 0 and so NaN, as the unfused Softmax gives.
// Measured against a Highway register-blocked tile GEMM (4 rows x 2 vectors, broadcast-FMA, K^T
// packed per key block) on BERT-base's attention (S 128, 12 heads, D 64, one layer, 2 threads):
// dnnl_sgemm ~1.05 ms median vs ~1.3 ms, so the tiles go to oneDNN (the unfused chain: ~1.8 ms).
#ifndef OPFUSE_KERNELS_CPU_ATTENTION_KERNEL_DECLS_
#define OPFUSE_KERNELS_CPU_ATTENTION_KERNEL_DECLS_
#include <algorithm>
#include <cmath>
#include <limits>

#include <oneapi/dnnl/dnnl.h>

#include "kernels/cpu/hwy_kernels.h"
#include "ops/fused.h"
#include "ops/fused_attention.h"
#include "ops/op_def.h"
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/attention_kernel.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/hwy_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// One tile row update: s[j] += mask[j * mask_stride] (mask may be null), then the online softmax
// step: the new max, p = exp(s - max) in place, and the running sum; returns the factor the
// previous accumulators must be multiplied by.
float OnlineSoftmaxRow(float* s, size_t n, const float* mask, int64_t mask_stride, float* row_max,
                       float* row_sum) {
  const DF d;
  const size_t N = hn::Lanes(d);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  size_t i = 0;
  VF vmax = hn::Set(d, -kInf);
  auto nan = hn::Lt(vmax, vmax);  // all false
  if (mask != nullptr && mask_stride == 1) {
    for (; i + N <= n; i += N) {
      const VF v = hn::Add(hn::LoadU(d, s + i), hn::LoadU(d, mask + i));
      hn::StoreU(v, d, s + i);
      nan = hn::Or(nan, hn::IsNaN(v));
      vmax = hn::Max(vmax, v);
    }
  } else if (mask != nullptr && mask_stride == 0) {
    const VF vm = hn::Set(d, mask[0]);
    for (; i + N <= n; i += N) {
      const VF v = hn::Add(hn::LoadU(d, s + i), vm);
      hn::StoreU(v, d, s + i);
      nan = hn::Or(nan, hn::IsNaN(v));
      vmax = hn::Max(vmax, v);
    }
  } else if (mask == nullptr) {
    for (; i + N <= n; i += N) {
      const VF v = hn::LoadU(d, s + i);
      nan = hn::Or(nan, hn::IsNaN(v));
      vmax = hn::Max(vmax, v);
    }
  }
  float m = hn::GetLane(hn::MaxOfLanes(d, vmax));
  bool has_nan = !hn::AllFalse(d, nan);
  for (; i < n; ++i) {
    if (mask != nullptr) s[i] += mask[static_cast<int64_t>(i) * mask_stride];
    has_nan |= std::isnan(s[i]);
    m = std::max(m, s[i]);
  }
  const float old_max = *row_max;
  float new_max = has_nan || std::isnan(old_max) ? std::numeric_limits<float>::quiet_NaN() : std::max(old_max, m);
  // All -inf so far: shift by 0 so exp(-inf) = 0 instead of exp(-inf - -inf) = NaN.
  const float shift = new_max == -kInf ? 0.0f : new_max;
  const VF vs = hn::Set(d, shift);
  VF s0 = hn::Zero(d), s1 = hn::Zero(d);
  i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const VF e0 = SoftmaxExp(d, hn::Sub(hn::LoadU(d, s + i), vs));
    const VF e1 = SoftmaxExp(d, hn::Sub(hn::LoadU(d, s + i + N), vs));
    hn::StoreU(e0, d, s + i);
    hn::StoreU(e1, d, s + i + N);
    s0 = hn::Add(s0, e0);
    s1 = hn::Add(s1, e1);
  }
  for (; i + N <= n; i += N) {
    const VF e = SoftmaxExp(d, hn::Sub(hn::LoadU(d, s + i), vs));
    hn::StoreU(e, d, s + i);
    s0 = hn::Add(s0, e);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
  for (; i < n; ++i) sum += s[i] = std::exp(s[i] - shift);
  const float correction = std::exp(old_max - shift);  // exp(-inf) = 0 on the first block
  *row_sum = *row_sum * correction + sum;
  *row_max = new_max;
  return correction;
}

// y[c] = x[c] * f, or y[c * stride] when the output is strided.
void ScaleRow(const float* x, float* y, size_t n, int64_t stride, float f) {
  const DF d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  if (stride == 1) {
    const VF vf = hn::Set(d, f);
    for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), vf), d, y + i);
  }
  for (; i < n; ++i) y[static_cast<int64_t>(i) * stride] = x[i] * f;
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace opfuse {
namespace hwy_cpu {
HWY_EXPORT(OnlineSoftmaxRow);
HWY_EXPORT(ScaleRow);
}  // namespace hwy_cpu

namespace {

constexpr int64_t kQueryBlock = 64;
constexpr int64_t kKeyBlock = 512;

// A [rows x cols] matrix with element (r, c) at r * row_stride + c * col_stride, as a row-major
// GEMM operand: trans 'N' with ld = row_stride when columns are contiguous, 'T' with
// ld = col_stride when rows are; `packed` (else) copies it into scratch.
struct MatrixView {
  const float* data;
  int64_t rows, cols, row_stride, col_stride;
};

struct GemmOperand {
  char trans;
  const float* data;
  int64_t ld;
};

GemmOperand as_operand(const MatrixView& m, std::vector<float>& scratch) {
  if (m.col_stride == 1 || m.cols == 1) return {'N', m.data, std::max<int64_t>(m.row_stride, m.cols)};
  if (m.row_stride == 1 || m.rows == 1) return {'T', m.data, std::max<int64_t>(m.col_stride, m.rows)};
  scratch.resize(static_cast<size_t>(m.rows * m.cols));
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c) scratch[r * m.cols + c] = m.data[r * m.row_stride + c * m.col_stride];
  }
  return {'N', scratch.data(), m.cols};
}

// C[M x N] = alpha * A[M x K] B[K x N] + beta * C (row-major C with ldc).
Status gemm(const MatrixView& a, const MatrixView& b, float alpha, float beta, float* c, int64_t ldc,
            std::vector<float>& scratch_a, std::vector<float>& scratch_b) {
  const GemmOperand ga = as_operand(a, scratch_a);
  const GemmOperand gb = as_operand(b, scratch_b);
  const dnnl_status_t st = dnnl_sgemm(ga.trans, gb.trans, a.rows, b.cols, a.cols, alpha, ga.data, ga.ld, gb.data,
                                      gb.ld, beta, c, ldc);
  if (st != dnnl_success) return Status::internal_error(str_cat("attention: dnnl_sgemm failed (", int(st), ")"));
  return Status::ok();
}

// Per-thread scratch: the score tile, the P*V accumulator, the row statistics, packing buffers.
struct Scratch {
  std::vector<float> scores, acc, row_max, row_sum, correction, pack_a, pack_b;
};

class AttentionKernel final : public Kernel {
 public:
  AttentionKernel(AttentionAttrs attrs, std::vector<std::vector<int64_t>> dims, AttentionGeometry g)
      : attrs_(std::move(attrs)), dims_(std::move(dims)), g_(std::move(g)) {}
  std::string_view name() const override { return "cpu.attention"; }

  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    for (size_t i = 0; i < dims_.size(); ++i) {
      if (in[i] == nullptr || in[i]->dtype() != DType::kF32 || in[i]->dims() != dims_[i]) {
        return Status::internal_error("cpu.attention: an input does not have its planned shape");
      }
    }
    if (out[0]->dtype() != DType::kF32 || out[0]->dims() != g_.out_dims) {
      return Status::internal_error("cpu.attention: the output does not have its planned shape");
    }
    const AttentionDims& d = g_.dims;
    const int64_t q_blocks = (d.q_len + kQueryBlock - 1) / kQueryBlock;
    const int64_t tasks = d.batch * d.heads * q_blocks;
    const float* q = in[0]->data<float>();
    const float* k = in[1]->data<float>();
    const float* v = in[2]->data<float>();
    const float* mask = dims_.size() > 3 ? in[3]->data<float>() : nullptr;
    float* y = out[0]->data<float>();
    const int64_t work = tasks * kQueryBlock * d.kv_len * (d.head_dim + d.v_head_dim);
    bool failed = false;
#pragma omp parallel if (tasks > 1 && work > hwy_cpu::kParallelThreshold)
    {
      Scratch s;
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < tasks; ++t) {
        if (!run_task(t, q_blocks, q, k, v, mask, y, s).is_ok()) {
#pragma omp atomic write
          failed = true;
        }
      }
    }
    return failed ? Status::internal_error("cpu.attention: a GEMM failed") : Status::ok();
  }

 private:
  Status run_task(int64_t task, int64_t q_blocks, const float* q, const float* k, const float* v,
                  const float* mask, float* y, Scratch& s) const {
    const AttentionDims& d = g_.dims;
    const int64_t qb = task % q_blocks, bh = task / q_blocks;
    const int64_t h = bh % d.heads, b = bh / d.heads;
    const int64_t i0 = qb * kQueryBlock, rows = std::min(kQueryBlock, d.q_len - i0);
    const int64_t kb_len = std::min(kKeyBlock, d.kv_len);
    const int64_t dv = d.v_head_dim;
    s.scores.resize(static_cast<size_t>(rows * kb_len));
    s.acc.assign(static_cast<size_t>(rows * dv), 0.0f);
    s.row_max.assign(rows, -std::numeric_limits<float>::infinity());
    s.row_sum.assign(rows, 0.0f);
    s.correction.resize(rows);
    const MatrixView qv{q + b * g_.q.b + h * g_.q.h + i0 * g_.q.s, rows, d.head_dim, g_.q.s, g_.q.d};
    const float* mask_bh = mask ? mask + b * g_.mask[0] + h * g_.mask[1] : nullptr;
    for (int64_t j0 = 0; j0 < d.kv_len; j0 += kb_len) {
      const int64_t cols = std::min(kb_len, d.kv_len - j0);
      // K^T block [D x cols]: element (c, j) of K^T is K(j, c).
      const MatrixView kt{k + b * g_.k.b + h * g_.k.h + j0 * g_.k.s, d.head_dim, cols, g_.k.d, g_.k.s};
      OPFUSE_TRY(gemm(qv, kt, g_.scale, 0.0f, s.scores.data(), cols, s.pack_a, s.pack_b));
      for (int64_t r = 0; r < rows; ++r) {
        const float* mrow = mask_bh ? mask_bh + (i0 + r) * g_.mask[2] + j0 * g_.mask[3] : nullptr;
        s.correction[r] = HWY_DYNAMIC_DISPATCH(hwy_cpu::OnlineSoftmaxRow)(
            s.scores.data() + r * cols, cols, mrow, g_.mask[3], &s.row_max[r], &s.row_sum[r]);
      }
      if (j0 > 0) {
        for (int64_t r = 0; r < rows; ++r) {
          float* arow = s.acc.data() + r * dv;
          HWY_DYNAMIC_DISPATCH(hwy_cpu::ScaleRow)(arow, arow, dv, 1, s.correction[r]);
        }
      }
      const MatrixView pv{s.scores.data(), rows, cols, cols, 1};
      const MatrixView vv{v + b * g_.v.b + h * g_.v.h + j0 * g_.v.s, cols, dv, g_.v.s, g_.v.d};
      OPFUSE_TRY(gemm(pv, vv, 1.0f, j0 > 0 ? 1.0f : 0.0f, s.acc.data(), dv, s.pack_a, s.pack_b));
    }
    float* out = y + b * g_.out.b + h * g_.out.h + i0 * g_.out.s;
    for (int64_t r = 0; r < rows; ++r) {
      HWY_DYNAMIC_DISPATCH(hwy_cpu::ScaleRow)(s.acc.data() + r * dv, out + r * g_.out.s, dv, g_.out.d,
                                              1.0f / s.row_sum[r]);
    }
    return Status::ok();
  }

  AttentionAttrs attrs_;
  std::vector<std::vector<int64_t>> dims_;  // the inputs' planned dims
  AttentionGeometry g_;
};

std::optional<std::pair<std::vector<std::vector<int64_t>>, AttentionGeometry>> plan(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  std::vector<std::vector<int64_t>> dims;
  for (size_t i = 0; i < node.inputs().size(); ++i) {
    if (node.input(i) == nullptr) return std::nullopt;
    auto di = hwy_cpu::static_dims_of(node.input(i));
    if (!di) return std::nullopt;
    dims.push_back(*di);
  }
  if (dims.size() < 3 || !hwy_cpu::static_dims_of(node.output(0))) return std::nullopt;
  auto g = attention_geometry(read_attention_attrs(AttrReader(node)), dims[0], dims[1], dims[2],
                              dims.size() > 3 ? &dims[3] : nullptr);
  if (!g.is_ok() || g->out_dims != *hwy_cpu::static_dims_of(node.output(0))) return std::nullopt;
  if (g->dims.kv_len == 0 || g->dims.head_dim == 0) return std::nullopt;  // degenerate: the reference
  return std::make_pair(std::move(dims), std::move(*g));
}

bool supports(const KernelCompileContext& ctx) { return ctx.node.domain() == kFusedDomain && plan(ctx).has_value(); }

Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
  auto p = plan(ctx);
  if (!p) return Status::internal_error("cpu.attention: create without support");
  return std::unique_ptr<Kernel>(
      std::make_unique<AttentionKernel>(read_attention_attrs(AttrReader(ctx.node)), std::move(p->first), std::move(p->second)));
}

}  // namespace

KernelImpl fused_attention_kernel_impl() { return KernelImpl{"cpu.attention", "FusedAttention", supports, create}; }

}  // namespace opfuse
#endif  // HWY_ONCE
