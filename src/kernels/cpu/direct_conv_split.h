// How the direct convolutions on the blocked layout (cpu.conv, direct_conv_kernel.cc; cpu.conv_i16,
// quantized_conv_kernel.cc) cut their work: one loop order (oneDNN's), whatever the arithmetic;
// and the zero-bordered copy of X that cpu.conv and cpu.winograd read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace opfuse {

struct DirectConvSplit {
  // Input blocks per run over a band of rows (the rest accumulate in Y between runs).
  int64_t run_groups = 1;
  // Output rows a thread takes at once.
  int64_t band_rows = 1;
  // (first column, width) of each tile of an output row: nearly equal widths of at most the tile's.
  std::vector<int64_t> row_tiles;
  // Each tap's offset from an output pixel's input, in elements of a zero-bordered image
  // `padded_width` pixels wide with `block` channels per pixel.
  std::vector<size_t> taps;
};

// `groups` input blocks whose weights take `group_weight_bytes` each for one panel of output
// blocks; an output of `oh` x `ow` pixels in tiles of at most `tile_pixels`; a kh x kw window
// dilated by dh, dw.
// Row `row` (input block row / copy_h, row row % copy_h) of a zero-bordered copy of X, an image of
// [blocks][h][w][block] floats placed at (top, left) in a copy of copy_h x copy_w pixels.
void copy_zero_bordered_row(const float* x, float* copy, int64_t row, int64_t h, int64_t w, int64_t top,
                            int64_t left, int64_t copy_h, int64_t copy_w, int64_t block);

DirectConvSplit direct_conv_split(int64_t groups, int64_t group_weight_bytes, int64_t oh, int64_t ow,
                                  int64_t tile_pixels, int64_t kh, int64_t kw, int64_t dh, int64_t dw,
                                  int64_t padded_width, int64_t block);

}  // namespace opfuse
