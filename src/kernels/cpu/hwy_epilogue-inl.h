// The vector epilogue (hwy_epilogue.h) per Highway target: the hand-written post-ops on one
// vector, and the expression program over a contiguous run of floats. Shared by the in-place
// epilogue pass (hwy_epilogue.cc) and the GEMMs that apply an epilogue to a tile they just
// stored (gemm_tile-inl.h). Included once per target by foreach_target.h, hence the toggling
// include guard. The hand-written forms follow the op records' expressions, NaN and
// Inf included (tests/kernels/hwy_epilogue_test.cc checks them against those).
#if defined(OPFUSE_KERNELS_CPU_HWY_EPILOGUE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef OPFUSE_KERNELS_CPU_HWY_EPILOGUE_INL_H_
#undef OPFUSE_KERNELS_CPU_HWY_EPILOGUE_INL_H_
#else
#define OPFUSE_KERNELS_CPU_HWY_EPILOGUE_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "hwy/highway.h"
#include "kernels/cpu/hwy_epilogue.h"
#include "kernels/cpu/hwy_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#include "kernels/cpu/hwy_vector_ops-inl.h"

// One post-op on one vector; K is a template argument so a loop of one op (hwy_epilogue.cc)
// compiles without a per-vector switch.
template <FastPostOp::Kind K, class DF, class VF = hn::Vec<DF>>
HWY_INLINE VF Apply(DF d, const FastPostOp& op, VF x, VF r) {
  using Kind = FastPostOp::Kind;
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
  if constexpr (K == Kind::kGeluErf) return GeluErf(d, x);
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
// per-tile (gemm_tile-inl.h) and per-chunk (hwy_epilogue.cc) loops dispatch through.
template <class F>
HWY_INLINE decltype(auto) VisitKind(FastPostOp::Kind kind, F&& f) {
  using Kind = FastPostOp::Kind;
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

// Vectors per block: each instruction runs over one block before the next (one jump per
// instruction and block), its operands a few vectors in L1.
constexpr size_t kEpilogueVectors = 16;
constexpr size_t kEpilogueBlock = kEpilogueVectors * hn::MaxLanes(DF());

// y[0, n) = program(y, residual) in place. `slots`: kEpilogueBlock floats per instruction,
// aligned. Full blocks read y and the residual in place and the last instruction writes y; the
// tail goes through zero-padded slots. A constant is one vector, read with stride 0.
HWY_INLINE void RunEpilogue(const VectorEpilogue& e, float* HWY_RESTRICT y, const float* residual, size_t n,
                            float* HWY_RESTRICT slots) {
  const DF d;
  const size_t N = hn::Lanes(d), B = kEpilogueVectors * N, count = e.code.size();
  const VInstr* code = e.code.data();
  const float* cur[kMaxEpilogueInstrs];
  float* slot[kMaxEpilogueInstrs];
  size_t step[kMaxEpilogueInstrs];  // floats between an instruction's vectors: 0 for constants
  for (size_t i = 0; i < count; ++i) {
    slot[i] = slots + i * kEpilogueBlock;
    const bool constant = code[i].op == ScalarOp::kConst;
    if (constant) hn::Store(hn::Set(d, code[i].value), d, slot[i]);
    step[i] = constant ? 0 : N;
    cur[i] = slot[i];
  }
  for (size_t j = 0; j < n; j += B) {
    const size_t len = std::min(B, n - j), vectors = (len + N - 1) / N;
    const bool full = len == B;
    for (size_t i = 0; i < count; ++i) {
      const VInstr& in = code[i];
      if (in.op == ScalarOp::kConst) continue;
      if (in.op == ScalarOp::kArg) {
        const float* src = (in.a == 0 ? y : residual) + j;
        if (full) {
          cur[i] = src;
        } else {
          std::memcpy(slot[i], src, len * sizeof(float));
          std::fill(slot[i] + len, slot[i] + B, 0.0f);
          cur[i] = slot[i];
        }
        continue;
      }
      // The last instruction of a full block writes y itself: each vector of y is read (as
      // argument 0) before the same vector is written, and no later instruction reads it.
      float* o = full && i + 1 == count ? y + j : slot[i];
      const float* a = cur[in.a];
      const float* b = in.b >= 0 ? cur[in.b] : a;
      const float* c = in.c >= 0 ? cur[in.c] : a;
      const size_t sa = step[in.a], sb = in.b >= 0 ? step[in.b] : sa, sc = in.c >= 0 ? step[in.c] : sa;
      // The same loop as the executor's register mode (hwy_executor.cc, RunFused) but with
      // per-operand strides; sharing one helper made that mode 10-30% slower in
      // opfuse_fused_bench's chains, so each keeps its own.
      VisitOp(in, [&](auto fn, auto arity) HWY_ATTR {
        constexpr int kArity = decltype(arity)::value;
        for (size_t u = 0; u < vectors; ++u) {
          const VF va = hn::LoadU(d, a + u * sa);
          const VF vb = kArity >= 2 ? hn::LoadU(d, b + u * sb) : va;
          const VF vc = kArity >= 3 ? hn::LoadU(d, c + u * sc) : va;
          hn::StoreU(fn(va, vb, vc), d, o + u * N);
        }
      });
      cur[i] = o;
    }
    const float* result = cur[count - 1];
    if (result == y + j) continue;
    for (size_t k = 0; k < len; ++k) y[j + k] = result[k * step[count - 1] / N];
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#endif  // OPFUSE_KERNELS_CPU_HWY_EPILOGUE_INL_H_ toggle
