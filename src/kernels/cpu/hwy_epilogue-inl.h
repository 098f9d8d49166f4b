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

// Every post-op of `ops` in turn on one vector; `r` is the residual's vector (read by "add" only).
// A switch per op and vector: for kernels that apply it once per output vector after a long
// accumulation, where it costs nothing next to the products.
template <class DF, class VF = hn::Vec<DF>>
HWY_INLINE VF ApplyAll(DF d, const VectorPostOp* ops, size_t count, VF x, VF r) {
  using Kind = VectorPostOp::Kind;
  for (const VectorPostOp* op = ops; op != ops + count; ++op) {
    switch (op->kind) {
      case Kind::kRelu: x = Apply<Kind::kRelu>(d, *op, x, r); break;
      case Kind::kLeakyRelu: x = Apply<Kind::kLeakyRelu>(d, *op, x, r); break;
      case Kind::kClip: x = Apply<Kind::kClip>(d, *op, x, r); break;
      case Kind::kSigmoid: x = Apply<Kind::kSigmoid>(d, *op, x, r); break;
      case Kind::kSigmoidMul: x = Apply<Kind::kSigmoidMul>(d, *op, x, r); break;
      case Kind::kHardSwish: x = Apply<Kind::kHardSwish>(d, *op, x, r); break;
      case Kind::kTanh: x = Apply<Kind::kTanh>(d, *op, x, r); break;
      case Kind::kElu: x = Apply<Kind::kElu>(d, *op, x, r); break;
      case Kind::kGeluErf: x = Apply<Kind::kGeluErf>(d, *op, x, r); break;
      case Kind::kGeluTanh: x = Apply<Kind::kGeluTanh>(d, *op, x, r); break;
      case Kind::kHardSigmoid: x = Apply<Kind::kHardSigmoid>(d, *op, x, r); break;
      case Kind::kLinear: x = Apply<Kind::kLinear>(d, *op, x, r); break;
      case Kind::kAdd: x = Apply<Kind::kAdd>(d, *op, x, r); break;
    }
  }
  return x;
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#endif  // OPFUSE_KERNELS_CPU_HWY_EPILOGUE_INL_H_ toggle
