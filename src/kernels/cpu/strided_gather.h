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
  // Whole rows read again along the next dim (stride 0 there): a per-channel vector broadcast
  // over the pixels of a channel-blocked tensor, [C / 16, H * W, 16] with strides [16, 0, 1].
  const bool rows_repeat = stride == 1 && contiguous != nullptr && rank >= 2 && strides[rank - 2] == 0;
  while (n > 0) {
    const int64_t run = std::min(inner - index[rank - 1], n);
    const int64_t rows = rows_repeat && index[rank - 1] == 0 ? std::min(dims[rank - 2] - index[rank - 2], n / inner) : 0;
    if (rows >= 2) {
      // One copy of the row, then doubling copies within dst: a memcpy of 16 floats per pixel
      // cost more than the multiply it fed (a 7x7x960 SE scale: 19-22 us).
      std::memcpy(dst, contiguous + offset, static_cast<size_t>(inner) * sizeof(float));
      for (int64_t done = 1; done < rows;) {
        const int64_t more = std::min(done, rows - done);
        std::memcpy(dst + done * inner, dst, static_cast<size_t>(more * inner) * sizeof(float));
        done += more;
      }
      dst += rows * inner;
      n -= rows * inner;
      index[rank - 2] += rows;  // the offset stays: the rows' dim has stride 0
      if (index[rank - 2] < dims[rank - 2]) continue;
      index[rank - 2] = 0;
      for (size_t k = rank - 2; k-- > 0;) {
        offset += strides[k];
        if (++index[k] < dims[k]) break;
        offset -= dims[k] * strides[k];
        index[k] = 0;
      }
      continue;
    }
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
