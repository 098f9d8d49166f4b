#include "kernels/cpu/direct_conv_split.h"

#include <algorithm>
#include <cstring>

#include "core/target.h"

namespace opfuse {

DirectConvSplit direct_conv_split(int64_t groups, int64_t group_weight_bytes, int64_t oh, int64_t ow,
                                  int64_t tile_pixels, int64_t kh, int64_t kw, int64_t dh, int64_t dw,
                                  int64_t padded_width, int64_t block) {
  const auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  DirectConvSplit s;
  // Input blocks per run over a band: their weights fill three quarters of L1, so the band's
  // tiles read them from there and the band's outputs stay in L1 in between (with every input
  // block in one run the panel's weights came from L2 for every tile: ResNet-50's 3x3 convs took
  // about 1.2x as long; half of L1, one 8-channel block per run on AVX2, was about 10% slower
  // than two on one core).
  const int64_t l1 = active_target().l1d_bytes > 0 ? active_target().l1d_bytes : 32 * 1024;
  s.run_groups = std::clamp<int64_t>(l1 * 3 / 4 / std::max<int64_t>(group_weight_bytes, 1), 1, groups);
  // Rows per band: enough pixels (about 32) for the run's weights to be read from L1 many times,
  // so a 7x7 map takes the band of 5 rows, a 56-wide one a single row.
  s.band_rows = std::clamp<int64_t>(ceil_div(32, ow), 1, oh);
  const int64_t tiles = ceil_div(ow, tile_pixels);
  for (int64_t i = 0, ox = 0; i < tiles; ++i) {
    const int64_t cols = ow / tiles + (i < ow % tiles ? 1 : 0);
    s.row_tiles.push_back(ox);
    s.row_tiles.push_back(cols);
    ox += cols;
  }
  for (int64_t ky = 0; ky < kh; ++ky) {
    for (int64_t kx = 0; kx < kw; ++kx) s.taps.push_back(static_cast<size_t>((ky * dh * padded_width + kx * dw) * block));
  }
  return s;
}

void copy_zero_bordered_row(const float* x, float* copy, int64_t row, int64_t h, int64_t w, int64_t top,
                            int64_t left, int64_t copy_h, int64_t copy_w, int64_t block) {
  const int64_t g = row / copy_h, iy = row % copy_h - top;
  float* dst = copy + row * copy_w * block;
  if (iy < 0 || iy >= h) {
    std::memset(dst, 0, static_cast<size_t>(copy_w * block) * sizeof(float));
    return;
  }
  const int64_t right = copy_w - left - w;
  std::memset(dst, 0, static_cast<size_t>(left * block) * sizeof(float));
  std::memcpy(dst + left * block, x + (g * h + iy) * w * block, static_cast<size_t>(w * block) * sizeof(float));
  std::memset(dst + (left + w) * block, 0, static_cast<size_t>(right * block) * sizeof(float));
}

}  // namespace opfuse
