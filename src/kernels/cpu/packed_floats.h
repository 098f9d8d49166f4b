// Constant weights packed by our own kernels into aligned floats (cpu.gemm's and cpu.gemv's
// panels, cpu.conv's, cpu.winograd's transformed filters), made once per session for equal
// weights packed alike (kernels/packed_weight_cache.h).
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "hwy/aligned_allocator.h"
#include "kernels/packed_weight_cache.h"

namespace opfuse {

using PackedFloats = std::shared_ptr<const hwy::AlignedFreeUniquePtr<float[]>>;

// `floats` aligned floats, zeroed, then written by `fill` from `source`: the packing described
// by `how`, which names the kernel and every parameter the packed floats depend on besides
// `source`'s bytes.
inline PackedFloats pack_floats(const Tensor& source, const std::string& how, size_t floats,
                                const std::function<void(float*)>& fill) {
  return packed_once<hwy::AlignedFreeUniquePtr<float[]>>(source.raw_data(), source.nbytes(), how, [&] {
    auto packed = hwy::AllocateAligned<float>(floats);
    std::fill_n(packed.get(), floats, 0.0f);
    fill(packed.get());
    return std::make_shared<const hwy::AlignedFreeUniquePtr<float[]>>(std::move(packed));
  });
}

}  // namespace opfuse
