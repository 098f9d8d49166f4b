// "cpu.dwconv": a depthwise BlockedConv on the vector's block (kernels/cpu/depthwise_conv_kernel.h).
//
// X is [N, C/b, H, W, b] and Y [N, C/b, OH, OW, b] with b one vector (8 floats on AVX2): each lane
// is one channel, so the conv is b independent 2-d convolutions, done by vector multiply-adds
// with no broadcasts. A register tile is T outputs of one row of one channel block: for each
// window row it loads that row's kw weight vectors, then walks the (T - 1) x stride + kw input
// vectors under the tile once, each feeding every output whose window covers it. That is kw + T
// + 1 registers (3 + 8 + 1 or 5 + 8 + 1 of AVX2's 16) and one load per input vector and window
// row rather than one per tap.
//
// Borders: a thread copies the input rows of a band of output rows of one block into a
// zero-bordered buffer first (one pass over X, against the kh x kw reads of each input), so every
// output goes through the tiles: a per-pixel loop that checked each tap for the one or two
// border columns on each side took as long as the tiles of a whole 14-wide row.
//
// Threads take (band, channel block) items in contiguous static chunks, in the order the kernels
// around it split their work, so a thread reads mostly what it wrote itself, from its own L2:
// below AVX-512 each band through every channel block in turn, as cpu.conv splits the 1x1 convs
// by pixels; from AVX-512 up each block's bands in turn (memory order), as oneDNN's kernels and
// the epilogue passes split a tensor. (Zen 5, O3, per node against oneDNN's kernel:
// EfficientNet-B0's 112x112 and 56x56 SiLU convs took 1.08-1.11 and 0.99-1.01 of its time in the
// band order, 0.89 and 0.77 in memory order; MobileNetV2's 0.93 and 0.75, then 0.85 and 0.64.)
// A Relu or Clip epilogue is applied in registers before the store; any other runs over the
// band's rows just written.
#ifndef OPFUSE_KERNELS_CPU_DEPTHWISE_CONV_KERNEL_DECLS_
#define OPFUSE_KERNELS_CPU_DEPTHWISE_CONV_KERNEL_DECLS_
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "hwy/aligned_allocator.h"
#include "kernels/cpu/blocked_conv_operands.h"
#include "kernels/cpu/depthwise_conv_kernel.h"
#include "kernels/cpu/hwy_epilogue.h"
#include "kernels/cpu/hwy_kernels.h"
#include "kernels/cpu/onednn_conv.h"
#include "kernels/cpu/onednn_post_ops.h"
#include "kernels/cpu/packed_floats.h"
#include "kernels/target_caps.h"
#include "ops/fused.h"
#include "ops/op_def.h"

namespace opfuse::hwy_cpu {
// One output row of one channel block, read from a zero-bordered copy of its window rows.
struct DepthwiseRow {
  const float* x;      // the window's first input row in the copy, [kh rows][w][b]
  int64_t w;           // the copy's width
  const float* wt;     // the block's weights, [kh][kw][b]
  int64_t kh, kw;      // the window (kw 3 or 5)
  int64_t stride;      // 1 or 2, both axes
  const float* bias;   // b floats
  float* y;            // the output row, [ow][b]
  int64_t ow;
  // The epilogue when it is one Relu or Clip: y = min(max(y, lo), hi) (NaN kept) before the store.
  bool clamp;
  float lo, hi;
};
}  // namespace opfuse::hwy_cpu
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/depthwise_conv_kernel.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

constexpr size_t kLanes = hn::MaxLanes(DF());
constexpr size_t kTilePixels = 8;

size_t DepthwiseBlock() { return kLanes; }

// f(integral_constant<I>) for I in [0, N): the tile's loops unrolled at compile time, so which
// output each input vector feeds is decided while compiling.
template <size_t N, class F>
HWY_INLINE void Unroll(F&& f) {
  [&]<size_t... I>(std::index_sequence<I...>) HWY_ATTR __attribute__((always_inline)) {
    (f(std::integral_constant<size_t, I>()), ...);
  }(std::make_index_sequence<N>());
}

// kT outputs from column ox.
template <size_t kKw, size_t kStride, size_t kT>
HWY_INLINE void Tile(const DepthwiseRow& r, int64_t ox) {
  const DF d;
  VF acc[kT];
  const VF bias = hn::LoadU(d, r.bias);
  for (size_t t = 0; t < kT; ++t) acc[t] = bias;
  constexpr int64_t b = static_cast<int64_t>(kLanes);
  for (int64_t ky = 0; ky < r.kh; ++ky) {
    const float* HWY_RESTRICT xr = r.x + (ky * r.w + ox * static_cast<int64_t>(kStride)) * b;
    const float* HWY_RESTRICT wr = r.wt + ky * static_cast<int64_t>(kKw) * b;
    VF wv[kKw];
    for (size_t kx = 0; kx < kKw; ++kx) wv[kx] = hn::Load(d, wr + kx * kLanes);
    Unroll<(kT - 1) * kStride + kKw>([&](auto j) HWY_ATTR __attribute__((always_inline)) {
      const VF v = hn::LoadU(d, xr + decltype(j)::value * kLanes);
      Unroll<kT>([&](auto t) HWY_ATTR __attribute__((always_inline)) {
        constexpr int64_t kx = static_cast<int64_t>(decltype(j)::value) - static_cast<int64_t>(decltype(t)::value * kStride);
        if constexpr (kx >= 0 && kx < static_cast<int64_t>(kKw)) {
          acc[decltype(t)::value] = hn::MulAdd(v, wv[kx], acc[decltype(t)::value]);
        }
      });
    });
  }
  if (r.clamp) {
    const VF lo = hn::Set(d, r.lo), hi = hn::Set(d, r.hi);
    for (size_t t = 0; t < kT; ++t) {  // comparisons with NaN are false: NaN stays NaN
      acc[t] = hn::IfThenElse(hn::Lt(acc[t], lo), lo, acc[t]);
      acc[t] = hn::IfThenElse(hn::Gt(acc[t], hi), hi, acc[t]);
    }
  }
  for (size_t t = 0; t < kT; ++t) hn::StoreU(acc[t], d, r.y + (ox + static_cast<int64_t>(t)) * b);
}

// Tiles of 8, then of 4, 2 and 1 for the rest of the row; rows of 7, 14, 28 ... in tiles of 7,
// whose seven accumulators keep the FMAs busy where 4, 2 and 1 wait on their latency (Zen 5,
// AVX-512, `DepthwiseConvBench`: 960 channels 5x5 on 7x7 44-50 -> 21 us, 480 channels 3x3 on
// 14x14 34-38 -> 22 us). Five tile widths per window and stride: each is a separate unrolled
// body, and all eight cost minutes of the sanitizer build.
template <size_t kKw, size_t kStride>
HWY_INLINE void Row(const DepthwiseRow& r) {
  if (r.ow % static_cast<int64_t>(kTilePixels) != 0 && r.ow % 7 == 0) {
    for (int64_t ox = 0; ox < r.ow; ox += 7) Tile<kKw, kStride, 7>(r, ox);
    return;
  }
  int64_t ox = 0;
  for (; ox + static_cast<int64_t>(kTilePixels) <= r.ow; ox += kTilePixels) Tile<kKw, kStride, kTilePixels>(r, ox);
  if (ox + 4 <= r.ow) Tile<kKw, kStride, 4>(r, ox), ox += 4;
  if (ox + 2 <= r.ow) Tile<kKw, kStride, 2>(r, ox), ox += 2;
  if (ox < r.ow) Tile<kKw, kStride, 1>(r, ox);
}

template <size_t kKw, size_t kStride>
HWY_INLINE void Rows(DepthwiseRow r, int64_t rows) {
  for (int64_t i = 0; i < rows; ++i, r.x += static_cast<int64_t>(kStride) * r.w * static_cast<int64_t>(kLanes),
               r.y += r.ow * static_cast<int64_t>(kLanes)) {
    Row<kKw, kStride>(r);
  }
}

// `rows` consecutive output rows from r (the copy's and Y's rows follow each other). From AVX2
// (8 lanes) up only: narrower vectors are no layout block (plan_of refuses them), and their
// tiles would only lengthen the build.
void DepthwiseConvRows(const DepthwiseRow& r, int64_t rows) {
  if constexpr (kLanes >= 8) {
    if (r.kw == 3) return r.stride == 1 ? Rows<3, 1>(r, rows) : Rows<3, 2>(r, rows);
    return r.stride == 1 ? Rows<5, 1>(r, rows) : Rows<5, 2>(r, rows);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace opfuse {
namespace hwy_cpu {
HWY_EXPORT(DepthwiseBlock);
HWY_EXPORT(DepthwiseConvRows);
}  // namespace hwy_cpu

namespace {

using Dims = std::vector<int64_t>;

// Below AVX-512, depthwise convs up to this many multiply-adds run here. Measured on a Zen 3
// (AVX2), chains of 3x3 depthwise convs + ReLU or ReLU6, time against oneDNN's jit_dw, medians of
// paired rounds: 128 channels on 8x8 (74K multiply-adds) 0.80-0.84 on one thread, 0.73 on two;
// 64 on 16x16 (147K) 1.08 and 0.90; 384 on 14x14 (677K) 0.93-0.97 and 1.04-1.14; 960 on 7x7 0.84
// and 1.19; 192 on 28x28 1.00 and 1.02-1.07; 144 on 56x56 1.11-1.15 and 1.04-1.12 (with bands
// sized by L1 then). On larger maps oneDNN's kernel kept up and split the work as well.
constexpr int64_t kSmallConvMacs = int64_t{1} << 18;

// From AVX-512 up, stride-1 convs of at least kManyBlocksAvx512 channel blocks run here when
// their output maps are at least kWideMapAvx512 wide and tall, or when oneDNN would leave part of
// the epilogue to a pass of its own over the output (SiLU; Relu and Clip where NaN must
// survive), which this kernel applies while the rows are in L1. Measured on a Zen 5 (2 threads,
// `DepthwiseConvBench`: the MobileNet, EfficientNet and BlazeFace shapes, eight inputs in turn,
// the two kernels alternating over 11 rounds, three runs, oneDNN with Relu/Clip/HardSwish inside
// as in a plan for finite inputs), time against jit_dw:avx512_core at stride 1: 112x112
// 0.76-0.92, 56x56 0.51-0.58 (0.68-0.72 with SiLU), 28x28 0.85-0.98 (0.79-0.85), 14x14
// 0.83-1.05 (0.84-0.91), 7x7 0.95-1.10 (0.88-0.98). Inside the models the input's place
// matters as much: the 1x1 conv before it split its output between the threads, by channel
// blocks when it has many and by pixels when few, so with 1-3 blocks each thread here read most
// of its blocks from the other core (BlazeFace's 24 and 48 channels on 128x128 to 32x32:
// 1.3-2.0x oneDNN's time, though 0.87-0.91 in isolation; at MobileNet's 16-32-channel 112x112
// stems 0.85-1.09), and on 28x28 maps with Relu/Clip the paired model profiles did not show the
// bench's gain through the host's noise. At stride 2 oneDNN keeps the 112x112 (1.05-1.20), 28x28
// and 14x14 inputs (1.09-1.21); from 56x56 to 28x28 this kernel took 0.61-0.89 (not taken yet).
constexpr int64_t kWideMapAvx512 = 56;
constexpr int64_t kManyBlocksAvx512 = 4;

// Below this many multiply-adds one thread does the conv: two threads gain once the work is
// well above a fork and join (about 1 us on a Zen 3; 2^16 multiply-adds take 2-3 us here).
constexpr int64_t kParallelMacs = int64_t{1} << 16;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Plan {
  int64_t n = 0, c = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 0, kw = 0, stride = 1, pt = 0, pl = 0;
  int64_t lanes = 0;  // the block
  BlockedConvOperands operands;
};

std::optional<Plan> plan_of(const KernelCompileContext& ctx) {
  auto in = blocked_conv_operands(ctx);
  if (!in) return std::nullopt;
  const std::vector<int64_t>&x = in->x, &w = in->w, &y = in->y;
  const AttrReader attrs(ctx.node);
  Plan p;
  apply_target_caps();  // the vector is the capped target's
  p.lanes = static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(hwy_cpu::DepthwiseBlock)());
  if (p.lanes < 8) return std::nullopt;  // tiles from AVX2 up only (DepthwiseConvRows)
  p.c = w[0];
  if (p.c <= 0 || w[1] != 1 || attrs.get_int("group") != p.c || attrs.get_int("block") != p.lanes) return std::nullopt;
  const int64_t cb = ceil_div(p.c, p.lanes);
  if (x[1] != cb || x[4] != p.lanes || y[1] != cb || y[4] != p.lanes) return std::nullopt;
  p.n = x[0], p.h = x[2], p.w = x[3], p.oh = y[2], p.ow = y[3];
  p.kh = w[2], p.kw = w[3];
  const auto g = onednn::conv_geometry_for(ctx, Dims{p.n, p.c, p.h, p.w}, Dims{p.n, p.c, p.oh, p.ow}, false);
  if (!g || g->x.size() != 4 || g->strides.size() != 2) return std::nullopt;
  p.stride = g->strides[0];
  if ((p.kw != 3 && p.kw != 5) || p.kh <= 0 || (p.stride != 1 && p.stride != 2) || g->strides[1] != p.stride ||
      g->dilations[0] != 0 || g->dilations[1] != 0) {
    return std::nullopt;
  }
  p.pt = g->pad_l[0], p.pl = g->pad_l[1];
  if (p.n <= 0 || p.oh <= 0 || p.ow <= 0) return std::nullopt;
  p.operands = std::move(*in);
  return p;
}

class DepthwiseConvKernel final : public Kernel {
 public:
  explicit DepthwiseConvKernel(const Plan& p)
      : p_(p), epilogue_(*hwy_cpu::vector_epilogue(p.operands.epilogue)), blocks_(ceil_div(p.c, p.lanes)) {
    // Weights: block, window row, window column, lane; zero for the padded channels, whose
    // inputs may hold any finite value (ops/layout_ops.cc). Once per session for equal weights
    // (packed_floats.h), as the bias.
    const int64_t b = p_.lanes, taps = p_.kh * p_.kw;
    const Tensor& w = *p_.operands.weights;
    packed_ = pack_floats(w, str_cat("cpu.dwconv b ", b, " ", p_.c, "x", taps), static_cast<size_t>(blocks_ * taps * b),
                          [&](float* packed) {
                            const float* wsrc = w.data<float>();
                            for (int64_t c = 0; c < p_.c; ++c) {
                              for (int64_t tap = 0; tap < taps; ++tap) {
                                packed[static_cast<size_t>(((c / b) * taps + tap) * b + c % b)] = wsrc[c * taps + tap];
                              }
                            }
                          });
    const Tensor* bias = p_.operands.bias;
    const size_t bias_floats = static_cast<size_t>(blocks_ * b);
    if (bias != nullptr) {
      bias_ = pack_floats(*bias, str_cat("cpu.dwconv bias b ", b), bias_floats,
                          [&](float* packed) { std::copy_n(bias->data<float>(), p_.c, packed); });
    } else {
      auto zeros = hwy::AllocateAligned<float>(bias_floats);
      std::fill_n(zeros.get(), bias_floats, 0.0f);
      bias_ = std::make_shared<const hwy::AlignedFreeUniquePtr<float[]>>(std::move(zeros));
    }
  }

  std::string_view name() const override { return "cpu.dwconv"; }
  // The weights and bias are packed at creation.
  bool reads_input(size_t i) const override { return i == 0 || (i == 3 && p_.operands.residual); }
  std::string implementation() const override {
    return str_cat(highway_dispatch_target(), " ", p_.kh, "x", p_.kw, " stride ", p_.stride);
  }

  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    const int64_t b = p_.lanes, x_block = p_.h * p_.w * b, y_row = p_.ow * b, y_block = p_.oh * y_row;
    const int64_t numel_x = p_.n * blocks_ * x_block, numel_y = p_.n * blocks_ * y_block;
    const Tensor* xt = in.empty() ? nullptr : in[0];
    const Tensor* rt = p_.operands.residual && in.size() > 3 ? in[3] : nullptr;
    Tensor* yt = out.empty() ? nullptr : out[0];
    if (xt == nullptr || xt->dtype() != DType::kF32 || xt->numel() != numel_x || yt == nullptr ||
        yt->dtype() != DType::kF32 || yt->numel() != numel_y ||
        (p_.operands.residual && (rt == nullptr || rt->dtype() != DType::kF32 || rt->numel() != numel_y))) {
      return Status::internal_error("cpu.dwconv: an operand does not have its planned shape");
    }
    const float* x = xt->data<float>();
    const float* residual = rt != nullptr ? rt->data<float>() : nullptr;
    float* y = yt->data<float>();
    const int64_t macs = p_.n * p_.oh * p_.ow * p_.c * p_.kh * p_.kw;
    const int threads = macs >= kParallelMacs ? omp_get_max_threads() : 1;
    // Bands of rows, at least one per thread and no taller than band_rows_ (the copy in an eighth
    // of L2); items in the order (image, band, block) or (image, block, band): the file comment.
    const int64_t band_rows = std::clamp<int64_t>(ceil_div(p_.oh, threads), 1, band_rows_);
    const int64_t bands = ceil_div(p_.oh, band_rows), items = p_.n * bands * blocks_;
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
      // The zero-bordered copy of a band's input rows: the calling thread's, kept between runs (a
      // kernel may run on several sessions' threads at once).
      thread_local hwy::AlignedFreeUniquePtr<float[]> copy;
      thread_local size_t capacity = 0;
      const size_t copy_floats = static_cast<size_t>(((band_rows - 1) * p_.stride + p_.kh) * copy_width_ * b);
      if (capacity < copy_floats) {
        copy = hwy::AllocateAligned<float>(copy_floats);
        capacity = copy_floats;
      }
#pragma omp for schedule(static)
      for (int64_t item = 0; item < items; ++item) {
        const int64_t image = item / (bands * blocks_);
        const int64_t band = block_major_ ? item % bands : item / blocks_ % bands;
        const int64_t blk = block_major_ ? item / bands % blocks_ : item % blocks_;
        const int64_t plane = image * blocks_ + blk, oy0 = band * band_rows, oy1 = std::min(p_.oh, oy0 + band_rows);
        copy_band(x + plane * x_block, oy0, oy1, copy.get());
        const int64_t at = plane * y_block + oy0 * y_row;
        const hwy_cpu::DepthwiseRow r{copy.get(), copy_width_, packed_->get() + blk * p_.kh * p_.kw * b, p_.kh, p_.kw,
                                      p_.stride, bias_->get() + blk * b, y + at, p_.ow, clamp_.has_value(),
                                      clamp_ ? clamp_->first : 0.0f, clamp_ ? clamp_->second : 0.0f};
        HWY_DYNAMIC_DISPATCH(hwy_cpu::DepthwiseConvRows)(r, oy1 - oy0);
        // Any other epilogue over the band's rows of the block (contiguous in Y) while in L1.
        if (!epilogue_.empty() && !clamp_) {
          hwy_cpu::apply_epilogue_here(epilogue_, y + at, residual != nullptr ? residual + at : nullptr,
                                       (oy1 - oy0) * y_row);
        }
      }
    }
    return Status::ok();
  }

 private:
  // The input rows output rows [oy0, oy1) read, from the block's image `x`, into `dst` with zeros
  // where the window leaves X: copy_width_ pixels per row, X's column 0 at column pl.
  void copy_band(const float* x, int64_t oy0, int64_t oy1, float* dst) const {
    const int64_t b = p_.lanes, rows = (oy1 - oy0 - 1) * p_.stride + p_.kh, row_floats = copy_width_ * b;
    const int64_t right = copy_width_ - p_.pl - p_.w;
    for (int64_t i = 0; i < rows; ++i, dst += row_floats) {
      const int64_t iy = oy0 * p_.stride - p_.pt + i;
      if (iy < 0 || iy >= p_.h) {
        std::memset(dst, 0, static_cast<size_t>(row_floats) * sizeof(float));
        continue;
      }
      std::memset(dst, 0, static_cast<size_t>(p_.pl * b) * sizeof(float));
      std::memcpy(dst + p_.pl * b, x + iy * p_.w * b, static_cast<size_t>(p_.w * b) * sizeof(float));
      if (right > 0) std::memset(dst + (p_.pl + p_.w) * b, 0, static_cast<size_t>(right * b) * sizeof(float));
    }
  }

  Plan p_;
  hwy_cpu::VectorEpilogue epilogue_;
  int64_t blocks_ = 0;
  // (lo, hi) when the epilogue is one Relu or Clip, applied in registers (MobileNets' ReLU6): as
  // a pass over each band it took a third as long as the conv on 14x14 maps.
  std::optional<std::pair<float, float>> clamp_ = hwy_cpu::clamp_of(epilogue_);
  // The copy's width: X's with its left padding and as many columns right as the last window reads.
  int64_t copy_width_ = std::max(p_.pl + p_.w, (p_.ow - 1) * p_.stride + p_.kw);
  // Output rows per band at most: the band's copy fills an eighth of L2 (so it stays there with
  // the outputs the thread wrote before). Bands sized by half of L1 held a single output row on
  // 112-wide maps at AVX-512 (16 channels: 7 KiB an input row), copying each input row three
  // times: at 112x112 and 56x56 the L2 bands took 0.67-0.92 of their time (`DepthwiseConvBench`,
  // Zen 5, at AVX-512 and at the AVX2 tier); maps of 14x14 and less split into one band per
  // thread either way.
  int64_t band_rows_ = std::max<int64_t>(
      1, ((active_target().l2_bytes > 0 ? active_target().l2_bytes : 512 * 1024) / 8 /
              (copy_width_ * p_.lanes * static_cast<int64_t>(sizeof(float))) - p_.kh) / p_.stride + 1);
  // The item order (the file comment).
  bool block_major_ = active_target().isa >= IsaTier::kAvx512Core;
  PackedFloats packed_, bias_;
};

bool supports(const KernelCompileContext& ctx) { return plan_of(ctx).has_value(); }

Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
  const auto p = plan_of(ctx);
  if (!p) return Status::internal_error(str_cat(ctx.node.describe(), ": not a cpu.dwconv node"));
  return std::unique_ptr<Kernel>(std::make_unique<DepthwiseConvKernel>(*p));
}

}  // namespace

bool depthwise_conv_preferred(const Target& target, const KernelCompileContext& ctx) {
  const auto p = plan_of(ctx);
  if (!p) return false;
  if (target.isa < IsaTier::kAvx512Core) return p->n * p->oh * p->ow * p->c * p->kh * p->kw <= kSmallConvMacs;
  const std::vector<PostOp>& e = p->operands.epilogue;
  const size_t in_onednn = onednn::placed_post_ops(e, ctx, onednn::cheap_conv_post_ops(e, ctx));
  const bool onednn_leaves_a_pass = in_onednn < e.size();
  const bool wide = p->oh >= kWideMapAvx512 && p->ow >= kWideMapAvx512;
  return p->stride == 1 && ceil_div(p->c, p->lanes) >= kManyBlocksAvx512 && (wide || onednn_leaves_a_pass);
}

KernelImpl depthwise_conv_kernel() {
  return {"cpu.dwconv", "BlockedConv", supports, create, depthwise_conv_preferred};
}

}  // namespace opfuse
#endif  // HWY_ONCE
