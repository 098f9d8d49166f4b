// The epilogue pass: chunks of a few KiB (L1-resident) spread over OpenMP threads, each run
// through the vector program of hwy_epilogue-inl.h.
#ifndef OPFUSE_KERNELS_CPU_HWY_EPILOGUE_DECLS_
#define OPFUSE_KERNELS_CPU_HWY_EPILOGUE_DECLS_
#include <algorithm>

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

std::optional<VectorEpilogue> vector_epilogue(std::span<const PostOp> ops) {
  if (ops.empty()) return VectorEpilogue{};
  auto expr = epilogue_expr(ops);
  if (!expr.is_ok() || expr->code.size() > kMaxEpilogueInstrs) return std::nullopt;
  VectorEpilogue out;
  for (const ScalarInstr& s : expr->code) {
    VInstr v{s.op, s.a, s.b, s.c, static_cast<float>(s.value)};
    if (s.op == ScalarOp::kArg) out.reads_residual |= s.a == 1;
    if (s.op == ScalarOp::kPow && expr->code[s.b].op == ScalarOp::kConst) {  // an exact cheap form
      v.pow_exp = true;
      v.value = static_cast<float>(expr->code[s.b].value);
    }
    out.code.push_back(v);
  }
  return out;
}

void apply_epilogue_here(const VectorEpilogue& e, float* y, const float* residual, int64_t n) {
  if (n > 0 && !e.code.empty()) HWY_DYNAMIC_DISPATCH(ApplyEpilogue)(e, y, residual, static_cast<size_t>(n));
}

void apply_epilogue(const VectorEpilogue& e, float* y, const float* residual, int64_t n) {
  constexpr int64_t kChunk = 2048;  // 8 KiB of y (and of the residual): L1-resident
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t first = c * kChunk;
    apply_epilogue_here(e, y + first, residual ? residual + first : nullptr, std::min(kChunk, n - first));
  }
}

}  // namespace opfuse::hwy_cpu
#endif  // HWY_ONCE
