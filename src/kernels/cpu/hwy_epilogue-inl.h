// The vector epilogue program (hwy_epilogue.h) over a contiguous run of floats, per Highway
// target: shared by the in-place epilogue pass (hwy_epilogue.cc) and the kernels that apply an
// epilogue to a tile they just stored (packed_gemm_kernel.cc). Included once per target by
// foreach_target.h, hence the toggling include guard.
#if defined(OPFUSE_KERNELS_CPU_HWY_EPILOGUE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef OPFUSE_KERNELS_CPU_HWY_EPILOGUE_INL_H_
#undef OPFUSE_KERNELS_CPU_HWY_EPILOGUE_INL_H_
#else
#define OPFUSE_KERNELS_CPU_HWY_EPILOGUE_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstring>

#include "hwy/highway.h"
#include "kernels/cpu/hwy_epilogue.h"
#include "kernels/cpu/hwy_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#include "kernels/cpu/hwy_vector_ops-inl.h"

// Vectors per block: each instruction runs over one block before the next (one jump per
// instruction and block), its operands a few vectors in L1.
constexpr size_t kEpilogueVectors = 4;
constexpr size_t kEpilogueBlock = kEpilogueVectors * hn::MaxLanes(DF());

// y[0, n) = program(y, residual) in place. `slots`: kEpilogueBlock floats per instruction,
// aligned. Full blocks read y and the residual in place and the last instruction writes y; the
// tail goes through zero-padded slots.
HWY_INLINE void RunEpilogue(const VectorEpilogue& e, float* HWY_RESTRICT y, const float* residual, size_t n,
                            float* HWY_RESTRICT slots) {
  const DF d;
  const size_t N = hn::Lanes(d), B = kEpilogueVectors * N, count = e.code.size();
  const VInstr* code = e.code.data();
  const float* cur[kMaxEpilogueInstrs];
  float* slot[kMaxEpilogueInstrs];
  for (size_t i = 0; i < count; ++i) {
    slot[i] = slots + i * kEpilogueBlock;
    if (code[i].op == ScalarOp::kConst) std::fill(slot[i], slot[i] + B, code[i].value);
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
      VisitOp(in, [&](auto fn, auto arity) HWY_ATTR {
        constexpr int kArity = decltype(arity)::value;
        for (size_t u = 0; u < vectors; ++u) {
          const VF va = hn::LoadU(d, a + u * N);
          const VF vb = kArity >= 2 ? hn::LoadU(d, b + u * N) : va;
          const VF vc = kArity >= 3 ? hn::LoadU(d, c + u * N) : va;
          hn::StoreU(fn(va, vb, vc), d, o + u * N);
        }
      });
      cur[i] = o;
    }
    if (cur[count - 1] != y + j) std::memmove(y + j, cur[count - 1], len * sizeof(float));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#endif  // OPFUSE_KERNELS_CPU_HWY_EPILOGUE_INL_H_ toggle
