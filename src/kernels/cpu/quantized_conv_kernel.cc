// "cpu.conv_i16": Y = post(float(sum (q(X) - z)(W - w_zero)) * (s * w_scale) + bias) for
// opfuse::QuantizedConv (ops/integer_conv.cc), where q, s, z are DynamicQuantizeLinear's
// quantization of X, or QuantizeLinear's by a constant s and z (kernels/cpu/quantized_conv_kernel.h).
//
// One run: (1) for dynamic quantization X's range, in parallel over its chunks (padded lanes of a
// blocked X left out), and from it s and z by the reference's own formula
// (ops/quantize_common.h); (2) per image, X quantized into a zero-bordered copy of int16 q - z in
// the blocked layout (the padding is x's zero point, so 0 here, as ConvInteger counts it); (3)
// cpu.conv's loop (direct_conv_kernel.cc, its work split direct_conv_split.h:
// bands of output rows per panel of output blocks, runs of input blocks whose weights fit in L1,
// tiles of a few pixels of one row) with cpu.gemm_i16's multiply-add (integer_gemm_kernel.cc):
// one vpmaddwd multiplies a broadcast channel pair of a pixel by the pair of each output channel
// and adds the two products, exactly, since q - z and W - w_zero lie in [-255, 255]; int32 adds
// wrap as the reference's narrowing does. Sums of the runs before the last stay, as int32, in Y's
// memory; after the last the tile converts them to float, multiplies by s * w_scale of their
// channel and adds the bias: the dynamic form's replaced graph's steps in its order, so its
// result bit for bit (the QDQ form's graph multiplies dequantized operands: within rounding).
// The epilogue runs over each row of the band while it is in L1. With plain X and Y (O1, O2) the
// copy reads X's planes and the tiles write a blocked image that is then moved into Y, where the
// epilogue runs.
//
// Tiles: 6 pixels x 2 output blocks of int32 accumulators (12 on AVX-512) plus the pair's two
// weight vectors and a broadcast fill the register file as in cpu.gemm_i16; a last panel of one
// block (an odd number of output blocks) runs tiles of one block. A 1x1 stride-1 conv is a
// product over the pixels, tiled in rows of up to 64 of them. The four channel pairs of a step
// are not unrolled: unrolled, GCC hoisted all 24 broadcasts and spilled accumulators every step
// (IS-Net: 2822 against 2288 ms per run on a Zen 3). The loops over pixels and blocks are,
// outright: past GCC's own limits the 12 x 2 accumulators lived on the stack (126 zmm reloads at
// AVX-512).
//
// A blocked 3x3 stride-1 conv with even output sides runs an exact integer Winograd F(2x2, 3x3)
// on the same tiles instead (plan_winograd, run_winograd_chunk): IS-Net 2.1-2.6 -> 1.6-1.7 s per
// run on a Zen 3 at O3, 0.82 of its float twin's time (which runs cpu.winograd).
#ifndef OPFUSE_KERNELS_CPU_QUANTIZED_CONV_KERNEL_DECLS_
#define OPFUSE_KERNELS_CPU_QUANTIZED_CONV_KERNEL_DECLS_
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "core/digest.h"
#include "hwy/aligned_allocator.h"
#include "kernels/cpu/direct_conv_split.h"
#include "kernels/cpu/hwy_epilogue.h"
#include "kernels/cpu/hwy_kernels.h"
#include "kernels/cpu/packed_floats.h"
#include "kernels/cpu/quantized_conv_kernel.h"
#include "kernels/target_caps.h"
#include "ops/fused.h"
#include "ops/nn_common.h"
#include "ops/op_def.h"
#include "ops/quantize_common.h"

namespace opfuse::hwy_cpu {
// One run over an output row: every tile of the row times one panel of output blocks, over a
// run of input blocks (as cpu.conv's ConvRow, in int16 channel pairs).
struct QConvRow {
  const int16_t* x;       // the pair 0 input of the row's pixel 0 at tap 0, first input block of the run
  size_t pixel_stride;    // int16 between consecutive output pixels' inputs (b x the stride)
  const size_t* taps;     // each tap's offset from an output pixel's input, in int16
  size_t num_taps;
  size_t groups;          // input blocks in the run
  size_t group_stride;    // int16 between them
  const int16_t* w;       // the panel's packed weights for the run: [groups][taps][b/2][blocks x b][2]
  size_t blocks;          // output blocks in the panel: 2, or 1 for a last odd one
  float* y;               // pixel 0 of the row in the panel's first output block
  size_t y_group;         // floats between the panel's output blocks
  bool accumulate;        // start from the int32 sums in Y (the earlier runs) instead of zero
  const float* scale;     // on the last run: blocks x b floats, s * w_scale per channel (else null)
  const float* bias;      // on the last run: blocks x b floats, or null
  const int64_t* tiles;   // (first pixel, width) of each tile of the row
  size_t num_tiles;
};

// The integer F(2x2, 3x3) of a chunk of tile rows (see QuantizedConvKernel::run_winograd_chunk).
struct QWinogradInput {
  const int16_t* x;       // the zero-bordered int16 image at the chunk's first row, input block 0
  size_t row, group;      // int16 per image row and per input block
  size_t groups, tile_rows, row_tiles;
  int16_t* v;             // [16][groups][tiles][b]: B^T d B
};
struct QWinogradOutput {
  const int32_t* m;       // [16][blocks][tiles][b]: the products, 4x the transformed sums
  size_t blocks, tile_rows, row_tiles;
  const float* scale;     // blocks x b floats, s * w_scale
  const float* bias;      // blocks x b floats, or null
  float* y;               // the blocked output image at the chunk's first row, block 0
  size_t row, group;      // floats per output row and per output block
};
}  // namespace opfuse::hwy_cpu
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/quantized_conv_kernel.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/winograd_tiles-inl.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using VI = hn::Vec<DI>;

constexpr size_t kLanes = hn::MaxLanes(DF());
constexpr size_t kPixels = kLanes >= 16 ? 12 : 6;

size_t QConvBlock() { return kLanes; }
size_t QConvTilePixels() { return kPixels; }

// y = saturate(round_half_even(x / scale) + zero, lo, hi) - zero as int16, NaN quantizing to lo:
// QuantizeLinear's (and DynamicQuantizeLinear's) u8 or i8 ([lo, hi]) less its zero point.
void QConvQuantize(const float* x, size_t n, float scale, float zero, float lo, float hi, int16_t* y) {
  const DF df;
  const DI di;
  const hn::Rebind<int16_t, DF> d16;
  const auto vs = hn::Set(df, scale), vz = hn::Set(df, zero);
  const auto vlo = hn::Set(df, lo), vhi = hn::Set(df, hi);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const auto q = hn::Add(hn::Round(hn::Div(hn::LoadU(df, x + i), vs)), vz);
    const auto clamped = hn::IfThenElse(hn::IsNaN(q), vlo, hn::Min(hn::Max(q, vlo), vhi));
    hn::StoreU(hn::DemoteTo(d16, hn::ConvertTo(di, hn::Sub(clamped, vz))), d16, y + i);
  }
  for (; i < n; ++i) {
    const float v = x[i] / scale;
    y[i] = static_cast<int16_t>((std::isnan(v) ? lo : std::clamp(round_half_even(v) + zero, lo, hi)) - zero);
  }
}

#if HWY_TARGET != HWY_SCALAR  // one lane holds no 16-bit pair
template <size_t kBlocks, size_t kStride, size_t kCount>
HWY_INLINE void TileOf(const QConvRow& t, const int16_t* x, float* y) {
  const DI di;
  const hn::Repartition<int16_t, DI> dw;
  const DF df;
  int32_t* yi = reinterpret_cast<int32_t*>(y);
  VI acc[kBlocks][kCount], odd[kBlocks][kCount];
#pragma GCC unroll 16
  for (size_t j = 0; j < kBlocks; ++j) {
#pragma GCC unroll 16
    for (size_t r = 0; r < kCount; ++r) {
      acc[j][r] = t.accumulate ? hn::LoadU(di, yi + j * t.y_group + r * kLanes) : hn::Zero(di);
      odd[j][r] = hn::Zero(di);
    }
  }
  const int16_t* HWY_RESTRICT w = t.w;
  const size_t ps = kStride != 0 ? kStride * kLanes : t.pixel_stride;
  for (size_t g = 0; g < t.groups; ++g) {
    const int16_t* xg = x + g * t.group_stride;
    for (size_t tap = 0; tap < t.num_taps; ++tap) {
      const int16_t* HWY_RESTRICT a = xg + t.taps[tap];
#pragma GCC unroll 1
      for (size_t p = 0; p < kLanes / 2; ++p, w += kBlocks * 2 * kLanes) {
        hn::Vec<decltype(dw)> wj[kBlocks];
#pragma GCC unroll 16
        for (size_t j = 0; j < kBlocks; ++j) wj[j] = hn::Load(dw, w + j * 2 * kLanes);
#pragma GCC unroll 16
        for (size_t r = 0; r < kCount; ++r) {
          int32_t pair;
          std::memcpy(&pair, a + r * ps + 2 * p, sizeof(pair));
          const auto ar = hn::BitCast(dw, hn::Set(di, pair));
#pragma GCC unroll 16
          for (size_t j = 0; j < kBlocks; ++j) acc[j][r] = hn::ReorderWidenMulAccumulate(di, ar, wj[j], acc[j][r], odd[j][r]);
        }
      }
    }
  }
#pragma GCC unroll 16
  for (size_t j = 0; j < kBlocks; ++j) {
#pragma GCC unroll 16
    for (size_t r = 0; r < kCount; ++r) acc[j][r] = hn::RearrangeToOddPlusEven(acc[j][r], odd[j][r]);
  }
  if (t.scale == nullptr) {
#pragma GCC unroll 16
    for (size_t j = 0; j < kBlocks; ++j) {
#pragma GCC unroll 16
      for (size_t r = 0; r < kCount; ++r) hn::StoreU(acc[j][r], di, yi + j * t.y_group + r * kLanes);
    }
    return;
  }
#pragma GCC unroll 16
  for (size_t j = 0; j < kBlocks; ++j) {
    const auto s = hn::LoadU(df, t.scale + j * kLanes);
    const auto c = t.bias != nullptr ? hn::LoadU(df, t.bias + j * kLanes) : hn::Zero(df);
#pragma GCC unroll 16
    for (size_t r = 0; r < kCount; ++r) {
      auto v = hn::Mul(hn::ConvertTo(df, acc[j][r]), s);
      // Added only when there is a bias: + 0 would turn the -0 of a zero sum times a negative scale into +0.
      if (t.bias != nullptr) v = hn::Add(v, c);
      hn::StoreU(v, df, y + j * t.y_group + r * kLanes);
    }
  }
}

template <size_t kBlocks, size_t kStride, size_t kCount = kPixels>
HWY_INLINE void Tile(size_t pixels, const QConvRow& t, const int16_t* x, float* y) {
  if constexpr (kCount > 0) {
    if (pixels == kCount) return TileOf<kBlocks, kStride, kCount>(t, x, y);
    Tile<kBlocks, kStride, kCount - 1>(pixels, t, x, y);
  }
}

template <size_t kBlocks, size_t kStride>
HWY_INLINE void RowTiles(const QConvRow& t) {
  for (size_t i = 0; i < t.num_tiles; ++i) {
    const size_t ox = static_cast<size_t>(t.tiles[2 * i]), width = static_cast<size_t>(t.tiles[2 * i + 1]);
    Tile<kBlocks, kStride>(width, t, t.x + ox * t.pixel_stride, t.y + ox * kLanes);
  }
}

// Stride 1 has its own tiles (every input address a constant offset); other strides are read at
// run time.
template <size_t kBlocks>
HWY_INLINE void RowOfStride(const QConvRow& t) {
  if (t.pixel_stride == kLanes) return RowTiles<kBlocks, 1>(t);
  RowTiles<kBlocks, 0>(t);
}
#endif

// Every tile of the row (each at most QConvTilePixels() wide). Tiles exist from AVX2 (8 lanes) up
// only, where integer_products_in_fp32 makes the op (plan_of refuses narrower vectors): each
// target instantiates every tile width, and the SSE4 ones cost minutes of the sanitizer build
// for a path no model reaches.
void QConvRowRun(const QConvRow& t) {
#if HWY_TARGET != HWY_SCALAR
  if constexpr (kLanes >= 8) {
    if (t.blocks == 2) return RowOfStride<2>(t);
    RowOfStride<1>(t);
  }
#endif
}

// V = B^T d B for every tile of the chunk, in int16: |d| <= 255, so |V| <= 4 x 255.
void QWinogradInputTransform(const QWinogradInput& t) {
#if HWY_TARGET != HWY_SCALAR
  if constexpr (kLanes >= 8) {
    const hn::CappedTag<int16_t, kLanes> d;  // one pixel's b channels
    WinogradInputTiles(d, t.x, t.row, t.group, t.groups, 0, t.groups, t.tile_rows, t.row_tiles, t.v,
                       [](hn::Vec<decltype(d)>) HWY_ATTR {});
  }
#endif
}

// Y = (A^T M A) / 4 * scale + bias in the reference's order (the int32 sum, then its float
// times s * w_scale, then + bias). int32 adds wrap; the sum is exact where |sum| < 2^29.
void QWinogradOutputTransform(const QWinogradOutput& t) {
  const DF df;
  const DI di;
  WinogradOutputTiles(di, t.m, t.blocks, 0, t.blocks, t.tile_rows, t.row_tiles, 2 * t.tile_rows, 2 * t.row_tiles,
                      [&](size_t k) HWY_ATTR {
                        const auto scale = hn::LoadU(df, t.scale + k * kLanes);
                        const bool has_bias = t.bias != nullptr;
                        const auto bias = has_bias ? hn::LoadU(df, t.bias + k * kLanes) : hn::Zero(df);
                        float* y = t.y + k * t.group;
                        return [=, &t](VI sum, size_t i, size_t j) HWY_ATTR {
                          auto v = hn::Mul(hn::ConvertTo(df, hn::ShiftRight<2>(sum)), scale);
                          // As the direct tiles: no + 0 turning the -0 of a zero sum into +0.
                          if (has_bias) v = hn::Add(v, bias);
                          hn::StoreU(v, df, y + i * t.row + j * kLanes);
                        };
                      });
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace opfuse {
namespace hwy_cpu {
HWY_EXPORT(QConvBlock);
HWY_EXPORT(QConvTilePixels);
HWY_EXPORT(QConvQuantize);
HWY_EXPORT(QConvRowRun);
HWY_EXPORT(QWinogradInputTransform);
HWY_EXPORT(QWinogradOutputTransform);
}  // namespace hwy_cpu

namespace {

using Dims = std::vector<int64_t>;

// Inputs of opfuse::QuantizedConv.
constexpr size_t kX = 0, kW = 1, kBias = 2, kResidual = 3, kWScale = 4, kWZero = 5, kXScale = 6, kXZero = 7;

// Below this many multiply-adds one thread does the conv (as cpu.conv).
constexpr int64_t kParallelMacs = int64_t{1} << 18;
// Floats per chunk of the range pass.
constexpr int64_t kRangeChunk = 1 << 16;
// The integer Winograd's exact range (plan_winograd): C x 9 x 255 x 255 < 2^29.
constexpr int64_t kWinogradMaxChannels = 917;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool is_int8(DType t) { return t == DType::kU8 || t == DType::kI8; }

struct Plan {
  bool blocked = false;                 // X, R and Y blocked on the vector's block; else plain
  int64_t n = 0, c = 0, h = 0, w = 0;   // X (logical)
  int64_t m = 0, oh = 0, ow = 0;        // Y (logical)
  int64_t kh = 0, kw = 0, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
  int64_t lanes = 0;                    // the block
  const Tensor* weights = nullptr;      // u8/i8 [M, C, kh, kw]
  const Tensor* w_zero = nullptr;       // one value or M, or null
  const Tensor* w_scale = nullptr;      // f32, one value or M
  const Tensor* bias = nullptr;         // f32 [M], or null
  // Static quantization (constant x_scale and x_zero): X's scale, zero point and range; else X is
  // quantized dynamically (u8, scale and zero point from its range at run time).
  std::optional<DynamicQuantParams> x_params;
  float x_low = 0.0f, x_high = 255.0f;
  std::vector<PostOp> epilogue;
  bool residual = false;
};

const Tensor* constant(const KernelCompileContext& ctx, size_t i) {
  return i < ctx.constants.size() ? ctx.constants[i] : nullptr;
}

bool one_or(const Tensor* t, int64_t m) { return t != nullptr && (t->numel() == 1 || (t->rank() == 1 && t->numel() == m)); }

std::optional<Plan> plan_of(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  if (node.op_type() != "QuantizedConv" || node.domain() != kFusedDomain || node.outputs().size() != 1 ||
      node.inputs().size() <= kWScale) {
    return std::nullopt;
  }
  Plan p;
  apply_target_caps();  // the vector is the capped target's
  p.lanes = static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(hwy_cpu::QConvBlock)());
  if (p.lanes < 8) return std::nullopt;  // tiles from AVX2 up only (QConvRowRun)
  const AttrReader attrs(node);
  const int64_t block = attrs.get_int("block");
  p.blocked = block != 0;
  if ((p.blocked && block != p.lanes) || attrs.get_int("group") != 1) return std::nullopt;
  p.weights = constant(ctx, kW);
  if (p.weights == nullptr || !is_int8(p.weights->dtype()) || p.weights->rank() != 4) return std::nullopt;
  p.m = p.weights->dim(0), p.c = p.weights->dim(1), p.kh = p.weights->dim(2), p.kw = p.weights->dim(3);
  const auto x = hwy_cpu::static_dims_of(node.input(kX));
  const auto y = hwy_cpu::static_dims_of(node.output(0));
  const size_t rank = p.blocked ? 5 : 4;
  if (!x || !y || x->size() != rank || y->size() != rank || p.m <= 0 || p.c <= 0) return std::nullopt;
  if (p.blocked ? ((*x)[1] != ceil_div(p.c, p.lanes) || (*x)[4] != p.lanes || (*y)[1] != ceil_div(p.m, p.lanes) ||
                   (*y)[4] != p.lanes)
                : ((*x)[1] != p.c || (*y)[1] != p.m)) {
    return std::nullopt;
  }
  p.n = (*x)[0], p.h = (*x)[2], p.w = (*x)[3], p.oh = (*y)[2], p.ow = (*y)[3];
  if (p.n <= 0 || p.oh <= 0 || p.ow <= 0 || (*y)[0] != p.n) return std::nullopt;
  auto wa = read_window_attrs(attrs, 2, Dims{p.kh, p.kw}, true, node.describe());
  if (!wa.is_ok()) return std::nullopt;
  int64_t pads[2][2], out[2] = {p.oh, p.ow}, in[2] = {p.h, p.w};
  for (size_t i = 0; i < 2; ++i) {
    auto dim = window_dim(*wa, i, in[i], false, node.describe());
    if (!dim.is_ok() || dim->out != out[i]) return std::nullopt;
    pads[i][0] = dim->pad_begin, pads[i][1] = dim->pad_end;
  }
  p.sh = wa->strides[0], p.sw = wa->strides[1], p.dh = wa->dilations[0], p.dw = wa->dilations[1];
  p.pt = pads[0][0], p.pb = pads[0][1], p.pl = pads[1][0], p.pr = pads[1][1];
  // Negative pads (a crop) are not a zero border.
  if (p.pt < 0 || p.pb < 0 || p.pl < 0 || p.pr < 0) return std::nullopt;
  if (p.kh == 1 && p.kw == 1 && p.sh == 1 && p.sw == 1 && p.pt + p.pb + p.pl + p.pr == 0) {
    // A product over the pixels, which lie in one run per channel block: rows of up to 64 of
    // them tile better than the image's (ResNet-50's 7 and 14 pixels wide: tiles of 4 and 5).
    const int64_t pixels = p.h * p.w;
    int64_t row = 1;
    for (int64_t d = 1; d <= std::min<int64_t>(64, pixels); ++d) row = pixels % d == 0 ? d : row;
    p.h = p.oh = pixels / row;
    p.w = p.ow = row;
  }
  p.w_scale = constant(ctx, kWScale);
  if (!one_or(p.w_scale, p.m) || p.w_scale->dtype() != DType::kF32) return std::nullopt;
  if (node.has_input(kWZero)) {
    p.w_zero = constant(ctx, kWZero);
    if (!one_or(p.w_zero, p.m) || p.w_zero->dtype() != p.weights->dtype()) return std::nullopt;
  }
  if (node.has_input(kXScale)) {
    const Tensor* s = constant(ctx, kXScale);
    const Tensor* z = node.has_input(kXZero) ? constant(ctx, kXZero) : nullptr;
    if (s == nullptr || s->dtype() != DType::kF32 || s->numel() != 1 || (node.has_input(kXZero) && z == nullptr) ||
        (z != nullptr && (z->numel() != 1 || !is_int8(z->dtype())))) {
      return std::nullopt;
    }
    p.x_params = DynamicQuantParams{s->data<float>()[0], z != nullptr ? static_cast<int32_t>(z->get_int(0)) : 0};
    if (z != nullptr && z->dtype() == DType::kI8) p.x_low = -128.0f, p.x_high = 127.0f;
  }
  if (node.has_input(kBias)) {
    p.bias = constant(ctx, kBias);
    if (p.bias == nullptr || p.bias->dtype() != DType::kF32 || p.bias->dims() != Dims{p.m}) return std::nullopt;
  }
  auto epilogue = hwy_cpu::anchor_vector_epilogue(node, *y);
  if (!epilogue) return std::nullopt;
  p.residual = node.has_input(kResidual);
  p.epilogue = std::move(*epilogue);
  return p;
}

class QuantizedConvKernel final : public Kernel {
 public:
  explicit QuantizedConvKernel(const Plan& p) : p_(p), epilogue_(*hwy_cpu::vector_epilogue(p.epilogue)) {
    const int64_t b = p_.lanes;
    mr_ = static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(hwy_cpu::QConvTilePixels)());
    groups_ = ceil_div(p_.c, b);
    out_blocks_ = ceil_div(p_.m, b);
    hp_ = p_.h + p_.pt + p_.pb;
    wp_ = p_.w + p_.pl + p_.pr;
    const int64_t taps = p_.kh * p_.kw;
    // Panels of two output blocks, the last of one when they are odd; each panel's weights
    // [C/b][taps][b/2 pairs][its columns][2] of W - w_zero, zero for padded channels.
    int64_t offset = 0;
    for (int64_t first = 0; first < out_blocks_; first += 2) {
      const int64_t blocks = std::min<int64_t>(2, out_blocks_ - first);
      panels_.push_back({first, blocks, offset});
      offset += groups_ * taps * b * blocks * b;
    }
    // Once per session for equal weights (packed_floats.h): a plan per input shape shares them.
    const std::string how = str_cat("cpu.conv_i16 b ", b, " ", p_.m, "x", p_.c, "x", p_.kh, "x", p_.kw, " zero ",
                                    zero_point_key());
    packed_ = pack_aligned<int16_t>(*p_.weights, how, static_cast<size_t>(offset), [&](int16_t* dst) {
      for (const Panel& panel : panels_) {
        const int64_t cols = panel.blocks * b;
        for (int64_t g = 0; g < groups_; ++g) {
          for (int64_t tap = 0; tap < taps; ++tap) {
            for (int64_t pair = 0; pair < b / 2; ++pair) {
              for (int64_t j = 0; j < cols; ++j) {
                for (int64_t half = 0; half < 2; ++half, ++dst) {
                  const int64_t oc = panel.first * b + j, c = g * b + 2 * pair + half;
                  *dst = static_cast<int16_t>(oc < p_.m && c < p_.c ? weight(oc, c, tap) : 0);
                }
              }
            }
          }
        }
      }
    });
    w_scale_.assign(static_cast<size_t>(out_blocks_ * b), 0.0f);
    for (int64_t oc = 0; oc < p_.m; ++oc) w_scale_[oc] = p_.w_scale->data<float>()[p_.w_scale->numel() == 1 ? 0 : oc];
    if (p_.bias != nullptr) {
      bias_.assign(static_cast<size_t>(out_blocks_ * b), 0.0f);
      std::copy_n(p_.bias->data<float>(), p_.m, bias_.begin());
    }
    // A run's weights: taps x b/2 pairs x two blocks' columns x 2 int16 per input block.
    split_ = direct_conv_split(groups_, taps * b * 2 * b * 2, p_.oh, p_.ow, mr_, p_.kh, p_.kw, p_.dh, p_.dw, wp_, b);
    plan_winograd();
  }

  std::string_view name() const override { return "cpu.conv_i16"; }
  std::string implementation() const override {
    return str_cat(highway_dispatch_target(), " ", mr_, "x", 2 * p_.lanes, " ", split_.run_groups * p_.lanes,
                   " channels per run", p_.blocked ? "" : ", plain X and Y",
                   winograd_ != nullptr ? str_cat(", F(2x2,3x3) in ", chunk_rows_ * row_tiles_, "-tile chunks") : "");
  }

  // The weights, their zero point and scale, the bias and a static quantization's X scale and zero
  // point were copied (packed) when the kernel was made.
  bool reads_input(size_t i) const override { return i == kX || (i == kResidual && p_.residual); }

  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    const int64_t b = p_.lanes;
    const int64_t x_image = p_.blocked ? groups_ * p_.h * p_.w * b : p_.c * p_.h * p_.w;
    const int64_t y_image = p_.blocked ? out_blocks_ * b * p_.oh * p_.ow : p_.m * p_.oh * p_.ow;
    const Tensor* xt = in.empty() ? nullptr : in[kX];
    const Tensor* rt = p_.residual && in.size() > kResidual ? in[kResidual] : nullptr;
    Tensor* yt = out.empty() ? nullptr : out[0];
    if (xt == nullptr || xt->dtype() != DType::kF32 || xt->numel() != p_.n * x_image || yt == nullptr ||
        yt->dtype() != DType::kF32 || yt->numel() != p_.n * y_image ||
        (p_.residual && (rt == nullptr || rt->dtype() != DType::kF32 || rt->numel() != p_.n * y_image))) {
      return Status::internal_error("cpu.conv_i16: an operand does not have its planned shape");
    }
    const int64_t macs = p_.n * p_.oh * p_.ow * p_.m * p_.c * p_.kh * p_.kw;
    const int threads = macs >= kParallelMacs ? omp_get_max_threads() : 1;
    const DynamicQuantParams q = p_.x_params ? *p_.x_params : quantization(xt->data<float>(), threads);
    // The replaced graph's Mul(x_scale, w_scale), per output channel; 0 for the padded lanes of
    // the last block, so they hold 0 as the layout expects (ops/layout_ops.cc: finite) even when
    // an Inf in X made s infinite (every real channel is NaN then).
    std::vector<float> scale(w_scale_.size(), 0.0f);
    for (int64_t i = 0; i < p_.m; ++i) scale[i] = q.scale * w_scale_[i];
    // The zero-bordered int16 copy of one image, and for plain Y a blocked image for the tiles:
    // the calling thread's, kept between runs (a kernel may run on several sessions' threads).
    thread_local hwy::AlignedFreeUniquePtr<int16_t[]> padded;
    thread_local size_t padded_capacity = 0;
    thread_local hwy::AlignedFreeUniquePtr<float[]> blocked_y;
    thread_local size_t blocked_y_capacity = 0;
    const size_t padded_size = static_cast<size_t>(groups_ * hp_ * wp_ * b);
    if (padded_capacity < padded_size) {
      padded = hwy::AllocateAligned<int16_t>(padded_size);
      padded_capacity = padded_size;
    }
    const size_t blocked_y_size = static_cast<size_t>(out_blocks_ * b * p_.oh * p_.ow);
    if (!p_.blocked && blocked_y_capacity < blocked_y_size) {
      blocked_y = hwy::AllocateAligned<float>(blocked_y_size);
      blocked_y_capacity = blocked_y_size;
    }
    const int64_t bands = ceil_div(p_.oh, split_.band_rows), items = static_cast<int64_t>(panels_.size()) * bands;
    const int64_t chunk = std::max<int64_t>(1, items / (8 * threads));
    const int64_t plane = p_.oh * p_.ow;
    for (int64_t image = 0; image < p_.n; ++image) {
      const float* x = xt->data<float>() + image * x_image;
      float* y = yt->data<float>() + image * y_image;
      const float* residual = rt != nullptr ? rt->data<float>() + image * y_image : nullptr;
      int16_t* xp = padded.get();
      float* yb = p_.blocked ? y : blocked_y.get();
#pragma omp parallel num_threads(threads) if (threads > 1)
      {
#pragma omp for schedule(static)
        for (int64_t row = 0; row < groups_ * hp_; ++row) quantize_row(x, xp, row, q);
        if (winograd_ != nullptr) {
#pragma omp for schedule(dynamic, 1)
          for (int64_t c = 0; c < ceil_div(tile_rows_, chunk_rows_); ++c) {
            run_winograd_chunk(xp, yb, residual, scale.data(), c);
          }
        } else {
#pragma omp for schedule(dynamic, chunk)
          for (int64_t item = 0; item < items; ++item) {
            const int64_t oy = item % bands * split_.band_rows;
            run_band(xp, yb, residual, scale.data(), panels_[static_cast<size_t>(item / bands)], oy,
                     std::min(p_.oh, oy + split_.band_rows));
          }
        }
        if (!p_.blocked) {
          // Y's planes from the blocked image, then the epilogue over them (plain R).
#pragma omp for schedule(static)
          for (int64_t oc = 0; oc < p_.m; ++oc) {
            const float* from = yb + (oc / b * plane) * b + oc % b;
            float* to = y + oc * plane;
            for (int64_t i = 0; i < plane; ++i) to[i] = from[i * b];
            if (!epilogue_.empty()) {
              hwy_cpu::apply_epilogue_here(epilogue_, to, residual != nullptr ? residual + oc * plane : nullptr, plane);
            }
          }
        }
      }
    }
    return Status::ok();
  }

 private:
  struct Panel {
    int64_t first = 0, blocks = 2, offset = 0;  // first output block, blocks, packed weights' offset
  };

  // The weights' zero point as part of a packing's description (packed_floats.h).
  std::string zero_point_key() const {
    const Tensor* z = p_.w_zero;
    if (z == nullptr) return "none";
    return str_cat(dtype_name(z->dtype()), " ", z->numel(), " ", digest_bytes(z->raw_data(), z->nbytes()));
  }

  // Read while the kernel is made only: the graph may let the weights go after (reads_input).
  int32_t weight(int64_t oc, int64_t c, int64_t tap) const {
    const int64_t zero = p_.w_zero == nullptr ? 0 : p_.w_zero->get_int(p_.w_zero->numel() == 1 ? 0 : oc);
    return static_cast<int32_t>(p_.weights->get_int((oc * p_.c + c) * p_.kh * p_.kw + tap) - zero);
  }

  // DynamicQuantizeLinear's scale and zero point of all of X (every image: its range is the
  // whole tensor's).
  DynamicQuantParams quantization(const float* x, int threads) const {
    const int64_t b = p_.lanes;
    // Per plane of channel blocks: a blocked X's last block holds C % b channels.
    const int64_t runs = p_.blocked ? p_.n * groups_ : 1;
    const int64_t run_floats = p_.blocked ? p_.h * p_.w * b : p_.n * p_.c * p_.h * p_.w;
    const int64_t chunks_per_run = ceil_div(run_floats, kRangeChunk);
    float lo = 0.0f, hi = 0.0f;
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static) reduction(min : lo) reduction(max : hi)
    for (int64_t i = 0; i < runs * chunks_per_run; ++i) {
      const int64_t run = i / chunks_per_run, begin = i % chunks_per_run * kRangeChunk;
      const size_t valid = p_.blocked && run % groups_ == groups_ - 1 && p_.c % b != 0 ? static_cast<size_t>(p_.c % b)
                                                                                   : static_cast<size_t>(b);
      hwy_cpu::range_with_zero(x + run * run_floats + begin, static_cast<size_t>(std::min(kRangeChunk, run_floats - begin)),
                               valid, &lo, &hi);
    }
    return dynamic_quant_params(lo, hi);
  }

  // Row `row` (input block g, padded row py) of the zero-bordered int16 copy of the image.
  void quantize_row(const float* x, int16_t* xp, int64_t row, const DynamicQuantParams& q) const {
    const int64_t b = p_.lanes, g = row / hp_, iy = row % hp_ - p_.pt;
    int16_t* dst = xp + row * wp_ * b;
    if (iy < 0 || iy >= p_.h) {
      std::fill(dst, dst + wp_ * b, int16_t{0});
      return;
    }
    std::fill(dst, dst + p_.pl * b, int16_t{0});
    std::fill(dst + (p_.pl + p_.w) * b, dst + wp_ * b, int16_t{0});
    const float scale = q.scale, zero = static_cast<float>(q.zero_point);
    if (p_.blocked) {
      HWY_DYNAMIC_DISPATCH(hwy_cpu::QConvQuantize)(x + (g * p_.h + iy) * p_.w * b, static_cast<size_t>(p_.w * b),
                                                   scale, zero, p_.x_low, p_.x_high, dst + p_.pl * b);
      return;
    }
    // Plain X: each channel's row quantized, then laid into its lane (0 for padded channels).
    thread_local std::vector<int16_t> channel_row;
    channel_row.resize(static_cast<size_t>(p_.w));
    for (int64_t lane = 0; lane < b; ++lane) {
      const int64_t c = g * b + lane;
      int16_t* to = dst + p_.pl * b + lane;
      if (c >= p_.c) {
        for (int64_t i = 0; i < p_.w; ++i) to[i * b] = 0;
        continue;
      }
      HWY_DYNAMIC_DISPATCH(hwy_cpu::QConvQuantize)(x + (c * p_.h + iy) * p_.w, static_cast<size_t>(p_.w), scale, zero,
                                                   p_.x_low, p_.x_high, channel_row.data());
      for (int64_t i = 0; i < p_.w; ++i) to[i * b] = channel_row[static_cast<size_t>(i)];
    }
  }

  // Output rows [oy0, oy1) of one panel into the blocked image `y`: for each run of input blocks,
  // the tiles of every row, then (blocked Y) the epilogue over each row of each output block.
  void run_band(const int16_t* xp, float* y, const float* residual, const float* scale, const Panel& panel,
                int64_t oy0, int64_t oy1) const {
    const int64_t b = p_.lanes, plane = p_.oh * p_.ow;
    hwy_cpu::QConvRow t{};
    t.pixel_stride = static_cast<size_t>(p_.sw * b);
    t.taps = split_.taps.data();
    t.num_taps = split_.taps.size();
    t.group_stride = static_cast<size_t>(hp_ * wp_ * b);
    t.blocks = static_cast<size_t>(panel.blocks);
    t.y_group = static_cast<size_t>(plane * b);
    t.tiles = split_.row_tiles.data();
    t.num_tiles = split_.row_tiles.size() / 2;
    const int64_t group_weights = p_.kh * p_.kw * b * panel.blocks * b;
    float* const y_panel = y + panel.first * plane * b;
    for (int64_t g0 = 0; g0 < groups_; g0 += split_.run_groups) {
      const int64_t g1 = std::min(groups_, g0 + split_.run_groups);
      t.groups = static_cast<size_t>(g1 - g0);
      t.w = packed_->get() + panel.offset + g0 * group_weights;
      t.accumulate = g0 > 0;
      const bool last = g1 == groups_;
      t.scale = last ? scale + panel.first * b : nullptr;
      t.bias = last && !bias_.empty() ? bias_.data() + panel.first * b : nullptr;
      for (int64_t oy = oy0; oy < oy1; ++oy) {
        t.x = xp + g0 * t.group_stride + oy * p_.sh * wp_ * b;
        t.y = y_panel + oy * p_.ow * b;
        HWY_DYNAMIC_DISPATCH(hwy_cpu::QConvRowRun)(t);
      }
    }
    if (epilogue_.empty() || !p_.blocked) return;
    for (int64_t j = 0; j < panel.blocks; ++j) {
      const int64_t offset = (panel.first + j) * plane * b + oy0 * p_.ow * b;
      hwy_cpu::apply_epilogue_here(epilogue_, y + offset, residual != nullptr ? residual + offset : nullptr,
                                   (oy1 - oy0) * p_.ow * b);
    }
  }

  // Integer Winograd F(2x2, 3x3) for a 3x3 stride-1 conv on the blocked layout with even output
  // sides, as cpu.winograd in floats (winograd_conv_kernel.cc) but exact: with 2G for G the
  // transformed filters U' = 4U are integers, |U'| <= 9 x 255, and |V| <= 4 x 255, both int16,
  // multiplied in pairs by the same vpmaddwd tiles into int32 sums M; the output transform's
  // A^T M A is then 4x the direct sum, mod 2^32, so a shift by 2 gives that sum exactly while it
  // stays below 2^29 in magnitude: at most C x 9 x 255 x 255, so C <= kWinogradMaxChannels.
  void plan_winograd() {
    const int64_t b = p_.lanes;
    if (!p_.blocked || p_.kh != 3 || p_.kw != 3 || p_.sh != 1 || p_.sw != 1 || p_.dh != 1 || p_.dw != 1 ||
        p_.oh % 2 != 0 || p_.ow % 2 != 0 || p_.c > kWinogradMaxChannels) {
      return;
    }
    tile_rows_ = p_.oh / 2;
    row_tiles_ = p_.ow / 2;
    // Chunks of tile rows as cpu.winograd's: V (int16) and M (int32) in half of L2, two chunks
    // per thread where there are rows enough; declined where small chunks stream large filters.
    const int64_t l2 = active_target().l2_bytes > 0 ? active_target().l2_bytes : 512 * 1024;
    const int64_t tile_bytes = 16 * (groups_ * b * 2 + out_blocks_ * b * 4);
    const int64_t spread = ceil_div(tile_rows_, 2 * std::max(1, omp_get_max_threads()));
    chunk_rows_ = std::clamp<int64_t>(std::min(l2 / 2 / tile_bytes / row_tiles_, spread), 1, tile_rows_);
    if (chunk_rows_ * row_tiles_ < 6 && 16 * groups_ * b * out_blocks_ * b * 2 > l2 / 2) return;
    xi_weights_ = groups_ * b * out_blocks_ * b;
    const std::string winograd_how = str_cat("cpu.conv_i16 winograd b ", b, " ", p_.m, "x", p_.c, " zero ",
                                             zero_point_key());
    winograd_ = pack_aligned<int16_t>(*p_.weights, winograd_how, static_cast<size_t>(16 * xi_weights_),
                                      [&](int16_t* winograd) {
      constexpr int64_t kG2[4][3] = {{2, 0, 0}, {1, 1, 1}, {1, -1, 1}, {0, 0, 2}};  // 2G
      for (int64_t oc = 0; oc < out_blocks_ * b; ++oc) {
        const Panel& panel = panels_[static_cast<size_t>(oc / b / 2)];
        const int64_t cols = panel.blocks * b, j = oc - panel.first * b;
        for (int64_t c = 0; c < groups_ * b; ++c) {
          int64_t g[3][3] = {};
          for (int64_t tap = 0; tap < 9 && oc < p_.m && c < p_.c; ++tap) g[tap / 3][tap % 3] = weight(oc, c, tap);
          const int64_t group = c / b, pair = c % b / 2, half = c % 2;
          for (int64_t xi = 0; xi < 16; ++xi) {
            int64_t u = 0;
            for (int64_t a = 0; a < 3; ++a) {
              for (int64_t e = 0; e < 3; ++e) u += kG2[xi / 4][a] * g[a][e] * kG2[xi % 4][e];
            }
            const int64_t at = xi * xi_weights_ + panel.offset / 9 + ((group * (b / 2) + pair) * cols + j) * 2 + half;
            winograd[static_cast<size_t>(at)] = static_cast<int16_t>(u);
          }
        }
      }
    });
    // The products' split for a full chunk and the last, shorter one: the chunk's tiles as one
    // row, one tap, runs of input blocks whose weights fit in L1.
    for (const int64_t rows : {chunk_rows_, tile_rows_ % chunk_rows_}) {
      const int64_t tiles = rows * row_tiles_;
      winograd_splits_.push_back(
          tiles == 0 ? DirectConvSplit{}
                     : direct_conv_split(groups_, b * 2 * b * 2, 1, tiles, mr_, 1, 1, 1, 1, tiles, b));
    }
  }

  // Tile rows [chunk x chunk_rows_, ...) of one image by the integer F(2x2, 3x3): V from the
  // zero-bordered int16 image, the 16 products in int32 on the direct tiles, then Y, and the
  // epilogue over the chunk's rows.
  void run_winograd_chunk(const int16_t* xp, float* y, const float* residual, const float* scale, int64_t chunk) const {
    const int64_t b = p_.lanes, ty0 = chunk * chunk_rows_, rows = std::min(chunk_rows_, tile_rows_ - ty0);
    const int64_t tiles = rows * row_tiles_, plane = p_.oh * p_.ow * b, first = 2 * ty0 * p_.ow * b;
    const DirectConvSplit& split = winograd_splits_[rows == chunk_rows_ ? 0 : 1];
    thread_local hwy::AlignedFreeUniquePtr<int16_t[]> v_buffer;
    thread_local hwy::AlignedFreeUniquePtr<int32_t[]> m_buffer;
    thread_local size_t v_capacity = 0, m_capacity = 0;
    const size_t v_size = static_cast<size_t>(16 * groups_ * tiles * b);
    const size_t m_size = static_cast<size_t>(16 * out_blocks_ * tiles * b);
    if (v_capacity < v_size) v_buffer = hwy::AllocateAligned<int16_t>(v_capacity = v_size);
    if (m_capacity < m_size) m_buffer = hwy::AllocateAligned<int32_t>(m_capacity = m_size);
    int16_t* v = v_buffer.get();
    int32_t* m = m_buffer.get();
    const hwy_cpu::QWinogradInput input{xp + 2 * ty0 * wp_ * b, static_cast<size_t>(wp_ * b),
                                        static_cast<size_t>(hp_ * wp_ * b), static_cast<size_t>(groups_),
                                        static_cast<size_t>(rows), static_cast<size_t>(row_tiles_), v};
    HWY_DYNAMIC_DISPATCH(hwy_cpu::QWinogradInputTransform)(input);
    hwy_cpu::QConvRow t{};
    t.pixel_stride = static_cast<size_t>(b);
    t.taps = split.taps.data();
    t.num_taps = split.taps.size();
    t.group_stride = static_cast<size_t>(tiles * b);
    t.y_group = static_cast<size_t>(tiles * b);
    t.tiles = split.row_tiles.data();
    t.num_tiles = split.row_tiles.size() / 2;
    for (int64_t xi = 0; xi < 16; ++xi) {
      for (const Panel& panel : panels_) {
        t.blocks = static_cast<size_t>(panel.blocks);
        for (int64_t g0 = 0; g0 < groups_; g0 += split.run_groups) {
          t.x = v + (xi * groups_ + g0) * tiles * b;
          t.groups = static_cast<size_t>(std::min(groups_, g0 + split.run_groups) - g0);
          t.w = winograd_->get() + xi * xi_weights_ + panel.offset / 9 + g0 * b * panel.blocks * b;
          t.y = reinterpret_cast<float*>(m + (xi * out_blocks_ + panel.first) * tiles * b);  // int32 sums
          t.accumulate = g0 > 0;
          HWY_DYNAMIC_DISPATCH(hwy_cpu::QConvRowRun)(t);
        }
      }
    }
    const hwy_cpu::QWinogradOutput output{m, static_cast<size_t>(out_blocks_), static_cast<size_t>(rows),
                                          static_cast<size_t>(row_tiles_), scale,
                                          bias_.empty() ? nullptr : bias_.data(), y + first,
                                          static_cast<size_t>(p_.ow * b), static_cast<size_t>(plane)};
    HWY_DYNAMIC_DISPATCH(hwy_cpu::QWinogradOutputTransform)(output);
    if (epilogue_.empty()) return;
    for (int64_t k = 0; k < out_blocks_; ++k) {
      const int64_t offset = k * plane + first;
      hwy_cpu::apply_epilogue_here(epilogue_, y + offset, residual != nullptr ? residual + offset : nullptr,
                                   2 * rows * p_.ow * b);
    }
  }

  Plan p_;
  hwy_cpu::VectorEpilogue epilogue_;
  int64_t mr_ = 0, groups_ = 0, out_blocks_ = 0, hp_ = 0, wp_ = 0;
  // The integer Winograd's transformed weights ([16][panels as packed_], one tap), or null.
  PackedArray<int16_t> winograd_;
  int64_t xi_weights_ = 0, tile_rows_ = 0, row_tiles_ = 0, chunk_rows_ = 1;
  std::vector<DirectConvSplit> winograd_splits_;
  DirectConvSplit split_;
  std::vector<Panel> panels_;
  PackedArray<int16_t> packed_;
  std::vector<float> w_scale_, bias_;  // per output channel, padded to whole blocks
};

bool supports(const KernelCompileContext& ctx) { return plan_of(ctx).has_value(); }

Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
  const auto p = plan_of(ctx);
  if (!p) return Status::internal_error(str_cat(ctx.node.describe(), ": not a cpu.conv_i16 node"));
  return std::unique_ptr<Kernel>(std::make_unique<QuantizedConvKernel>(*p));
}

}  // namespace

KernelImpl quantized_conv_kernel() { return {"cpu.conv_i16", "QuantizedConv", supports, create}; }

}  // namespace opfuse
#endif  // HWY_ONCE
