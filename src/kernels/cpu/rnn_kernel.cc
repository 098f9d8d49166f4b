// "cpu.rnn": LSTM / GRU / RNN in f32 with constant W, R (and B, P), activations among Sigmoid,
// Tanh and Relu (the defaults, and nn.RNN's relu), any direction, layout, sequence_lens, clip,
// peepholes, input_forget, linear_before_reset. Everything else runs the reference kernel
// (ops/rnn.cc), which is the oracle this kernel is tested against.
//
// Why it is fast where the reference is not:
//  - the input projections X_t W^T of every step are one GEMM per direction
//    ([seq*batch, input] x [input, gates*hidden], oneDNN's sgemm) before the recurrence,
//    instead of a matrix-vector product per step;
//  - R is packed once per session (kernels/packed_weight_cache.h: plans for other sequence
//    lengths share it, as W, B and P, and the graph lets its copies go) into panels of four
//    vectors' width x hidden rows, so the per-step product H_{t-1} R^T streams each panel with
//    aligned loads into register accumulators (one batch row: two banks over even/odd k, so the
//    FMA chains overlap);
//  - the gate math runs on whole vectors with hwy_math-inl.h's Sigmoid and SafeTanh (NaN kept);
//  - a large bidirectional node runs its two directions (projection and recurrence) on two
//    threads.
// Every gate block is padded to a whole number of vectors (Hp >= hidden): W and R get zero rows
// there, so the padded lanes hold values nobody reads (the products read h[0, hidden) only and the
// outputs copy hidden values), and no gate loop needs a scalar tail.
#ifndef OPFUSE_KERNELS_CPU_RNN_KERNEL_DECLS_
#define OPFUSE_KERNELS_CPU_RNN_KERNEL_DECLS_
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <oneapi/dnnl/dnnl.h>
#include <vector>

#include "hwy/aligned_allocator.h"
#include "kernels/cpu/packed_floats.h"
#include "kernels/cpu/rnn_kernel.h"
#include "kernels/target_caps.h"
#include "ops/rnn.h"

namespace opfuse::hwy_cpu {

enum class RnnVectorActivation : uint8_t { kSigmoid, kTanh, kRelu };

// What the gate functions of one direction read besides the step's rows. Gate blocks are Hp
// floats apart in every buffer (LSTM i, o, f, c; GRU z, r, h; RNN one block).
struct RnnGateParams {
  size_t hidden = 0;              // Hp: the padded hidden size, a whole number of vectors
  const float* bias = nullptr;    // gates * Hp: Wb + Rb (GRU linear_before_reset: Wb only for h)
  bool has_clip = false;
  float clip = 0;
  RnnVectorActivation f = RnnVectorActivation::kSigmoid, g = RnnVectorActivation::kTanh,
                      h = RnnVectorActivation::kTanh;
  bool input_forget = false;
  const float* peephole = nullptr;     // LSTM: i, o, f blocks of Hp, or null
  bool linear_before_reset = false;
  const float* reset_bias = nullptr;   // GRU linear_before_reset: Rb_h (Hp), or null
};

}  // namespace opfuse::hwy_cpu
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/rnn_kernel.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/hwy_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

constexpr size_t kLanes = hn::MaxLanes(DF());
constexpr size_t kPanelVectors = 4;

size_t RnnLanes() { return kLanes; }
size_t RnnPanelWidth() { return kPanelVectors * kLanes; }

// ---------------------------------------------------------------- recurrent product

// out[r][col + j] = sum_k h[r][k] * panel[k * width + j] for j < kVecs vectors, rows < kRows.
template <size_t kRows, size_t kVecs>
HWY_INLINE void ProductTile(const float* const* h, float* const* out, size_t row0, const float* HWY_RESTRICT panel,
                            size_t k, size_t col) {
  const DF d;
  constexpr size_t width = kVecs * kLanes;
  VF acc[kRows][kVecs];
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t v = 0; v < kVecs; ++v) acc[r][v] = hn::Zero(d);
  }
  if constexpr (kRows == 1) {
    // One row: a second bank over odd k, so two independent FMA chains per vector of columns.
    VF odd[kVecs];
    for (size_t v = 0; v < kVecs; ++v) odd[v] = hn::Zero(d);
    const float* HWY_RESTRICT x = h[row0];
    size_t i = 0;
    for (; i + 2 <= k; i += 2) {
      const VF x0 = hn::Set(d, x[i]), x1 = hn::Set(d, x[i + 1]);
      for (size_t v = 0; v < kVecs; ++v) {
        acc[0][v] = hn::MulAdd(x0, hn::Load(d, panel + i * width + v * kLanes), acc[0][v]);
        odd[v] = hn::MulAdd(x1, hn::Load(d, panel + (i + 1) * width + v * kLanes), odd[v]);
      }
    }
    if (i < k) {
      const VF x0 = hn::Set(d, x[i]);
      for (size_t v = 0; v < kVecs; ++v) acc[0][v] = hn::MulAdd(x0, hn::Load(d, panel + i * width + v * kLanes), acc[0][v]);
    }
    for (size_t v = 0; v < kVecs; ++v) acc[0][v] = hn::Add(acc[0][v], odd[v]);
  } else {
    for (size_t i = 0; i < k; ++i) {
      VF x[kRows];
      for (size_t r = 0; r < kRows; ++r) x[r] = hn::Set(d, h[row0 + r][i]);
      for (size_t v = 0; v < kVecs; ++v) {
        const VF w = hn::Load(d, panel + i * width + v * kLanes);
        for (size_t r = 0; r < kRows; ++r) acc[r][v] = hn::MulAdd(x[r], w, acc[r][v]);
      }
    }
  }
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t v = 0; v < kVecs; ++v) hn::StoreU(acc[r][v], d, out[row0 + r] + col + v * kLanes);
  }
}

template <size_t kRows>
HWY_INLINE void ProductPanel(const float* const* h, float* const* out, size_t row0, const float* panel, size_t k,
                             size_t col, size_t vecs) {
  switch (vecs) {
    case 1: return ProductTile<kRows, 1>(h, out, row0, panel, k, col);
    case 2: return ProductTile<kRows, 2>(h, out, row0, panel, k, col);
    case 3: return ProductTile<kRows, 3>(h, out, row0, panel, k, col);
    default: return ProductTile<kRows, 4>(h, out, row0, panel, k, col);
  }
}

// out[r][0, cols) = h[r][0, k) x packed, for `rows` rows given by pointer (the active batch
// entries of a step). `packed` holds cols / width panels of k x width floats (the last one
// narrower, a whole number of vectors), 64-byte aligned.
void RecurrentProduct(const float* const* h, float* const* out, size_t rows, const float* packed, size_t k,
                      size_t cols) {
  constexpr size_t width = kPanelVectors * kLanes;
  for (size_t col = 0; col < cols; col += width) {
    const size_t vecs = std::min(width, cols - col) / kLanes;
    const float* panel = packed + col * k;
    size_t r = 0;
    // Two rows share each weight load; more would spill AVX2's 16 registers.
    for (; r + 2 <= rows; r += 2) ProductPanel<2>(h, out, r, panel, k, col, vecs);
    if (r < rows) ProductPanel<1>(h, out, r, panel, k, col, vecs);
  }
}

// ---------------------------------------------------------------- gate math

HWY_INLINE VF Activate(RnnVectorActivation kind, VF x) {
  const DF d;
  switch (kind) {
    case RnnVectorActivation::kSigmoid: return Sigmoid(d, x);
    case RnnVectorActivation::kTanh: return SafeTanh(d, x);
    case RnnVectorActivation::kRelu: break;
  }
  // x < 0 ? 0 : x, so NaN stays NaN (the reference's comparison).
  return hn::IfThenZeroElse(hn::Lt(x, hn::Zero(d)), x);
}

// The reference's clip: bounds to [-clip, clip] by comparisons, which a NaN fails, so it stays.
HWY_INLINE VF Clip(const RnnGateParams& p, VF x) {
  if (!p.has_clip) return x;
  const DF d;
  const VF hi = hn::Set(d, p.clip), lo = hn::Set(d, -p.clip);
  return hn::IfThenElse(hn::Gt(x, hi), hi, hn::IfThenElse(hn::Lt(x, lo), lo, x));
}

// Pre-activation of block `gate` at column j: input projection + bias + recurrent product.
HWY_INLINE VF Pre(const RnnGateParams& p, const float* xp, const float* rec, size_t gate, size_t j) {
  const DF d;
  const size_t at = gate * p.hidden + j;
  return hn::Add(hn::Add(hn::LoadU(d, xp + at), hn::LoadU(d, p.bias + at)), hn::LoadU(d, rec + at));
}

// One LSTM step of one batch entry: c and h updated in place.
void LstmCell(const RnnGateParams& p, const float* xp, const float* rec, float* c, float* h) {
  const DF d;
  const VF one = hn::Set(d, 1.0f);
  for (size_t j = 0; j < p.hidden; j += kLanes) {
    const VF c_prev = hn::LoadU(d, c + j);
    VF pre_i = Pre(p, xp, rec, 0, j), pre_f = Pre(p, xp, rec, 2, j);
    if (p.peephole) {
      pre_i = hn::MulAdd(hn::LoadU(d, p.peephole + j), c_prev, pre_i);
      pre_f = hn::MulAdd(hn::LoadU(d, p.peephole + 2 * p.hidden + j), c_prev, pre_f);
    }
    const VF i = Activate(p.f, Clip(p, pre_i));
    const VF f = p.input_forget ? hn::Sub(one, i) : Activate(p.f, Clip(p, pre_f));
    const VF g = Activate(p.g, Clip(p, Pre(p, xp, rec, 3, j)));
    const VF c_next = hn::MulAdd(f, c_prev, hn::Mul(i, g));
    VF pre_o = Pre(p, xp, rec, 1, j);
    if (p.peephole) pre_o = hn::MulAdd(hn::LoadU(d, p.peephole + p.hidden + j), c_next, pre_o);
    const VF o = Activate(p.f, Clip(p, pre_o));
    hn::StoreU(c_next, d, c + j);
    hn::StoreU(hn::Mul(o, Activate(p.h, c_next)), d, h + j);
  }
}

// GRU, first half: z into `z`; into `reset` r (.) h, the row R_h multiplies next, or with
// linear_before_reset r itself.
void GruGates(const RnnGateParams& p, const float* xp, const float* rec, const float* h, float* z, float* reset) {
  const DF d;
  for (size_t j = 0; j < p.hidden; j += kLanes) {
    hn::StoreU(Activate(p.f, Clip(p, Pre(p, xp, rec, 0, j))), d, z + j);
    const VF r = Activate(p.f, Clip(p, Pre(p, xp, rec, 1, j)));
    hn::StoreU(p.linear_before_reset ? r : hn::Mul(r, hn::LoadU(d, h + j)), d, reset + j);
  }
}

// GRU, second half: rec's h block holds (r (.) h) R_h^T, or with linear_before_reset h R_h^T;
// h updated in place: h = (1 - z) (.) g(...) + z (.) h.
void GruOutput(const RnnGateParams& p, const float* xp, const float* rec, const float* z, const float* reset,
               float* h) {
  const DF d;
  const VF one = hn::Set(d, 1.0f);
  const size_t at = 2 * p.hidden;
  for (size_t j = 0; j < p.hidden; j += kLanes) {
    const VF x_part = hn::Add(hn::LoadU(d, xp + at + j), hn::LoadU(d, p.bias + at + j));
    VF h_part = hn::LoadU(d, rec + at + j);
    if (p.linear_before_reset) {
      if (p.reset_bias) h_part = hn::Add(h_part, hn::LoadU(d, p.reset_bias + j));
      h_part = hn::Mul(hn::LoadU(d, reset + j), h_part);
    }
    const VF candidate = Activate(p.g, Clip(p, hn::Add(x_part, h_part)));
    const VF zj = hn::LoadU(d, z + j);
    const VF h_prev = hn::LoadU(d, h + j);
    hn::StoreU(hn::MulAdd(hn::Sub(one, zj), candidate, hn::Mul(zj, h_prev)), d, h + j);
  }
}

// h = f(x W^T + h R^T + Wb + Rb), in place.
void SimpleRnnCell(const RnnGateParams& p, const float* xp, const float* rec, float* h) {
  const DF d;
  for (size_t j = 0; j < p.hidden; j += kLanes) hn::StoreU(Activate(p.f, Clip(p, Pre(p, xp, rec, 0, j))), d, h + j);
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace opfuse {
namespace hwy_cpu {
HWY_EXPORT(RnnLanes);
HWY_EXPORT(RnnPanelWidth);
HWY_EXPORT(RecurrentProduct);
HWY_EXPORT(LstmCell);
HWY_EXPORT(GruGates);
HWY_EXPORT(GruOutput);
HWY_EXPORT(SimpleRnnCell);
}  // namespace hwy_cpu

namespace {

using hwy_cpu::RnnVectorActivation;
using AlignedFloats = hwy::AlignedFreeUniquePtr<float[]>;

// Below this many multiply-adds (about 2 ms on one core) the input projections, and per
// direction a bidirectional node's two directions, run on the calling thread: a parallel region
// must pay for waking a worker, and on a loaded machine for the worker's wait for a time slice.
// Measured on the shared 2-vCPU VM at load 6 (seq 100, input 64, hidden 128, bidirectional: 10M
// per direction, 6.5M in the projections): 0.58 ms on one thread; two threads for the directions
// 0.60 ms with passive waits and 12-24 ms with spinning ones, and the same 24 ms with only the
// projection GEMM threaded.
constexpr int64_t kParallelProjectionMacs = int64_t{1} << 24;
constexpr int64_t kParallelDirectionMacs = int64_t{1} << 24;

AlignedFloats aligned_zeros(size_t n) {
  AlignedFloats p = hwy::AllocateAligned<float>(std::max<size_t>(n, 1));
  std::fill(p.get(), p.get() + std::max<size_t>(n, 1), 0.0f);
  return p;
}

std::optional<RnnVectorActivation> vector_activation(RnnActivationKind kind) {
  switch (kind) {
    case RnnActivationKind::kSigmoid: return RnnVectorActivation::kSigmoid;
    case RnnActivationKind::kTanh: return RnnVectorActivation::kTanh;
    case RnnActivationKind::kRelu: return RnnVectorActivation::kRelu;
    default: return std::nullopt;
  }
}

// A node the kernel takes: its attributes and dims, and its constant weights.
struct RnnPlan {
  RnnAttrs attrs;
  RnnDims dims;
  const Tensor* w = nullptr;
  const Tensor* r = nullptr;
  const Tensor* bias = nullptr;  // optional
  const Tensor* peephole = nullptr;  // optional (LSTM)
};

const Tensor* constant_f32(const KernelCompileContext& ctx, size_t i, const std::vector<int64_t>& dims) {
  const Tensor* t = i < ctx.constants.size() ? ctx.constants[i] : nullptr;
  return t && t->dtype() == DType::kF32 && t->dims() == dims ? t : nullptr;
}

std::optional<RnnPlan> plan_of(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  if (!node.domain().empty()) return std::nullopt;
  auto attrs = read_rnn_attrs(node);
  if (!attrs.is_ok()) return std::nullopt;
  for (const RnnActivation& a : attrs->activations) {
    if (!vector_activation(a.kind)) return std::nullopt;
  }
  const Value* x = node.input(kRnnX);
  if (x == nullptr || x->dtype != DType::kF32 || !x->shape) return std::nullopt;
  const auto xd = static_dims(*x->shape);
  const Tensor* r_any = kRnnR < ctx.constants.size() ? ctx.constants[kRnnR] : nullptr;
  if (!xd || xd->size() != 3 || r_any == nullptr || r_any->rank() != 3) return std::nullopt;
  RnnPlan p;
  p.attrs = std::move(*attrs);
  p.dims.seq = (*xd)[p.attrs.batch_major ? 1 : 0];
  p.dims.batch = (*xd)[p.attrs.batch_major ? 0 : 1];
  p.dims.input = (*xd)[2];
  p.dims.hidden = p.attrs.hidden_size > 0 ? p.attrs.hidden_size : r_any->dim(2);
  p.dims.directions = p.attrs.num_directions;
  const RnnDims& d = p.dims;
  if (d.seq <= 0 || d.batch <= 0 || d.input <= 0 || d.hidden <= 0) return std::nullopt;
  const int64_t gh = rnn_gate_count(p.attrs.cell) * d.hidden;
  p.w = constant_f32(ctx, kRnnW, {d.directions, gh, d.input});
  p.r = constant_f32(ctx, kRnnR, {d.directions, gh, d.hidden});
  if (p.w == nullptr || p.r == nullptr) return std::nullopt;
  if (node.has_input(kRnnB)) {
    p.bias = constant_f32(ctx, kRnnB, {d.directions, 2 * gh});
    if (p.bias == nullptr) return std::nullopt;
  }
  if (p.attrs.cell == RnnCell::kLstm && node.has_input(kRnnP)) {
    p.peephole = constant_f32(ctx, kRnnP, {d.directions, 3 * d.hidden});
    if (p.peephole == nullptr) return std::nullopt;
  }
  // Runtime inputs of the planned types (shape inference checked their dims).
  if (node.has_input(kRnnSequenceLens) && node.input(kRnnSequenceLens)->dtype != DType::kI32) return std::nullopt;
  for (size_t i : {kRnnInitialH, kRnnInitialC}) {
    if (node.has_input(i) && node.input(i)->dtype != DType::kF32) return std::nullopt;
  }
  return p;
}

class RnnKernel final : public Kernel {
 public:
  explicit RnnKernel(const RnnPlan& plan, std::string who)
      : a_(plan.attrs), d_(plan.dims), who_(std::move(who)) {
    lanes_ = static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(hwy_cpu::RnnLanes)());
    panel_ = static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(hwy_cpu::RnnPanelWidth)());
    gates_ = rnn_gate_count(a_.cell);
    hp_ = (d_.hidden + lanes_ - 1) / lanes_ * lanes_;
    w_ = pack_input_weights(*plan.w);
    if (plan.bias != nullptr) {
      bias_ = pack_bias(*plan.bias, /*reset=*/false);
      if (a_.cell == RnnCell::kGru && a_.linear_before_reset) reset_bias_ = pack_bias(*plan.bias, /*reset=*/true);
    }
    if (plan.peephole != nullptr) peephole_ = pack_peephole(*plan.peephole);
    if (bias_ == nullptr) zero_bias_ = aligned_zeros(static_cast<size_t>(d_.directions * gates_ * hp_));
    // GRU: z, r from one block of R, h from another (without linear_before_reset it multiplies
    // r (.) h, known only after z, r); LSTM and RNN: one block of every gate.
    const int64_t first_block = a_.cell == RnnCell::kGru ? 2 : gates_;
    for (int64_t dir = 0; dir < d_.directions; ++dir) {
      packed_r_.push_back(pack_recurrent(*plan.r, dir, 0, first_block));
      if (a_.cell == RnnCell::kGru) packed_r_.push_back(pack_recurrent(*plan.r, dir, 2, 1));
    }
  }

  std::string_view name() const override { return "cpu.rnn"; }
  // W, R, B and P were packed at creation; X, sequence_lens and the initial states are read.
  bool reads_input(size_t i) const override { return i != kRnnW && i != kRnnR && i != kRnnB && i != kRnnP; }
  std::string implementation() const override {
    return str_cat(highway_dispatch_target(), " hidden ", d_.hidden, " padded ", hp_);
  }

  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    auto input = [&](size_t i) -> const Tensor* { return i < in.size() ? in[i] : nullptr; };
    const Tensor* x = input(kRnnX);
    if (x == nullptr || x->dtype() != DType::kF32 || x->numel() != d_.seq * d_.batch * d_.input) {
      return Status::internal_error(str_cat(who_, ": cpu.rnn: X does not have its planned shape"));
    }
    const int64_t state_numel = d_.directions * d_.batch * d_.hidden;
    const float* h0 = nullptr;
    const float* c0 = nullptr;
    for (size_t i : {kRnnInitialH, kRnnInitialC}) {
      const Tensor* t = input(i);
      if (t == nullptr || (i == kRnnInitialC && a_.cell != RnnCell::kLstm)) continue;
      if (t->dtype() != DType::kF32 || t->numel() != state_numel) {
        return Status::internal_error(str_cat(who_, ": cpu.rnn: an initial state does not have its planned shape"));
      }
      (i == kRnnInitialH ? h0 : c0) = t->data<float>();
    }
    std::vector<int64_t> lens(static_cast<size_t>(d_.batch), d_.seq);
    if (const Tensor* l = input(kRnnSequenceLens)) {
      if (l->dtype() != DType::kI32 || l->numel() != d_.batch) {
        return Status::internal_error(str_cat(who_, ": cpu.rnn: sequence_lens does not have its planned shape"));
      }
      for (int64_t b = 0; b < d_.batch; ++b) {
        const int32_t len = l->data<int32_t>()[b];
        if (len < 0 || len > d_.seq) {
          return Status::user_error(str_cat(who_, ": sequence_lens (input 4) holds ", len, " for batch entry ", b,
                                            "; expected 0 to the sequence length ", d_.seq));
        }
        lens[b] = len;
      }
    }
    auto output = [&](size_t i) -> float* {
      return i < out.size() && out[i] != nullptr && out[i]->dtype() == DType::kF32 ? out[i]->data<float>() : nullptr;
    };
    float* y = output(0);
    float* y_h = output(1);
    float* y_c = a_.cell == RnnCell::kLstm ? output(2) : nullptr;
    // Y past an entry's length is zero; planned buffers are not zero-filled.
    const bool partial = std::any_of(lens.begin(), lens.end(), [&](int64_t len) { return len < d_.seq; });
    if (y && partial) std::fill(y, y + out[0]->numel(), 0.0f);

    // Input projections of every step: per direction [seq * batch, gates * Hp].
    const int64_t rows = d_.seq * d_.batch, stride = gates_ * hp_;
    AlignedFloats projected = hwy::AllocateAligned<float>(static_cast<size_t>(d_.directions * rows * stride));
    auto project = [&](int64_t dir) {
      return dnnl_sgemm('N', 'T', rows, stride, d_.input, 1.0f, x->data<float>(), d_.input,
                        w_->get() + dir * stride * d_.input, d_.input, 0.0f, projected.get() + dir * rows * stride,
                        stride);
    };
    const Outputs o{y, y_h, y_c};
    dnnl_status_t status[2] = {dnnl_success, dnnl_success};
    const int64_t direction_macs = rows * stride * (d_.input + d_.hidden);
    if (d_.directions == 2 && omp_get_max_threads() >= 2 && direction_macs >= kParallelDirectionMacs) {
      // One thread per direction, each projecting its own inputs (oneDNN runs a call made inside
      // a parallel region on the calling thread) then running its recurrence: one parallel region
      // per run.
#pragma omp parallel num_threads(2)
      {
        const int dir = omp_get_thread_num();
        status[dir] = project(dir);
        if (status[dir] == dnnl_success) run_direction(dir, projected.get() + dir * rows * stride, lens, h0, c0, o);
      }
    } else {
      // A small projection runs on this thread: waking the OpenMP workers for it costs more than
      // it saves, and on a loaded machine a worker that is not scheduled stalls the whole run
      // (measured: a seq-1 LSTM took 12 ms instead of 0.04 with spinning workers at load 6).
      const bool parallel_gemm = rows * d_.directions * stride * d_.input >= kParallelProjectionMacs;
      const int saved_threads = omp_get_max_threads();
      if (!parallel_gemm) omp_set_num_threads(1);
      for (int64_t dir = 0; dir < d_.directions; ++dir) status[dir] = project(dir);
      if (!parallel_gemm) omp_set_num_threads(saved_threads);
      for (int64_t dir = 0; dir < d_.directions; ++dir) {
        if (status[dir] == dnnl_success) run_direction(dir, projected.get() + dir * rows * stride, lens, h0, c0, o);
      }
    }
    for (dnnl_status_t st : status) {
      if (st != dnnl_success) return Status::internal_error(str_cat(who_, ": cpu.rnn: dnnl_sgemm failed (", int(st), ")"));
    }
    return Status::ok();
  }

 private:
  struct Outputs {
    float* y;
    float* y_h;
    float* y_c;
  };

  int64_t x_row(int64_t t, int64_t b) const { return a_.batch_major ? b * d_.seq + t : t * d_.batch + b; }
  int64_t y_row(int64_t t, int64_t dir, int64_t b) const {
    return a_.batch_major ? (b * d_.seq + t) * d_.directions + dir : (t * d_.directions + dir) * d_.batch + b;
  }
  int64_t state_row(int64_t dir, int64_t b) const {
    return a_.batch_major ? b * d_.directions + dir : dir * d_.batch + b;
  }

  // How this kernel's packings of a weight are made: every parameter the packed floats depend
  // on besides the weight's bytes (its dims are implied by them and these).
  std::string packing(std::string_view what) const {
    return str_cat("cpu.rnn ", what, " cell ", static_cast<int>(a_.cell), " dirs ", d_.directions, " hidden ",
                   d_.hidden, " input ", d_.input, " padded ", hp_, " panel ", panel_,
                   a_.linear_before_reset ? " linear_before_reset" : "");
  }

  // W as [dirs * gates * Hp, input] with zero rows in the padding, for the projection GEMM.
  PackedFloats pack_input_weights(const Tensor& w) const {
    return pack_floats(w, packing("W"), static_cast<size_t>(d_.directions * gates_ * hp_ * d_.input), [&](float* out) {
      const float* src = w.data<float>();
      for (int64_t dg = 0; dg < d_.directions * gates_; ++dg) {
        std::memcpy(out + dg * hp_ * d_.input, src + dg * d_.hidden * d_.input,
                    static_cast<size_t>(d_.hidden * d_.input) * sizeof(float));
      }
    });
  }

  // Per direction, gates * Hp: Wb + Rb (GRU with linear_before_reset: Wb alone for h, Rb_h kept
  // apart since r multiplies it), or (`reset`) that Rb_h as [dirs, Hp].
  PackedFloats pack_bias(const Tensor& bias, bool reset) const {
    const int64_t per_dir = reset ? hp_ : gates_ * hp_;
    const auto floats = static_cast<size_t>(d_.directions * per_dir);
    return pack_floats(bias, packing(reset ? "Rb_h" : "B"), floats, [&](float* out) {
      const float* b = bias.data<float>();
      const int64_t gh = gates_ * d_.hidden;
      for (int64_t dir = 0; dir < d_.directions; ++dir) {
        const float* wb = b + dir * 2 * gh;
        const float* rb = wb + gh;
        for (int64_t g = 0; g < gates_; ++g) {
          const bool apart = a_.cell == RnnCell::kGru && a_.linear_before_reset && g == 2;
          for (int64_t j = 0; j < d_.hidden; ++j) {
            const int64_t n = g * d_.hidden + j;
            if (!reset) out[(dir * gates_ + g) * hp_ + j] = apart ? wb[n] : wb[n] + rb[n];
            else if (apart) out[dir * hp_ + j] = rb[n];
          }
        }
      }
    });
  }

  // The peepholes as three Hp blocks per direction.
  PackedFloats pack_peephole(const Tensor& peephole) const {
    return pack_floats(peephole, packing("P"), static_cast<size_t>(d_.directions * 3 * hp_), [&](float* out) {
      for (int64_t dg = 0; dg < d_.directions * 3; ++dg) {
        std::memcpy(out + dg * hp_, peephole.data<float>() + dg * d_.hidden,
                    static_cast<size_t>(d_.hidden) * sizeof(float));
      }
    });
  }

  // Gates [first, first + count) of direction dir's R as R^T panels: column c of the block is
  // gate first + c / Hp, unit c % Hp (zero past hidden); panel p holds columns
  // [p * panel, p * panel + width) as `hidden` rows of `width` floats.
  PackedFloats pack_recurrent(const Tensor& r, int64_t dir, int64_t first, int64_t count) const {
    const int64_t cols = count * hp_, k = d_.hidden;
    return pack_floats(r, packing(str_cat("R dir ", dir, " gates ", first, "+", count)), static_cast<size_t>(cols * k),
                       [&](float* packed) {
      const float* src = r.data<float>() + dir * gates_ * d_.hidden * d_.hidden;
      for (int64_t col0 = 0; col0 < cols; col0 += panel_) {
        const int64_t width = std::min(panel_, cols - col0);
        float* panel = packed + col0 * k;
        for (int64_t j = 0; j < width; ++j) {
          const int64_t gate = first + (col0 + j) / hp_, unit = (col0 + j) % hp_;
          if (unit >= d_.hidden) continue;
          const float* row = src + (gate * d_.hidden + unit) * d_.hidden;
          for (int64_t i = 0; i < k; ++i) panel[i * width + j] = row[i];
        }
      }
    });
  }

  hwy_cpu::RnnGateParams gate_params(int64_t dir) const {
    hwy_cpu::RnnGateParams p;
    p.hidden = static_cast<size_t>(hp_);
    p.bias = (bias_ ? bias_->get() : zero_bias_.get()) + dir * gates_ * hp_;
    p.has_clip = a_.clip.has_value();
    p.clip = a_.clip.value_or(0.0f);
    const int64_t n = rnn_activations_per_direction(a_.cell);
    p.f = *vector_activation(a_.activation(dir, 0).kind);
    if (n > 1) p.g = *vector_activation(a_.activation(dir, 1).kind);
    if (n > 2) p.h = *vector_activation(a_.activation(dir, 2).kind);
    p.input_forget = a_.input_forget;
    p.peephole = peephole_ ? peephole_->get() + dir * 3 * hp_ : nullptr;
    p.linear_before_reset = a_.linear_before_reset;
    p.reset_bias = a_.linear_before_reset ? (reset_bias_ ? reset_bias_->get() : zero_bias_.get()) + dir * hp_ : nullptr;
    return p;
  }

  // One direction over the whole sequence, reading its input projections `projected`
  // ([seq * batch, gates * Hp]). Per step: the active entries (step < length) gather
  // their state rows, one packed product gives their recurrent terms, the gate math updates the
  // state in place and the step's output rows are copied out.
  void run_direction(int64_t dir, const float* projected, const std::vector<int64_t>& lens, const float* h0,
                     const float* c0, const Outputs& o) const {
    const hwy_cpu::RnnGateParams p = gate_params(dir);
    const int64_t batch = d_.batch, hidden = d_.hidden, stride = gates_ * hp_;
    const size_t hidden_bytes = static_cast<size_t>(hidden) * sizeof(float);
    AlignedFloats h = aligned_zeros(static_cast<size_t>(batch * hp_));
    AlignedFloats c = aligned_zeros(static_cast<size_t>(batch * hp_));
    AlignedFloats rec = aligned_zeros(static_cast<size_t>(batch * stride));
    AlignedFloats z = aligned_zeros(static_cast<size_t>(batch * hp_));
    AlignedFloats reset = aligned_zeros(static_cast<size_t>(batch * hp_));
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t s = state_row(dir, b) * hidden;
      if (h0) std::memcpy(h.get() + b * hp_, h0 + s, hidden_bytes);
      if (c0) std::memcpy(c.get() + b * hp_, c0 + s, hidden_bytes);
    }
    const float* first = packed_r_[static_cast<size_t>(dir * (a_.cell == RnnCell::kGru ? 2 : 1))]->get();
    const float* second = a_.cell == RnnCell::kGru ? packed_r_[static_cast<size_t>(dir * 2 + 1)]->get() : nullptr;
    const size_t first_cols = static_cast<size_t>((a_.cell == RnnCell::kGru ? 2 : gates_) * hp_);
    std::vector<const float*> h_rows, reset_rows;
    std::vector<float*> rec_rows, rec_h_rows;
    std::vector<int64_t> active;
    for (int64_t step = 0; step < d_.seq; ++step) {
      active.clear();
      for (int64_t b = 0; b < batch; ++b) {
        if (step < lens[b]) active.push_back(b);
      }
      if (active.empty()) break;
      h_rows.clear();
      rec_rows.clear();
      rec_h_rows.clear();
      reset_rows.clear();
      for (int64_t b : active) {
        h_rows.push_back(h.get() + b * hp_);
        rec_rows.push_back(rec.get() + b * stride);
        rec_h_rows.push_back(rec.get() + b * stride + 2 * hp_);
        reset_rows.push_back(reset.get() + b * hp_);
      }
      const size_t n = active.size();
      const auto k = static_cast<size_t>(hidden);
      HWY_DYNAMIC_DISPATCH(hwy_cpu::RecurrentProduct)(h_rows.data(), rec_rows.data(), n, first, k, first_cols);
      if (second != nullptr && a_.linear_before_reset) {
        HWY_DYNAMIC_DISPATCH(hwy_cpu::RecurrentProduct)(h_rows.data(), rec_h_rows.data(), n, second, k,
                                                        static_cast<size_t>(hp_));
      }
      auto projected_row = [&](int64_t b) {
        const int64_t t = a_.runs_reversed(dir) ? lens[b] - 1 - step : step;
        return projected + x_row(t, b) * stride;
      };
      if (a_.cell == RnnCell::kGru) {
        for (size_t i = 0; i < n; ++i) {
          const int64_t b = active[i];
          HWY_DYNAMIC_DISPATCH(hwy_cpu::GruGates)(p, projected_row(b), rec_rows[i], h.get() + b * hp_,
                                                  z.get() + b * hp_, reset.get() + b * hp_);
        }
        if (!a_.linear_before_reset) {
          HWY_DYNAMIC_DISPATCH(hwy_cpu::RecurrentProduct)(reset_rows.data(), rec_h_rows.data(), n, second, k,
                                                          static_cast<size_t>(hp_));
        }
      }
      for (size_t i = 0; i < n; ++i) {
        const int64_t b = active[i];
        const float* xp = projected_row(b);
        float* hb = h.get() + b * hp_;
        switch (a_.cell) {
          case RnnCell::kLstm: HWY_DYNAMIC_DISPATCH(hwy_cpu::LstmCell)(p, xp, rec_rows[i], c.get() + b * hp_, hb); break;
          case RnnCell::kGru:
            HWY_DYNAMIC_DISPATCH(hwy_cpu::GruOutput)(p, xp, rec_rows[i], z.get() + b * hp_, reset.get() + b * hp_, hb);
            break;
          case RnnCell::kRnn: HWY_DYNAMIC_DISPATCH(hwy_cpu::SimpleRnnCell)(p, xp, rec_rows[i], hb); break;
        }
        if (o.y) {
          const int64_t t = a_.runs_reversed(dir) ? lens[b] - 1 - step : step;
          std::memcpy(o.y + y_row(t, dir, b) * hidden, hb, hidden_bytes);
        }
      }
    }
    for (int64_t b = 0; b < batch; ++b) {
      // A zero-length entry's final state is zero, as in the reference.
      const int64_t s = state_row(dir, b) * hidden;
      if (o.y_h) {
        if (lens[b] > 0) std::memcpy(o.y_h + s, h.get() + b * hp_, hidden_bytes);
        else std::fill(o.y_h + s, o.y_h + s + hidden, 0.0f);
      }
      if (o.y_c) {
        if (lens[b] > 0) std::memcpy(o.y_c + s, c.get() + b * hp_, hidden_bytes);
        else std::fill(o.y_c + s, o.y_c + s + hidden, 0.0f);
      }
    }
  }

  RnnAttrs a_;
  RnnDims d_;
  std::string who_;
  int64_t lanes_ = 8, panel_ = 32, gates_ = 1, hp_ = 0;
  PackedFloats w_;                      // [dirs * gates * Hp, input]
  PackedFloats bias_;                   // [dirs, gates * Hp], or null without B
  PackedFloats reset_bias_;             // [dirs, Hp], or null (no B, or no linear_before_reset)
  PackedFloats peephole_;               // [dirs, 3 * Hp] or null
  std::vector<PackedFloats> packed_r_;  // per direction: one block (GRU: z r, then h)
  AlignedFloats zero_bias_;             // [dirs, gates * Hp] zeros, for a node without B
};

bool supports(const KernelCompileContext& ctx) { return plan_of(ctx).has_value(); }

Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
  auto plan = plan_of(ctx);
  if (!plan) return Status::internal_error(str_cat(ctx.node.describe(), ": not a cpu.rnn node"));
  return std::unique_ptr<Kernel>(std::make_unique<RnnKernel>(*plan, ctx.node.describe()));
}

}  // namespace

KernelImpl rnn_lstm_kernel() { return {"cpu.rnn", "LSTM", supports, create}; }
KernelImpl rnn_gru_kernel() { return {"cpu.rnn", "GRU", supports, create}; }
KernelImpl rnn_simple_kernel() { return {"cpu.rnn", "RNN", supports, create}; }

}  // namespace opfuse
#endif  // HWY_ONCE
