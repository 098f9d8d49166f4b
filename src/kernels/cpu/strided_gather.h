// Copies a strided (broadcast) view of a tensor into a contiguous buffer: the elements of flat
// output positions [start, start + n) of an iteration space `dims`, where the element at
// coordinates c is read at base + sum(c[k] * strides[k]) (stride 0 on broadcast dims). Shared by
// the elementwise kernel and the generated-kernel executor for operands that cannot be read in
// place.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace opfuse {

// `at(i)` reads element i of the source as float; `contiguous` is the same source as a float
// array when it is one (runs of stride 1 are then copied with memcpy), else null. `index` is
// scratch for the coordinates.
template <typename At>
void gather_strided(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, int64_t base,
                    int64_t start, int64_t n, float* dst, std::vector<int64_t>& index, At at,
                    const float* contiguous) {
  const size_t rank = dims.size();
  index.assign(rank, 0);
  int64_t offset = base, rem = start;
  for (size_t k = rank; k-- > 0;) {
    index[k] = rem % dims[k];
    rem /= dims[k];
    offset += index[k] * strides[k];
  }
  const int64_t inner = dims[rank - 1], stride = strides[rank - 1];
  while (n > 0) {
    const int64_t run = std::min(inner - index[rank - 1], n);
    if (stride == 0) {
      std::fill(dst, dst + run, at(offset));
    } else if (stride == 1 && contiguous != nullptr) {
      // A memcpy call per run of a few floats (a detector's boxes sliced into pairs) costs more
      // than the copy.
      if (run > 8) {
        std::memcpy(dst, contiguous + offset, static_cast<size_t>(run) * sizeof(float));
      } else {
        for (int64_t i = 0; i < run; ++i) dst[i] = contiguous[offset + i];
      }
    } else if (contiguous != nullptr && (stride >= 16 || stride <= -16)) {
      // Each element on its own cache line, the next of which is read some rows later (a
      // transposed read): the hardware prefetcher does not follow such strides, so fetch it now.
      for (int64_t i = 0; i < run; ++i) {
        __builtin_prefetch(contiguous + offset + i * stride + 16);
        dst[i] = contiguous[offset + i * stride];
      }
    } else {
      for (int64_t i = 0; i < run; ++i) dst[i] = at(offset + i * stride);
    }
    dst += run;
    n -= run;
    offset += run * stride;
    index[rank - 1] += run;
    if (index[rank - 1] < inner) continue;
    index[rank - 1] = 0;
    offset -= inner * stride;
    for (size_t k = rank - 1; k-- > 0;) {
      offset += strides[k];
      if (++index[k] < dims[k]) break;
      offset -= dims[k] * strides[k];
      index[k] = 0;
    }
  }
}

}  // namespace opfuse
