// One post-op of an epilogue (hwy_epilogue.h) on one vector, per Highway target: the math shared
// by the in-place epilogue pass (hwy_epilogue.cc) and the kernels that apply an epilogue to their
// accumulators before storing them (packed_gemm_kernel.cc). Included once per target by
// foreach_target.h, hence the toggling include guard. The formulas follow ops/fused.cc's scalar
// reference of each post-op, NaN and Inf included.
#if defined(OPFUSE_KERNELS_CPU_HWY_EPILOGUE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef OPFUSE_KERNELS_CPU_HWY_EPILOGUE_INL_H_
#undef OPFUSE_KERNELS_CPU_HWY_EPILOGUE_INL_H_
#else
#define OPFUSE_KERNELS_CPU_HWY_EPILOGUE_INL_H_
#endif

#include <type_traits>

#include "hwy/highway.h"
#include "kernels/cpu/hwy_epilogue.h"
#include "kernels/cpu/hwy_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One post-op on one vector; K is a template argument so a loop of one op (hwy_epilogue.cc)
// compiles without a per-vector switch.
template <VectorPostOp::Kind K, class DF, class VF = hn::Vec<DF>>
HWY_INLINE VF Apply(DF d, const VectorPostOp& op, VF x, VF r) {
  using Kind = VectorPostOp::Kind;
  const VF zero = hn::Zero(d), one = hn::Set(d, 1.0f), half = hn::Set(d, 0.5f);
  if constexpr (K == Kind::kRelu) return hn::IfThenElse(hn::Lt(x, zero), zero, x);  // NaN stays NaN
  if constexpr (K == Kind::kLeakyRelu) return hn::IfThenElse(hn::Ge(x, zero), x, hn::Mul(hn::Set(d, op.a), x));
  if constexpr (K == Kind::kClip)  // NaN stays NaN, as in the reference
    return hn::IfThenElse(hn::IsNaN(x), x, hn::Min(hn::Max(x, hn::Set(d, op.a)), hn::Set(d, op.b)));
  if constexpr (K == Kind::kSigmoid) return Sigmoid(d, x);
  if constexpr (K == Kind::kSigmoidMul) return Silu(d, x);
  if constexpr (K == Kind::kHardSwish)
    return hn::Mul(x, hn::Max(zero, hn::Min(one, hn::MulAdd(x, hn::Set(d, 1.0f / 6.0f), half))));
  if constexpr (K == Kind::kTanh) return SafeTanh(d, x);
  if constexpr (K == Kind::kElu)
    return hn::IfThenElse(hn::Lt(x, zero), hn::Mul(hn::Set(d, op.a), hn::Sub(SafeExp(d, x), one)), x);
  if constexpr (K == Kind::kGeluErf)
    return hn::Mul(hn::Mul(half, x), hn::Add(one, Erf(d, hn::Mul(x, hn::Set(d, 0.70710678118654752f)))));
  if constexpr (K == Kind::kGeluTanh) {
    const VF inner = hn::Mul(hn::Set(d, 0.7978845608028654f),
                             hn::MulAdd(hn::Mul(hn::Set(d, 0.044715f), hn::Mul(x, x)), x, x));
    return hn::Mul(hn::Mul(half, x), hn::Add(one, SafeTanh(d, inner)));
  }
  if constexpr (K == Kind::kHardSigmoid) {
    const auto y = hn::MulAdd(hn::Set(d, op.a), x, hn::Set(d, op.b));  // NaN stays NaN
    return hn::IfThenElse(hn::Lt(y, zero), zero, hn::IfThenElse(hn::Gt(y, one), one, y));
  }
  if constexpr (K == Kind::kLinear) return hn::MulAdd(hn::Set(d, op.a), x, hn::Set(d, op.b));
  if constexpr (K == Kind::kAdd) return hn::Add(x, r);
}

// Calls f(std::integral_constant<Kind, K>{}) for the op's kind: the one list of kinds that the
// per-vector (ApplyAll) and per-chunk (hwy_epilogue.cc) loops dispatch through.
template <class F>
HWY_INLINE decltype(auto) VisitKind(VectorPostOp::Kind kind, F&& f) {
  using Kind = VectorPostOp::Kind;
  switch (kind) {
    case Kind::kRelu: return f(std::integral_constant<Kind, Kind::kRelu>{});
    case Kind::kLeakyRelu: return f(std::integral_constant<Kind, Kind::kLeakyRelu>{});
    case Kind::kClip: return f(std::integral_constant<Kind, Kind::kClip>{});
    case Kind::kSigmoid: return f(std::integral_constant<Kind, Kind::kSigmoid>{});
    case Kind::kSigmoidMul: return f(std::integral_constant<Kind, Kind::kSigmoidMul>{});
    case Kind::kHardSwish: return f(std::integral_constant<Kind, Kind::kHardSwish>{});
    case Kind::kTanh: return f(std::integral_constant<Kind, Kind::kTanh>{});
    case Kind::kElu: return f(std::integral_constant<Kind, Kind::kElu>{});
    case Kind::kGeluErf: return f(std::integral_constant<Kind, Kind::kGeluErf>{});
    case Kind::kGeluTanh: return f(std::integral_constant<Kind, Kind::kGeluTanh>{});
    case Kind::kHardSigmoid: return f(std::integral_constant<Kind, Kind::kHardSigmoid>{});
    case Kind::kLinear: return f(std::integral_constant<Kind, Kind::kLinear>{});
    case Kind::kAdd: break;
  }
  return f(std::integral_constant<Kind, Kind::kAdd>{});
}

// Every post-op of `ops` in turn on one vector; `r` is the residual's vector (read by "add" only).
// A switch per op and vector: for kernels that apply it once per output vector after a long
// accumulation, where it costs nothing next to the products.
template <class DF, class VF = hn::Vec<DF>>
HWY_INLINE VF ApplyAll(DF d, const VectorPostOp* ops, size_t count, VF x, VF r) {
  for (const VectorPostOp* op = ops; op != ops + count; ++op) {
    x = VisitKind(op->kind, [&](auto kind) { return Apply<decltype(kind)::value>(d, *op, x, r); });
  }
  return x;
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#endif  // OPFUSE_KERNELS_CPU_HWY_EPILOGUE_INL_H_ toggle
