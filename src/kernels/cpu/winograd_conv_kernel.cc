// "cpu.winograd": F(2x2, 3x3) on the blocked layout (kernels/cpu/winograd_conv_kernel.h).
//
// With d a 4x4 patch of one input channel, g its 3x3 filter and Y the 2x2 outputs the patch
// gives, Y = A^T [(G g G^T) . (B^T d B)] A, where . multiplies elementwise (Lavin and Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2015). Summed over the input channels, each of
// the 16 elementwise positions (xi) is a product of the tiles' transformed inputs V[xi]
// (tiles x C) by the transformed filters U[xi] (C x M), packed once at compile time.
//
// Stride 2: the 2x2 outputs of a tile read a 5x5 patch. Along one side, outputs y0 and y1 read
// x0..x2 and x2..x4: the even inputs x0, x2, x4 meet the taps g0 and g2, an F(2, 2) of 3
// multiplies (g0 (x0 - x2), (g0 + g2) x2, g2 (x4 - x2)), the odd ones x1 and x3 meet g1, one
// multiply each: 5 positions per side instead of 6 multiply-adds, 25 per tile instead of 36, with
// additions only around them. Positions 3 and 4 of a side share their filter (g1), so their
// products run as one over twice the tiles: 16 filters either way (class_positions).
//
// Layout: X and Y are [C/b, H, W, b] per image with b one vector. V's class is [C/b][tiles][b]
// (times its positions): a "row" of tiles whose pixels are one vector apart, so cpu.conv's
// register tile (direct_conv_kernel.h, ConvRow) computes each product with one tap and pixel
// stride b; its output M is [M/b][tiles][b]. The output transform then reads a tile's M vectors
// and writes its 2x2 pixels, bias added, and the epilogue runs over those rows while they are in
// L2. X is read in place; tiles over its border read a zero-filled copy of their patch.
//
// Work: a thread takes a chunk of tile rows of one image (dynamically: the host is shared), with
// V and M of the chunk sized to half of L2, and does the three steps on it; the transformed
// filters (16 x C x M floats) are read once per chunk. Where chunks would be many and the image
// small (ResNet-50's 7x7 maps), the image is one chunk instead: the threads transform its input
// blocks, then split the products and output transforms by panels of output blocks, so each
// reads only its panels' filters, once (plan_of). A chunk whose transformed inputs are not all
// finite goes to cpu.conv's loop instead (see the header).
#ifndef OPFUSE_KERNELS_CPU_WINOGRAD_CONV_KERNEL_DECLS_
#define OPFUSE_KERNELS_CPU_WINOGRAD_CONV_KERNEL_DECLS_
#include <omp.h>

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "hwy/aligned_allocator.h"
#include "kernels/cpu/blocked_conv_operands.h"
#include "kernels/cpu/direct_conv_kernel.h"
#include "kernels/cpu/direct_conv_split.h"
#include "kernels/cpu/hwy_epilogue.h"
#include "kernels/cpu/hwy_kernels.h"
#include "kernels/cpu/onednn_conv.h"
#include "kernels/cpu/packed_floats.h"
#include "kernels/target_caps.h"
#include "ops/op_def.h"

namespace opfuse::hwy_cpu {
// The products of a tile. At stride 1, F(2x2, 3x3) transforms a 4x4 patch into 16 positions, each
// its own product. At stride 2, a 5x5 patch into 25 (see the file comment), whose positions 3 and
// 4 of a side share their filters' row or column: positions with equal filters make one product
// (a class) over 2 or 4 times the tiles, 16 classes either way. V and M are [class][blocks][its
// positions x tiles][b]; class k = 4 ci + cj, ci and cj the class coordinates of its sides.
constexpr size_t kClasses = 16;
constexpr size_t class_of(size_t i) { return i < 3 ? i : 3; }  // a side's position -> class coordinate
constexpr size_t class_side(size_t stride, size_t c) { return stride == 2 && c == 3 ? 2 : 1; }
constexpr size_t class_positions(size_t stride, size_t k) { return class_side(stride, k / 4) * class_side(stride, k % 4); }
// Positions in the classes before class k (V's and M's class k starts that many tile sets in).
constexpr size_t class_start(size_t stride, size_t k) {
  size_t n = 0;
  for (size_t j = 0; j < k; ++j) n += class_positions(stride, j);
  return n;
}
// Position (i, j)'s index among its class's positions.
constexpr size_t class_index(size_t stride, size_t i, size_t j) {
  return (i < 4 ? 0 : 1) * class_side(stride, class_of(j)) + (j < 4 ? 0 : 1);
}
// Position (i, j) of a patch side's positions for block `g` of `blocks`, in a V or M of `tiles`
// tiles: the offset in floats of its tile 0.
inline size_t position_offset(size_t stride, size_t i, size_t j, size_t g, size_t blocks, size_t tiles, size_t lanes) {
  const size_t k = 4 * class_of(i) + class_of(j), n = class_positions(stride, k);
  return (class_start(stride, k) * blocks * tiles + (g * n + class_index(stride, i, j)) * tiles) * lanes;
}

// The input transform of a chunk of tile rows: V = B^T d B for every tile and input block, X
// read in place (tiles over the border through a zero-filled copy of their patch).
struct WinogradInput {
  size_t stride;         // 1 or 2
  const float* x;        // the image, input block 0
  size_t h, w;           // its rows and columns
  size_t top, left;      // the conv's padding before them
  size_t groups;         // input blocks
  size_t first, last;    // the input blocks transformed: [first, last)
  size_t ty0;            // the chunk's first tile row
  size_t tile_rows;      // tile rows in the chunk
  size_t row_tiles;      // tiles per tile row (output width / 2)
  float* v;              // [class][groups][positions x tiles][b]
};

// The output transform: Y = A^T M A + bias for every tile and output block.
struct WinogradOutput {
  size_t stride;         // 1 or 2
  const float* m;        // [class][blocks][positions x tiles][b]
  size_t blocks;         // output blocks
  size_t first, last;    // the output blocks transformed: [first, last)
  size_t tile_rows, row_tiles;
  size_t height, width;  // output rows of the chunk and pixels per row: the last tile may hang over
  const float* bias;     // blocks x b floats
  float* y;              // the output image at the chunk's first row, output block 0
  size_t row;            // floats per output row
  size_t group;          // floats per output block of the image
};
}  // namespace opfuse::hwy_cpu
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/winograd_conv_kernel.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/winograd_tiles-inl.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// B^T on a patch side: F(2, 3)'s on 4 values; the stride-2 form's on 5, (x0 - x2, x2, x4 - x2,
// x1, x3): the even inputs' F(2, 2) with the taps g0 and g2, then the odd inputs g1 multiplies.
template <size_t kStride>
HWY_INLINE void InputSide(const VF* x, VF* out) {
  if constexpr (kStride == 1) {
    WinogradInputRows(x[0], x[1], x[2], x[3], out);
  } else {
    out[0] = hn::Sub(x[0], x[2]);
    out[1] = x[2];
    out[2] = hn::Sub(x[4], x[2]);
    out[3] = x[1];
    out[4] = x[3];
  }
}

// A^T on a side of M: output 0 and output 1.
template <size_t kStride>
HWY_INLINE void OutputSide(const VF* m, VF& o0, VF& o1) {
  if constexpr (kStride == 1) {
    WinogradOutputRows(m[0], m[1], m[2], m[3], o0, o1);
  } else {
    o0 = hn::Add(hn::Add(m[0], m[1]), m[3]);
    o1 = hn::Add(hn::Add(m[1], m[2]), m[4]);
  }
}

// False when a transformed value is not finite (then x * 0 is NaN and the sum of them too).
template <size_t kStride>
bool InputTiles(const WinogradInput& t) {
  constexpr size_t kPatch = kStride == 1 ? 4 : 5;
  const DF d;
  const size_t lanes = hn::Lanes(d), row = t.w * lanes, tiles = t.tile_rows * t.row_tiles;
  const VF zero = hn::Zero(d);
  VF finite = zero;
  HWY_ALIGN float patch[kPatch * kPatch * hn::MaxLanes(d)];
  size_t at[kPatch][kPatch];
  for (size_t g = t.first; g < t.last; ++g) {
    for (size_t i = 0; i < kPatch; ++i) {
      for (size_t j = 0; j < kPatch; ++j) at[i][j] = position_offset(kStride, i, j, g, t.groups, tiles, lanes);
    }
    const float* image = t.x + g * t.h * row;
    for (size_t r = 0; r < t.tile_rows; ++r) {
      // The tile's patch starts at (iy, ix) of the padded image: (iy - top, ix - left) of X.
      const size_t iy = 2 * kStride * (t.ty0 + r);
      const bool rows_inside = iy >= t.top && iy + kPatch <= t.top + t.h;
      for (size_t tx = 0; tx < t.row_tiles; ++tx) {
        const size_t ix = 2 * kStride * tx, tile = (r * t.row_tiles + tx) * lanes;
        const float* p = patch;
        size_t p_row = kPatch * lanes;
        if (rows_inside && ix >= t.left && ix + kPatch <= t.left + t.w) {
          p = image + ((iy - t.top) * t.w + ix - t.left) * lanes;
          p_row = row;
        } else {
          for (size_t i = 0; i < kPatch; ++i) {
            for (size_t j = 0; j < kPatch; ++j) {
              const bool inside = iy + i >= t.top && iy + i < t.top + t.h && ix + j >= t.left && ix + j < t.left + t.w;
              const VF pixel = inside ? hn::LoadU(d, image + ((iy + i - t.top) * t.w + ix + j - t.left) * lanes) : zero;
              hn::Store(pixel, d, patch + (kPatch * i + j) * lanes);
            }
          }
        }
        VF cols[kPatch][kPatch];  // B^T d: cols[i][j]
        for (size_t j = 0; j < kPatch; ++j) {
          VF in[kPatch], c[kPatch];
          for (size_t i = 0; i < kPatch; ++i) in[i] = hn::LoadU(d, p + i * p_row + j * lanes);
          InputSide<kStride>(in, c);
          for (size_t i = 0; i < kPatch; ++i) cols[i][j] = c[i];
        }
        for (size_t i = 0; i < kPatch; ++i) {
          VF e[kPatch];
          InputSide<kStride>(cols[i], e);
          for (size_t j = 0; j < kPatch; ++j) {
            hn::StoreU(e[j], d, t.v + at[i][j] + tile);
            finite = hn::MulAdd(e[j], zero, finite);
          }
        }
      }
    }
  }
  return hn::AllTrue(d, hn::Eq(finite, zero));
}

bool WinogradInputTransform(const WinogradInput& t) {
  return t.stride == 1 ? InputTiles<1>(t) : InputTiles<2>(t);
}

// Y = A^T M A + bias; the outputs of a tile are rows 2r, 2r + 1 and columns 2tx, 2tx + 1 of the
// chunk, the last tiles hanging over its height and width.
template <size_t kStride>
void OutputTiles(const WinogradOutput& t) {
  constexpr size_t kPatch = kStride == 1 ? 4 : 5;
  const DF d;
  const size_t lanes = hn::Lanes(d), tiles = t.tile_rows * t.row_tiles;
  size_t at[kPatch][kPatch];
  for (size_t k = t.first; k < t.last; ++k) {
    for (size_t i = 0; i < kPatch; ++i) {
      for (size_t j = 0; j < kPatch; ++j) at[i][j] = position_offset(kStride, i, j, k, t.blocks, tiles, lanes);
    }
    const VF bias = hn::LoadU(d, t.bias + k * lanes);
    float* y = t.y + k * t.group;
    for (size_t r = 0; r < t.tile_rows; ++r) {
      for (size_t tx = 0; tx < t.row_tiles; ++tx) {
        const size_t tile = (r * t.row_tiles + tx) * lanes;
        VF s[2][kPatch];  // A^T M: s[i][j]
        for (size_t j = 0; j < kPatch; ++j) {
          VF col[kPatch];
          for (size_t i = 0; i < kPatch; ++i) col[i] = hn::LoadU(d, t.m + at[i][j] + tile);
          OutputSide<kStride>(col, s[0][j], s[1][j]);
        }
        for (size_t i = 0; i < 2 && 2 * r + i < t.height; ++i) {
          VF o0, o1;
          OutputSide<kStride>(s[i], o0, o1);
          float* out = y + (2 * r + i) * t.row + 2 * tx * lanes;
          hn::StoreU(hn::Add(o0, bias), d, out);
          if (2 * tx + 1 < t.width) hn::StoreU(hn::Add(o1, bias), d, out + lanes);
        }
      }
    }
  }
}

void WinogradOutputTransform(const WinogradOutput& t) {
  if (t.stride == 1) return OutputTiles<1>(t);
  OutputTiles<2>(t);
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace opfuse {
namespace hwy_cpu {
HWY_EXPORT(WinogradInputTransform);
HWY_EXPORT(WinogradOutputTransform);
}  // namespace hwy_cpu

namespace {

using Dims = std::vector<int64_t>;

using hwy_cpu::class_positions;
using hwy_cpu::class_start;
using hwy_cpu::kClasses;

// Positions of a transformed tile, in all classes: 16 at stride 1, 25 at stride 2.
int64_t tile_positions(int64_t stride) { return static_cast<int64_t>(class_start(static_cast<size_t>(stride), kClasses)); }

// A chunk reads all the transformed filters (16 classes x C x M floats) once for its tiles: below this
// many tiles per chunk, filters larger than half of L2 cost more to stream than the multiplies
// saved. Measured on a Zen 3 (AVX2, 2 threads), ResNet-50's convs against cpu.conv: 512 -> 512
// channels at 7x7 (4 tiles per chunk, 16 MB of filters) 1.7-2.2x its time; 256 -> 256 at 14x14
// (7 tiles, 4 MB) 0.72x. Such convs run split by panels instead; an image of fewer tiles is
// declined.
constexpr int64_t kMinChunkTiles = 6;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Plan {
  int64_t n = 0, c = 0, h = 0, w = 0, m = 0, oh = 0, ow = 0, pt = 0, pl = 0, lanes = 0;
  int64_t stride = 1;  // the conv's stride, 1 or 2 (the same on both sides)
  int64_t tile_rows = 0, row_tiles = 0, chunk_rows = 1;  // tiles: 2x2 outputs each
  int64_t blocks = 2;      // output blocks per panel of the products
  bool by_panels = false;  // the whole image as one chunk, threads splitting its panels
  BlockedConvOperands operands;
};

std::optional<Plan> plan_of(const KernelCompileContext& ctx) {
  auto in = blocked_conv_operands(ctx);
  if (!in || in->w[2] != 3 || in->w[3] != 3) return std::nullopt;
  const std::vector<int64_t>&x = in->x, &w = in->w, &y = in->y;
  const auto g = onednn::conv_geometry_for(ctx, Dims{x[0], w[1], x[2], x[3]}, Dims{y[0], w[0], y[2], y[3]}, false);
  if (!g || g->x.size() != 4 || g->strides[0] != g->strides[1] || g->strides[0] < 1 || g->strides[0] > 2 ||
      g->dilations[0] != 0 || g->dilations[1] != 0) {
    return std::nullopt;
  }
  Plan p;
  p.stride = g->strides[0];
  p.n = x[0], p.c = w[1], p.h = x[2], p.w = x[3], p.m = w[0], p.oh = y[2], p.ow = y[3], p.lanes = x[4];
  p.pt = g->pad_l[0], p.pl = g->pad_l[1];
  p.tile_rows = ceil_div(p.oh, 2);
  p.row_tiles = ceil_div(p.ow, 2);
  // Tile rows per chunk: its V and M (16 or 25 floats per tile and channel) in half of L2, and at least
  // two chunks per thread where there are enough rows (chunks are whole tile rows).
  const int64_t b = p.lanes, groups = ceil_div(p.c, b), out_blocks = ceil_div(p.m, b);
  const int64_t l2 = active_target().l2_bytes > 0 ? active_target().l2_bytes : 512 * 1024;
  const int64_t threads = std::max(1, omp_get_max_threads());
  const int64_t positions = tile_positions(p.stride);
  const int64_t row_bytes = positions * p.row_tiles * (groups + out_blocks) * b * 4;
  const int64_t spread = ceil_div(p.tile_rows, 2 * threads);
  p.chunk_rows = std::clamp<int64_t>(std::min(l2 / 2 / row_bytes, spread), 1, p.tile_rows);
  p.blocks = out_blocks % 4 == 0 ? 4 : 2;  // as cpu.conv's panels (it takes only an even count)
  // Chunks read all transformed filters each. Split by panels, each thread reads its panels'
  // filters once, but V and M are the whole image's, and the threads' halves of V cross between
  // them: only where those fit in L2, or where chunks would be small and the filters large, the
  // case Winograd loses in chunks. Measured on a Zen 5 (2 threads whose cores are 450 ns apart,
  // in-model medians): ResNet-50's 512 -> 512 at 7x7 (16 tiles, V and M 1 MB) by panels 665 us
  // against 750-763 for brgconv; YOLOv5s's 256 -> 256 at 20x20 (V and M 3.3 MB) 967-1061 against
  // 926-962 in chunks, though chunks read 2.4x the bytes.
  const int64_t tiles = p.tile_rows * p.row_tiles, panels = out_blocks / p.blocks;
  const int64_t filter_bytes = static_cast<int64_t>(kClasses) * groups * out_blocks * b * b * 4;
  const int64_t image_bytes = positions * tiles * (groups + out_blocks) * b * 4;  // V and M
  const bool small_chunks = p.chunk_rows * p.row_tiles < kMinChunkTiles && filter_bytes > l2 / 2;
  const bool panels_fit = panels >= threads && tiles >= kMinChunkTiles && (small_chunks || image_bytes <= l2);
  // Small chunks with large filters run by panels, or are declined: too few tiles or panels, or at
  // stride 2, whose 25 products per tile save too little there (ResNet-50's 512 -> 512 from 14x14
  // to 7x7, `WinogradBench`: 849 us by panels against 772 for oneDNN's blocked conv).
  if (small_chunks && (!panels_fit || p.stride == 2)) return std::nullopt;
  p.by_panels = panels_fit && (small_chunks || ceil_div(p.tile_rows, p.chunk_rows) > threads);
  if (p.by_panels) p.chunk_rows = p.tile_rows;
  p.operands = std::move(*in);
  return p;
}

class WinogradConvKernel final : public Kernel {
 public:
  WinogradConvKernel(const Plan& p, std::unique_ptr<DirectConvRows> direct)
      : p_(p), direct_(std::move(direct)), epilogue_(*hwy_cpu::vector_epilogue(p.operands.epilogue)) {
    const int64_t b = p_.lanes;
    groups_ = ceil_div(p_.c, b);
    out_blocks_ = ceil_div(p_.m, b);
    blocks_ = p_.blocks;
    panels_ = out_blocks_ / blocks_;
    row_tiles_ = p_.row_tiles;
    tile_rows_ = p_.tile_rows;
    chunk_rows_ = p_.chunk_rows;
    // cpu.conv's loop (for inputs that are not all finite) reads the image bordered with the
    // padding, as far as the window of the tiles' last outputs reaches: X itself when that is its
    // size (unpadded, even output), else a zero-bordered copy made then.
    src_h_ = (2 * tile_rows_ - 1) * p_.stride + 3;
    src_w_ = (2 * row_tiles_ - 1) * p_.stride + 3;
    copied_ = src_h_ != p_.h || src_w_ != p_.w || p_.pt != 0 || p_.pl != 0;
    pack_filters();
    bias_.assign(static_cast<size_t>(out_blocks_ * b), 0.0f);
    if (p_.operands.bias != nullptr) std::copy_n(p_.operands.bias->data<float>(), p_.m, bias_.begin());
    const int64_t mr = static_cast<int64_t>(hwy_cpu::conv_tile_pixels(static_cast<size_t>(blocks_)));
    const int64_t panel_group_bytes = b * blocks_ * b * 4;
    // The products' split for a full chunk and for the last, shorter one, for classes of 1, 2
    // and 4 positions: a run of input blocks whose filters fit in L1, the class's tiles as one row.
    for (const int64_t rows : {chunk_rows_, tile_rows_ % chunk_rows_}) {
      for (const int64_t positions : {1, 2, 4}) {
        const int64_t tiles = rows * row_tiles_ * positions;
        splits_.push_back(rows == 0 ? DirectConvSplit{}
                                    : direct_conv_split(groups_, panel_group_bytes, 1, tiles, mr, 1, 1, 1, 1, tiles, b));
      }
    }
  }

  std::string_view name() const override { return "cpu.winograd"; }
  // The weights and bias are packed at creation.
  bool reads_input(size_t i) const override { return i == 0 || (i == 3 && p_.operands.residual); }
  std::string implementation() const override {
    return str_cat(p_.stride == 1 ? "F(2x2,3x3) " : "F(2x2,3x3) stride 2 ", highway_dispatch_target(), ", ",
                   chunk_rows_ * row_tiles_, " tiles per chunk",
                   p_.by_panels ? " split by panels" : "");
  }

  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    const int64_t b = p_.lanes, x_image = groups_ * p_.h * p_.w * b;
    const int64_t y_image = out_blocks_ * b * p_.oh * p_.ow;
    const Tensor* xt = in.empty() ? nullptr : in[0];
    const Tensor* rt = p_.operands.residual && in.size() > 3 ? in[3] : nullptr;
    Tensor* yt = out.empty() ? nullptr : out[0];
    if (xt == nullptr || xt->dtype() != DType::kF32 || xt->numel() != p_.n * x_image || yt == nullptr ||
        yt->dtype() != DType::kF32 || yt->numel() != p_.n * y_image ||
        (p_.operands.residual && (rt == nullptr || rt->dtype() != DType::kF32 || rt->numel() != p_.n * y_image))) {
      return Status::internal_error("cpu.winograd: an operand does not have its planned shape");
    }
    const int64_t chunks = ceil_div(tile_rows_, chunk_rows_);
    const int64_t shares = p_.by_panels ? panels_ : chunks;
    const int threads = std::max<int>(1, std::min<int>(omp_get_max_threads(), static_cast<int>(shares)));
    for (int64_t image = 0; image < p_.n; ++image) {
      const float* x = xt->data<float>() + image * x_image;
      float* y = yt->data<float>() + image * y_image;
      const float* residual = rt != nullptr ? rt->data<float>() + image * y_image : nullptr;
      thread_local hwy::AlignedFreeUniquePtr<float[]> image_scratch;
      thread_local size_t image_capacity = 0;
      float* v = p_.by_panels ? scratch_for(tile_rows_, image_scratch, image_capacity) : nullptr;
      bool finite = true;
      float* bordered = copied_ && p_.by_panels ? bordered_buffer() : nullptr;
#pragma omp parallel num_threads(threads) if (threads > 1)
      {
        if (p_.by_panels) {
          run_by_panels(x, bordered, y, residual, v, finite);
        } else {
#pragma omp for schedule(dynamic, 1)
          for (int64_t chunk = 0; chunk < chunks; ++chunk) run_chunk(x, y, residual, chunk);
        }
      }
    }
    return Status::ok();
  }

 private:
  // U = G g G^T for each output and input channel and each class (ci, cj) of G's rows, packed as
  // cpu.conv's panels: [class][panel][input block][lane][panel's outputs], zero for padded
  // channels. Computed in double. G's rows: F(2, 3)'s (1, 0, 0), (1/2, 1/2, 1/2), (1/2, -1/2,
  // 1/2), (0, 0, 1); at stride 2 (g0, g0 + g2, g2) for the even inputs' F(2, 2), then g1.
  void pack_filters() {
    const int64_t b = p_.lanes, width = blocks_ * b, classes = static_cast<int64_t>(kClasses);
    const std::string how = str_cat("cpu.winograd m ", p_.m, " c ", p_.c, " stride ", p_.stride, " lanes ", b,
                                    " width ", width);
    filters_ = pack_floats(*p_.operands.weights, how, static_cast<size_t>(classes * panels_ * groups_ * b * width),
                           [&](float* filters) { transform_filters(filters); });
  }
  void transform_filters(float* filters) const {
    const int64_t b = p_.lanes, width = blocks_ * b;
    constexpr double kG1[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    constexpr double kG2[4][3] = {{1, 0, 0}, {1, 0, 1}, {0, 0, 1}, {0, 1, 0}};
    const auto& kG = p_.stride == 1 ? kG1 : kG2;
    const float* w = p_.operands.weights->data<float>();
    for (int64_t oc = 0; oc < p_.m; ++oc) {
      for (int64_t c = 0; c < p_.c; ++c) {
        const float* g = w + (oc * p_.c + c) * 9;
        double gg[4][3];  // G g
        for (int i = 0; i < 4; ++i) {
          for (int j = 0; j < 3; ++j) gg[i][j] = kG[i][0] * g[j] + kG[i][1] * g[3 + j] + kG[i][2] * g[6 + j];
        }
        const int64_t panel = oc / width, lane = c % b, group = c / b;
        for (int i = 0; i < 4; ++i) {
          for (int j = 0; j < 4; ++j) {
            const double u = gg[i][0] * kG[j][0] + gg[i][1] * kG[j][1] + gg[i][2] * kG[j][2];
            const int64_t k = 4 * i + j, at = (((k * panels_ + panel) * groups_ + group) * b + lane) * width;
            filters[at + oc % width] = static_cast<float>(u);
          }
        }
      }
    }
  }

  // The calling thread's buffer for X bordered with the padding (cpu.conv's loop reads it), kept
  // between runs.
  float* bordered_buffer() const {
    thread_local hwy::AlignedFreeUniquePtr<float[]> buffer;
    thread_local size_t capacity = 0;
    const size_t floats = static_cast<size_t>(groups_ * src_h_ * src_w_ * p_.lanes);
    if (capacity < floats) {
      buffer = hwy::AllocateAligned<float>(floats);
      capacity = floats;
    }
    return buffer.get();
  }

  // Rows [first, last) of the bordered image (counted over all input blocks) copied from X.
  void border_rows(const float* x, float* bordered, int64_t first, int64_t last) const {
    for (int64_t row = first; row < last; ++row) {
      copy_zero_bordered_row(x, bordered, row, p_.h, p_.w, p_.pt, p_.pl, src_h_, src_w_, p_.lanes);
    }
  }

  // Tile rows [chunk x chunk_rows_, ...) of one image: transform, 16 products, transform back,
  // epilogue; or cpu.conv's loop on its output rows when an input is not finite (on a bordered
  // copy of the image of this thread's own).
  void run_chunk(const float* x, float* y, const float* residual, int64_t chunk) const {
    const int64_t ty0 = chunk * chunk_rows_, rows = std::min(chunk_rows_, tile_rows_ - ty0);
    const int64_t out_rows = std::min(2 * rows, p_.oh - 2 * ty0);
    thread_local hwy::AlignedFreeUniquePtr<float[]> scratch;
    thread_local size_t capacity = 0;
    float* v = scratch_for(rows, scratch, capacity);
    float* m = v + v_floats(rows);
    if (!transform_inputs(x, ty0, rows, v, 0, groups_)) {
      // The loop reads the bordered rows its windows cover, of each input block.
      float* bordered = copied_ ? bordered_buffer() : nullptr;
      const int64_t first = 2 * ty0 * p_.stride, last = std::min(src_h_, (2 * ty0 + out_rows - 1) * p_.stride + 3);
      for (int64_t g = 0; bordered != nullptr && g < groups_; ++g) {
        border_rows(x, bordered, g * src_h_ + first, g * src_h_ + last);
      }
      direct_->run_rows(bordered != nullptr ? bordered : x, src_h_, src_w_, y, residual, 2 * ty0, 2 * ty0 + out_rows);
      return;
    }
    for (int64_t k = 0; k < static_cast<int64_t>(kClasses); ++k) {
      for (int64_t panel = 0; panel < panels_; ++panel) multiply(v, m, rows, k, panel);
    }
    transform_outputs(m, y, residual, ty0, rows, 0, out_blocks_);
  }

  // The whole image as one chunk, its products and output transforms split by panel of output
  // blocks: each thread reads its panels' transformed filters once (see plan_of). `bordered`: the
  // calling thread's buffer for cpu.conv's loop, where X is not bordered already.
  void run_by_panels(const float* x, float* bordered, float* y, const float* residual, float* v,
                     bool& finite) const {
#pragma omp for schedule(static)
    for (int64_t g = 0; g < groups_; ++g) {
      if (!transform_inputs(x, 0, tile_rows_, v, g, g + 1)) {
#pragma omp atomic write
        finite = false;
      }
    }
    bool all_finite = false;
#pragma omp atomic read
    all_finite = finite;
    if (!all_finite) {
      if (bordered != nullptr) {
#pragma omp for schedule(static)
        for (int64_t g = 0; g < groups_; ++g) border_rows(x, bordered, g * src_h_, (g + 1) * src_h_);
      }
      const int64_t step = ceil_div(p_.oh, omp_get_num_threads());
#pragma omp for schedule(static)
      for (int64_t r = 0; r < p_.oh; r += step) {
        direct_->run_rows(bordered != nullptr ? bordered : x, src_h_, src_w_, y, residual, r,
                          std::min(p_.oh, r + step));
      }
      return;
    }
    float* m = v + v_floats(tile_rows_);
#pragma omp for schedule(static)
    for (int64_t panel = 0; panel < panels_; ++panel) {
      for (int64_t k = 0; k < static_cast<int64_t>(kClasses); ++k) multiply(v, m, tile_rows_, k, panel);
      transform_outputs(m, y, residual, 0, tile_rows_, panel * blocks_, (panel + 1) * blocks_);
    }
  }

  int64_t v_floats(int64_t rows) const { return tile_positions(p_.stride) * groups_ * rows * row_tiles_ * p_.lanes; }
  int64_t m_floats(int64_t rows) const { return tile_positions(p_.stride) * out_blocks_ * rows * row_tiles_ * p_.lanes; }

  // V then M for a chunk of `rows` tile rows, in a buffer kept between runs.
  float* scratch_for(int64_t rows, hwy::AlignedFreeUniquePtr<float[]>& scratch, size_t& capacity) const {
    const size_t floats = static_cast<size_t>(v_floats(rows) + m_floats(rows));
    if (capacity < floats) {
      scratch = hwy::AllocateAligned<float>(floats);
      capacity = floats;
    }
    return scratch.get();
  }

  // V for input blocks [first, last) of the chunk at tile row ty0; false where one is not finite.
  bool transform_inputs(const float* x, int64_t ty0, int64_t rows, float* v, int64_t first, int64_t last) const {
    const hwy_cpu::WinogradInput input{static_cast<size_t>(p_.stride),
                                       x,
                                       static_cast<size_t>(p_.h),
                                       static_cast<size_t>(p_.w),
                                       static_cast<size_t>(p_.pt),
                                       static_cast<size_t>(p_.pl),
                                       static_cast<size_t>(groups_),
                                       static_cast<size_t>(first),
                                       static_cast<size_t>(last),
                                       static_cast<size_t>(ty0),
                                       static_cast<size_t>(rows),
                                       static_cast<size_t>(row_tiles_),
                                       v};
    return HWY_DYNAMIC_DISPATCH(hwy_cpu::WinogradInputTransform)(input);
  }

  // M of class k for one panel's output blocks: V's class k (its positions' tiles x C) by its U
  // (C x the panel's outputs).
  void multiply(const float* v, float* m, int64_t rows, int64_t k, int64_t panel) const {
    const size_t stride = static_cast<size_t>(p_.stride), kk = static_cast<size_t>(k);
    const int64_t positions = static_cast<int64_t>(class_positions(stride, kk));
    const int64_t start = static_cast<int64_t>(class_start(stride, kk));
    const int64_t b = p_.lanes, tiles = rows * row_tiles_, width = blocks_ * b, span = positions * tiles * b;
    const DirectConvSplit& split = splits_[(rows == chunk_rows_ ? 0 : 3) + (positions == 1 ? 0 : positions == 2 ? 1 : 2)];
    hwy_cpu::ConvRow t{};
    t.pixel_stride = static_cast<size_t>(b);
    t.taps = split.taps.data();
    t.num_taps = split.taps.size();
    t.group_stride = static_cast<size_t>(span);
    t.blocks = static_cast<size_t>(blocks_);
    t.y_group = static_cast<size_t>(span);
    t.tiles = split.row_tiles.data();
    t.num_tiles = split.row_tiles.size() / 2;
    const float* u = filters_->get() + (k * panels_ + panel) * groups_ * b * width;
    for (int64_t g0 = 0; g0 < groups_; g0 += split.run_groups) {
      t.x = v + start * groups_ * tiles * b + g0 * span;
      t.groups = static_cast<size_t>(std::min(groups_, g0 + split.run_groups) - g0);
      t.w = u + g0 * b * width;
      t.y = m + start * out_blocks_ * tiles * b + panel * blocks_ * span;
      t.accumulate = g0 > 0;
      hwy_cpu::conv_row_run(t);
    }
  }

  // Y of output blocks [first, last) of the chunk at tile row ty0 from M, bias and epilogue added.
  void transform_outputs(const float* m, float* y, const float* residual, int64_t ty0, int64_t rows, int64_t first,
                         int64_t last) const {
    const int64_t b = p_.lanes, out_rows = std::min(2 * rows, p_.oh - 2 * ty0);
    const int64_t plane = p_.oh * p_.ow * b, at = 2 * ty0 * p_.ow * b;
    const hwy_cpu::WinogradOutput output{static_cast<size_t>(p_.stride),
                                         m,
                                         static_cast<size_t>(out_blocks_),
                                         static_cast<size_t>(first),
                                         static_cast<size_t>(last),
                                         static_cast<size_t>(rows),
                                         static_cast<size_t>(row_tiles_),
                                         static_cast<size_t>(out_rows),
                                         static_cast<size_t>(p_.ow),
                                         bias_.data(),
                                         y + at,
                                         static_cast<size_t>(p_.ow * b),
                                         static_cast<size_t>(plane)};
    HWY_DYNAMIC_DISPATCH(hwy_cpu::WinogradOutputTransform)(output);
    if (epilogue_.empty()) return;
    for (int64_t k = first; k < last; ++k) {
      const int64_t offset = k * plane + at;
      hwy_cpu::apply_epilogue_here(epilogue_, y + offset, residual != nullptr ? residual + offset : nullptr,
                                   out_rows * p_.ow * b);
    }
  }

  Plan p_;
  std::unique_ptr<DirectConvRows> direct_;
  hwy_cpu::VectorEpilogue epilogue_;
  int64_t groups_ = 0, out_blocks_ = 0, blocks_ = 2, panels_ = 0;
  int64_t row_tiles_ = 0, tile_rows_ = 0, chunk_rows_ = 1;
  int64_t src_h_ = 0, src_w_ = 0;  // the bordered image cpu.conv's loop reads, padded to whole tiles
  bool copied_ = false;            // that image is a zero-bordered copy (else X itself)
  // The products' split: a full chunk, the last chunk; each for classes of 1, 2 and 4 positions.
  std::vector<DirectConvSplit> splits_;
  PackedFloats filters_;
  std::vector<float> bias_;  // padded to whole output blocks
};

bool supports(const KernelCompileContext& ctx) {
  return plan_of(ctx).has_value() && direct_conv_kernel().supports(ctx);
}

Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
  auto p = plan_of(ctx);
  auto direct = p ? direct_conv_rows(ctx) : nullptr;
  if (direct == nullptr) return Status::internal_error(str_cat(ctx.node.describe(), ": not a cpu.winograd node"));
  return std::unique_ptr<Kernel>(std::make_unique<WinogradConvKernel>(*p, std::move(direct)));
}

}  // namespace

// On every tier with a block of one vector. AVX2 (Zen 3, against cpu.conv): see kMinChunkTiles
// and docs/benchmarks.md wave 20. AVX-512 (Zen 5, 2 threads, ResNet-50's 3x3 convs, per-node
// medians of 20 runs): 0.72-0.87x the time of oneDNN's brgconv on nhwc, its fastest layout there
// (passes/layout_measure.cc weighs the two), and less than its jit kernel on nChw16c.
bool winograd_conv_wins(const Target&) { return true; }

KernelImpl winograd_conv_kernel() {
  return {"cpu.winograd", "BlockedConv", supports, create,
          [](const Target& target, const KernelCompileContext&) { return winograd_conv_wins(target); }};
}

}  // namespace opfuse
#endif  // HWY_ONCE
