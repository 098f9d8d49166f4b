#ifndef OPFUSE_KERNELS_CPU_HWY_CHANNEL_SCALE_DECLS_
#define OPFUSE_KERNELS_CPU_HWY_CHANNEL_SCALE_DECLS_
#include "kernels/cpu/hwy_channel_scale.h"
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/hwy_channel_scale.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void ScaleChannelSegments(const ChannelSegment* segments, size_t count, const float* s, const float* src,
                          float* dst) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  for (const ChannelSegment* g = segments; g != segments + count; ++g) {
    const size_t n = static_cast<size_t>(g->length);
    size_t k = 0;
    if (g->step == 0) {
      const float f = g->channel < 0 ? 0.0f : s[g->channel];
      const auto vf = hn::Set(d, f);
      for (; k + lanes <= n; k += lanes) hn::StoreU(hn::Mul(hn::LoadU(d, src + k), vf), d, dst + k);
      for (; k < n; ++k) dst[k] = src[k] * f;
    } else {
      const float* f = s + g->channel;
      for (; k + lanes <= n; k += lanes) {
        hn::StoreU(hn::Mul(hn::LoadU(d, src + k), hn::LoadU(d, f + k)), d, dst + k);
      }
      for (; k < n; ++k) dst[k] = src[k] * f[k];
    }
    src += n;
    dst += n;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace opfuse::hwy_cpu {
HWY_EXPORT(ScaleChannelSegments);

void scale_channel_segments(std::span<const ChannelSegment> segments, const float* s, const float* src,
                            float* dst) {
  HWY_DYNAMIC_DISPATCH(ScaleChannelSegments)(segments.data(), segments.size(), s, src, dst);
}

}  // namespace opfuse::hwy_cpu
#endif  // HWY_ONCE
