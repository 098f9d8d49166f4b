// The epilogue pass: the hand-written post-ops op by op over chunks of a few KiB (L1-resident),
// or the expression program block by block, spread over OpenMP threads.
#ifndef OPFUSE_KERNELS_CPU_HWY_EPILOGUE_DECLS_
#define OPFUSE_KERNELS_CPU_HWY_EPILOGUE_DECLS_
#include <omp.h>

#include <algorithm>
#include <limits>
#include <string_view>

#include "kernels/cpu/hwy_epilogue.h"
#include "kernels/cpu/hwy_kernels.h"
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/hwy_epilogue.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/hwy_epilogue-inl.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
using Kind = FastPostOp::Kind;

// One post-op over n floats of y (and of the residual, for kAdd).
template <Kind K>
HWY_NOINLINE void ApplyOp(const FastPostOp& op, float* HWY_RESTRICT y, const float* HWY_RESTRICT residual, size_t n) {
  const DF d;
  const size_t lanes = hn::Lanes(d);
  constexpr bool kReadsResidual = K == Kind::kAdd;
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const VF r = kReadsResidual ? hn::LoadU(d, residual + i) : hn::Zero(d);
    hn::StoreU(Apply<K>(d, op, hn::LoadU(d, y + i), r), d, y + i);
  }
  if (i < n) {  // the tail through a vector-sized buffer (this Highway has no LoadN)
    HWY_ALIGN float ty[hn::MaxLanes(d)] = {}, tr[hn::MaxLanes(d)] = {};
    std::copy(y + i, y + n, ty);
    if (kReadsResidual) std::copy(residual + i, residual + n, tr);
    hn::Store(Apply<K>(d, op, hn::Load(d, ty), hn::Load(d, tr)), d, ty);
    std::copy(ty, ty + (n - i), y + i);
  }
}

// One chunk: every op over it in turn.
void ApplyChunk(const FastPostOp* ops, size_t count, float* y, const float* residual, size_t n) {
  for (const FastPostOp* op = ops; op != ops + count; ++op) {
    VisitKind(op->kind, [&](auto kind) { ApplyOp<decltype(kind)::value>(*op, y, residual, n); });
  }
}

// The expression program over n floats.
void ApplyEpilogue(const VectorEpilogue& e, float* y, const float* residual, size_t n) {
  HWY_ALIGN float slots[kMaxEpilogueInstrs * kEpilogueBlock];
  RunEpilogue(e, y, residual, n, slots);
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace opfuse::hwy_cpu {
HWY_EXPORT(ApplyEpilogue);
HWY_EXPORT(ApplyChunk);
using Kind = FastPostOp::Kind;

namespace {

// The post-ops with a hand-written vector form, by name.
std::optional<FastPostOp> fast_form(const PostOp& op) {
  static constexpr std::pair<std::string_view, Kind> kKinds[] = {
      {"relu", Kind::kRelu}, {"leaky_relu", Kind::kLeakyRelu}, {"clip", Kind::kClip},
      {"sigmoid", Kind::kSigmoid}, {"sigmoid_mul", Kind::kSigmoidMul}, {"hardswish", Kind::kHardSwish},
      {"tanh", Kind::kTanh}, {"elu", Kind::kElu}, {"gelu_erf", Kind::kGeluErf},
      {"gelu_tanh", Kind::kGeluTanh}, {"hardsigmoid", Kind::kHardSigmoid}, {"linear", Kind::kLinear},
      {"add", Kind::kAdd}};
  const auto* it = std::find_if(std::begin(kKinds), std::end(kKinds), [&](const auto& k) { return k.first == op.spec->name; });
  if (it == std::end(kKinds)) return std::nullopt;
  FastPostOp f{it->second};
  if (!op.params.empty()) f.a = op.params[0];
  if (op.params.size() > 1) f.b = op.params[1];
  return f;
}

// Op by op over L1-sized chunks.
constexpr int64_t kChunk = 2048;  // 8 KiB of y (and of the residual)

void apply_fast_chunk(const VectorEpilogue& e, float* y, const float* residual, int64_t first, int64_t n) {
  HWY_DYNAMIC_DISPATCH(ApplyChunk)(e.fast.data(), e.fast.size(), y + first, residual ? residual + first : nullptr,
                                   static_cast<size_t>(std::min(kChunk, n - first)));
}

}  // namespace

std::optional<std::pair<float, float>> clamp_of(const VectorEpilogue& e) {
  using Kind = FastPostOp::Kind;
  if (e.fast.size() != 1) return std::nullopt;
  const FastPostOp& op = e.fast[0];
  if (op.kind == Kind::kRelu) return std::pair{0.0f, std::numeric_limits<float>::infinity()};
  if (op.kind == Kind::kClip) return std::pair{op.a, op.b};
  return std::nullopt;
}

std::optional<VectorEpilogue> vector_epilogue(std::span<const PostOp> ops, bool hand_written) {
  VectorEpilogue out;
  for (const PostOp& op : ops) {
    out.reads_residual |= op.spec->reads_residual;
    if (auto f = fast_form(op)) out.fast.push_back(*f);
  }
  if (hand_written && out.fast.size() == ops.size()) return out;
  out.fast.clear();
  auto expr = epilogue_expr(ops);
  if (!expr.is_ok() || expr->code.size() > kMaxEpilogueInstrs) return std::nullopt;
  for (const ScalarInstr& s : expr->code) {
    VInstr v{s.op, s.a, s.b, s.c, static_cast<float>(s.value)};
    if (s.op == ScalarOp::kPow && expr->code[s.b].op == ScalarOp::kConst) {  // an exact cheap form
      v.pow_exp = true;
      v.value = static_cast<float>(expr->code[s.b].value);
    }
    out.code.push_back(v);
  }
  return out;
}

std::optional<std::vector<PostOp>> anchor_vector_epilogue(const Node& node, const std::vector<int64_t>& y) {
  auto epilogue = read_epilogue(node);
  if (!epilogue.is_ok() || !vector_epilogue(*epilogue)) return std::nullopt;
  int adds = 0;
  for (const PostOp& op : *epilogue) adds += op.spec->reads_residual;
  if (adds != (node.has_input(3) ? 1 : 0)) return std::nullopt;
  if (node.has_input(3) && static_dims_of(node.input(3)) != y) return std::nullopt;
  return std::move(*epilogue);
}

void apply_epilogue_here(const VectorEpilogue& e, float* y, const float* residual, int64_t n) {
  if (n <= 0 || e.empty()) return;
  if (!e.fast.empty()) {
    for (int64_t first = 0; first < n; first += kChunk) apply_fast_chunk(e, y, residual, first, n);
    return;
  }
  HWY_DYNAMIC_DISPATCH(ApplyEpilogue)(e, y, residual, static_cast<size_t>(n));
}

void apply_epilogue(const VectorEpilogue& e, float* y, const float* residual, int64_t n) {
  if (n <= kParallelThreshold || e.empty()) return apply_epilogue_here(e, y, residual, n);
  if (!e.fast.empty()) {
    const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) apply_fast_chunk(e, y, residual, c * kChunk, n);
    return;
  }
  // The program: one contiguous range per thread (it goes block by block, so each range stays
  // in L1 as it is worked on), in multiples of 64 floats so no two threads share a cache line.
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t per = (n + threads - 1) / threads;
    const int64_t first = std::min(n, (per * t + 63) / 64 * 64);
    const int64_t last = t + 1 == threads ? n : std::min(n, (per * (t + 1) + 63) / 64 * 64);
    if (last > first) apply_epilogue_here(e, y + first, residual ? residual + first : nullptr, last - first);
  }
}

}  // namespace opfuse::hwy_cpu
#endif  // HWY_ONCE
