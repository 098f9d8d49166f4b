// Winograd's F(2x2, 3x3) transforms over the tiles of a chunk, per Highway target, for any lane
// type: cpu.winograd in floats (winograd_conv_kernel.cc) and cpu.conv_i16's exact integer form
// (quantized_conv_kernel.cc). The algebra is Lavin and Gray's (interpolation points 0, 1, -1):
// additions and subtractions only, so integers stay exact. Included once per target by
// foreach_target.h, hence the toggling include guard.
#if defined(OPFUSE_KERNELS_CPU_WINOGRAD_TILES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef OPFUSE_KERNELS_CPU_WINOGRAD_TILES_INL_H_
#undef OPFUSE_KERNELS_CPU_WINOGRAD_TILES_INL_H_
#else
#define OPFUSE_KERNELS_CPU_WINOGRAD_TILES_INL_H_
#endif

#include <cstddef>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// B^T's rows applied to four values of a column or row of a 4x4 input patch.
template <class V>
HWY_INLINE void WinogradInputRows(V d0, V d1, V d2, V d3, V* out) {
  out[0] = hn::Sub(d0, d2);
  out[1] = hn::Add(d1, d2);
  out[2] = hn::Sub(d2, d1);
  out[3] = hn::Sub(d1, d3);
}

// A^T's rows applied to four values: the sums giving output 0 and output 1.
template <class V>
HWY_INLINE void WinogradOutputRows(V m0, V m1, V m2, V m3, V& o0, V& o1) {
  o0 = hn::Add(hn::Add(m0, m1), m2);
  o1 = hn::Sub(hn::Sub(m1, m2), m3);
}

// V = B^T d B of one tile: p is its 4x4 input patch (`row` elements per patch row, one vector per
// pixel), out its place in V[0] (the 16 transformed vectors are xi_stride apart). `seen(e)` sees
// every transformed vector.
template <class D, class Seen>
HWY_INLINE void WinogradInputTile(D d, const hn::TFromD<D>* HWY_RESTRICT p, size_t row, hn::TFromD<D>* HWY_RESTRICT out,
                                  size_t xi_stride, Seen&& seen) {
  using V = hn::Vec<D>;
  const size_t lanes = hn::Lanes(d);
  V cols[4][4];  // B^T d: cols[i][j]
  for (size_t j = 0; j < 4; ++j) {
    V c[4];
    WinogradInputRows(hn::LoadU(d, p + j * lanes), hn::LoadU(d, p + row + j * lanes),
                      hn::LoadU(d, p + 2 * row + j * lanes), hn::LoadU(d, p + 3 * row + j * lanes), c);
    for (size_t i = 0; i < 4; ++i) cols[i][j] = c[i];
  }
  for (size_t i = 0; i < 4; ++i) {
    V e[4];
    WinogradInputRows(cols[i][0], cols[i][1], cols[i][2], cols[i][3], e);
    for (size_t j = 0; j < 4; ++j) {
      hn::StoreU(e[j], d, out + (4 * i + j) * xi_stride);
      seen(e[j]);
    }
  }
}

// V = B^T d B for every tile of `tile_rows` rows of `row_tiles` tiles and input blocks [first,
// last) of `groups`, each input block's tiles one vector apart: x is the image at the chunk's first
// row, bordered with the conv's padding (`row` elements per row, `group` per input block), v is
// [16][groups][tiles][lanes]. `seen(e)` sees every transformed vector.
template <class D, class Seen>
HWY_INLINE void WinogradInputTiles(D d, const hn::TFromD<D>* x, size_t row, size_t group, size_t groups,
                                   size_t first, size_t last, size_t tile_rows, size_t row_tiles,
                                   hn::TFromD<D>* v, Seen&& seen) {
  const size_t lanes = hn::Lanes(d), tiles = tile_rows * row_tiles, xi_stride = groups * tiles * lanes;
  for (size_t g = first; g < last; ++g) {
    for (size_t r = 0; r < tile_rows; ++r) {
      const hn::TFromD<D>* p = x + g * group + 2 * r * row;
      hn::TFromD<D>* out = v + (g * tiles + r * row_tiles) * lanes;
      for (size_t tx = 0; tx < row_tiles; ++tx, p += 2 * lanes, out += lanes) {
        WinogradInputTile(d, p, row, out, xi_stride, seen);
      }
    }
  }
}

// A^T M A for every tile and output blocks [first, last) of `blocks`: m is
// [16][blocks][tiles][lanes]; the outputs of a
// tile are rows 2r, 2r + 1 and columns 2tx, 2tx + 1 of the chunk (`height` rows of `width`
// pixels, so the last tiles may hang over). `block(k)` gives output block k's store (its
// constants loaded once), which `store(s, i, j)` finishes and stores the sum s at the chunk's
// row i, column j.
template <class D, class Block>
HWY_INLINE void WinogradOutputTiles(D d, const hn::TFromD<D>* m, size_t blocks, size_t first, size_t last,
                                    size_t tile_rows, size_t row_tiles, size_t height, size_t width, Block&& block) {
  using V = hn::Vec<D>;
  const size_t lanes = hn::Lanes(d), tiles = tile_rows * row_tiles, xi_stride = blocks * tiles * lanes;
  for (size_t k = first; k < last; ++k) {
    const auto store = block(k);
    for (size_t r = 0; r < tile_rows; ++r) {
      const hn::TFromD<D>* HWY_RESTRICT at = m + (k * tiles + r * row_tiles) * lanes;
      for (size_t tx = 0; tx < row_tiles; ++tx, at += lanes) {
        V s[2][4];  // A^T M: s[i][j]
        for (size_t j = 0; j < 4; ++j) {
          WinogradOutputRows(hn::LoadU(d, at + j * xi_stride), hn::LoadU(d, at + (4 + j) * xi_stride),
                             hn::LoadU(d, at + (8 + j) * xi_stride), hn::LoadU(d, at + (12 + j) * xi_stride),
                             s[0][j], s[1][j]);
        }
        for (size_t i = 0; i < 2 && 2 * r + i < height; ++i) {
          V o[2];
          WinogradOutputRows(s[i][0], s[i][1], s[i][2], s[i][3], o[0], o[1]);
          store(o[0], 2 * r + i, 2 * tx);
          if (2 * tx + 1 < width) store(o[1], 2 * r + i, 2 * tx + 1);
        }
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#endif  // include guard
