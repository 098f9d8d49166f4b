// The per-channel affine stretch (kernels/cpu/hwy_channel_affine.h) per Highway target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/hwy_channel_affine.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/hwy_channel_affine.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

size_t ChannelAffineLanes() { return hn::Lanes(hn::ScalableTag<float>()); }

template <bool kRelu>
HWY_INLINE void Affine(const float* HWY_RESTRICT x, float* HWY_RESTRICT y, size_t n, const float* s, const float* t) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto vs = hn::LoadU(d, s), vt = hn::LoadU(d, t), zero = hn::Zero(d);
  for (size_t i = 0; i < n; i += N) {
    auto v = hn::Add(hn::Mul(hn::LoadU(d, x + i), vs), vt);
    if constexpr (kRelu) v = hn::IfThenElse(hn::Lt(v, zero), zero, v);  // max(v, 0): NaN stays NaN
    hn::StoreU(v, d, y + i);
  }
}

void ChannelAffine(const float* x, float* y, size_t n, const float* s, const float* t, bool relu) {
  if (relu) return Affine<true>(x, y, n, s, t);
  Affine<false>(x, y, n, s, t);
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace opfuse::hwy_cpu {
HWY_EXPORT(ChannelAffineLanes);
HWY_EXPORT(ChannelAffine);

size_t channel_affine_lanes() { return HWY_DYNAMIC_DISPATCH(ChannelAffineLanes)(); }

void channel_affine(const float* x, float* y, size_t n, const float* s, const float* t, bool relu) {
  HWY_DYNAMIC_DISPATCH(ChannelAffine)(x, y, n, s, t, relu);
}
}  // namespace opfuse::hwy_cpu
#endif  // HWY_ONCE
