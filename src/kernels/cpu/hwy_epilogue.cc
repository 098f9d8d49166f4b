// Post-ops applied chunk by chunk (a few KiB, so each op's pass over a chunk stays in L1),
// op after op, with the per-vector math of hwy_epilogue-inl.h; chunks are spread over OpenMP
// threads.
#ifndef OPFUSE_KERNELS_CPU_HWY_EPILOGUE_DECLS_
#define OPFUSE_KERNELS_CPU_HWY_EPILOGUE_DECLS_
#include <algorithm>
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
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using Kind = VectorPostOp::Kind;

// One post-op over n floats of y (and of the residual, for kAdd).
template <Kind K>
HWY_NOINLINE void ApplyOp(const VectorPostOp& op, float* HWY_RESTRICT y, const float* HWY_RESTRICT residual, size_t n) {
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
void ApplyChunk(const VectorPostOp* ops, size_t count, float* y, const float* residual, size_t n) {
  for (const VectorPostOp* op = ops; op != ops + count; ++op) {
    VisitKind(op->kind, [&](auto kind) { ApplyOp<decltype(kind)::value>(*op, y, residual, n); });
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace opfuse::hwy_cpu {
HWY_EXPORT(ApplyChunk);
using Kind = VectorPostOp::Kind;

std::optional<std::vector<VectorPostOp>> vector_post_ops(std::span<const PostOp> ops) {
  static constexpr std::pair<std::string_view, Kind> kKinds[] = {
      {"relu", Kind::kRelu}, {"leaky_relu", Kind::kLeakyRelu}, {"clip", Kind::kClip},
      {"sigmoid", Kind::kSigmoid}, {"sigmoid_mul", Kind::kSigmoidMul}, {"hardswish", Kind::kHardSwish},
      {"tanh", Kind::kTanh}, {"elu", Kind::kElu}, {"gelu_erf", Kind::kGeluErf},
      {"gelu_tanh", Kind::kGeluTanh}, {"hardsigmoid", Kind::kHardSigmoid}, {"linear", Kind::kLinear},
      {"add", Kind::kAdd}};
  std::vector<VectorPostOp> out;
  for (const PostOp& op : ops) {
    const auto* it = std::find_if(std::begin(kKinds), std::end(kKinds),
                                  [&](const auto& k) { return k.first == op.spec->name; });
    if (it == std::end(kKinds)) return std::nullopt;
    VectorPostOp v{it->second};
    if (!op.params.empty()) v.a = op.params[0];
    if (op.params.size() > 1) v.b = op.params[1];
    out.push_back(v);
  }
  return out;
}

void apply_post_ops(std::span<const VectorPostOp> ops, float* y, const float* residual, int64_t n) {
  constexpr int64_t kChunk = 2048;  // 8 KiB of y (and of the residual): L1-resident
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t first = c * kChunk, len = std::min(kChunk, n - first);
    HWY_DYNAMIC_DISPATCH(ApplyChunk)(ops.data(), ops.size(), y + first, residual ? residual + first : nullptr,
                                     static_cast<size_t>(len));
  }
}

}  // namespace opfuse::hwy_cpu
#endif  // HWY_ONCE
