// Constant weights packed by our own kernels into aligned arrays (cpu.gemm's and cpu.gemv's
// panels, cpu.conv's, cpu.winograd's and cpu.dwconv's filters, cpu.gemm_i16's and cpu.conv_i16's
// int16 panels, cpu.rnn's W, R, biases and peepholes), made once per session for equal weights
// packed alike (kernels/packed_weight_cache.h).
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "hwy/aligned_allocator.h"
#include "kernels/packed_weight_cache.h"

namespace opfuse {

template <typename T>
using PackedArray = std::shared_ptr<const hwy::AlignedFreeUniquePtr<T[]>>;
using PackedFloats = PackedArray<float>;

// `count` aligned Ts, zeroed, then written by `fill` from `source`: the packing described by
// `how`, which names the kernel and every parameter the packed values depend on besides
// `source`'s bytes (a weight zero point, say).
template <typename T>
PackedArray<T> pack_aligned(const Tensor& source, const std::string& how, size_t count,
                            const std::function<void(T*)>& fill) {
  return packed_once<hwy::AlignedFreeUniquePtr<T[]>>(source.raw_data(), source.nbytes(), how, [&] {
    auto packed = hwy::AllocateAligned<T>(std::max<size_t>(count, 1));
    std::fill_n(packed.get(), std::max<size_t>(count, 1), T{0});
    fill(packed.get());
    return std::make_shared<const hwy::AlignedFreeUniquePtr<T[]>>(std::move(packed));
  });
}

inline PackedFloats pack_floats(const Tensor& source, const std::string& how, size_t floats,
                                const std::function<void(float*)>& fill) {
  return pack_aligned<float>(source, how, floats, fill);
}

}  // namespace opfuse
