// "cpu.conv": a BlockedConv computed directly on the blocked layout (kernels/cpu/direct_conv_kernel.h).
//
// X is [N, C/b, H, W, b] and Y [N, M/b, OH, OW, b] with b one vector (8 floats on AVX2). The
// output channels are cut into panels of four blocks (two when the blocks do not come in fours).
// A register tile is a few output pixels of one row times one panel: on AVX2 3 x 4 blocks (or
// 5 x 2) accumulators, plus a step's broadcast inputs and the one weight vector in use, fill the
// 16 registers. A step is one lane of one input block at one tap: it broadcasts each pixel's
// input value and multiplies it by the panel's weight vectors. The tile's pixels are a fixed
// stride apart in X (b times the conv's stride) and each tap a fixed offset from them, so one
// pointer per tap addresses a step's inputs with constant displacements.
//
// Loop order (oneDNN's): a thread takes a band of output rows of one panel (about 32 pixels); over
// the band it runs the input blocks in runs whose packed weights fit in L1 ([C/b][taps][b][panel],
// read in that order), accumulating in Y between runs; after the last run the bias is added in
// registers and the epilogue runs over each row of the band while it is in L1. Rows are cut into
// tiles of nearly equal width (56 pixels: 18 tiles of 3 and 1 of 2). Bands go to threads
// dynamically (the host is shared: a descheduled thread would stall a static split), those of one
// panel consecutively, so a thread keeps its weights. A small 1x1 conv (a product) is one image of
// rows folded together (k rows of a 1x1 conv are one row k times as wide) split statically band
// by band instead: the same pixels go to the same thread in every product of a chain.
//
// Padding: a padded conv first copies the image into a zero-bordered buffer (all threads, before
// the tiles), so no tile has border cases and the loop no branches. The copy is one pass over X,
// against the 9 reads of each input a 3x3 conv makes.
#ifndef OPFUSE_KERNELS_CPU_DIRECT_CONV_KERNEL_DECLS_
#define OPFUSE_KERNELS_CPU_DIRECT_CONV_KERNEL_DECLS_
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
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
#include "ops/fused.h"
#include "ops/op_def.h"

#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/direct_conv_kernel.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

constexpr size_t kLanes = hn::MaxLanes(DF());
// Output blocks per panel, and pixels per tile for each: kPixels x kBlocks accumulators, the
// kPixels broadcast inputs of a step and the one weight vector in use fill the register file
// (16 vectors below AVX-512: 3 x 4 or 5 x 2). The weights are loaded one vector at a time,
// right before their FMAs: the order with all of a step's weights loaded first (6 x 2) made GCC
// spill an accumulator every tap, and ran at 0.64 of the FMA peak on one Zen 3 core.
constexpr size_t kWideBlocks = 4, kNarrowBlocks = 2;
constexpr size_t kWidePixels = kLanes >= 16 ? 6 : 3, kNarrowPixels = kLanes >= 16 ? 10 : 5;

size_t ConvBlock() { return kLanes; }
size_t ConvTilePixels(size_t blocks) { return blocks == kWideBlocks ? kWidePixels : kNarrowPixels; }

// Every accumulator set to zero in its register: a loop storing zeros into the array is what
// GCC's loop distribution turns into `rep stos` on the stack, then loads into the registers
// (packed_gemm_kernel.cc measured it).
template <size_t kPixels, size_t kBlocks, size_t... kAcc>
HWY_INLINE void ZeroAccumulators(DF d, VF (&acc)[kBlocks][kPixels], std::index_sequence<kAcc...>) {
  ((acc[kAcc / kPixels][kAcc % kPixels] = hn::Zero(d)), ...);
}

// kStride: the conv's horizontal stride when it is 1 or 2 (then every input address of a step is
// one pointer plus a constant: a runtime stride cost a lea per broadcast), 0 for any other.
template <size_t kPixels, size_t kBlocks, size_t kStride>
HWY_INLINE void Tile(const ConvRow& t, const float* x, float* y) {
  const DF d;
  VF acc[kBlocks][kPixels];
  if (t.accumulate) {
    for (size_t j = 0; j < kBlocks; ++j) {
      for (size_t r = 0; r < kPixels; ++r) acc[j][r] = hn::LoadU(d, y + j * t.y_group + r * kLanes);
    }
  } else {
    ZeroAccumulators<kPixels>(d, acc, std::make_index_sequence<kBlocks * kPixels>());
  }
  const float* HWY_RESTRICT w = t.w;
  const size_t ps = kStride != 0 ? kStride * kLanes : t.pixel_stride;
  for (size_t g = 0; g < t.groups; ++g) {
    const float* xg = x + g * t.group_stride;
    for (size_t tap = 0; tap < t.num_taps; ++tap) {
      const float* HWY_RESTRICT a = xg + t.taps[tap];
#pragma GCC unroll 4
      for (size_t k = 0; k < kLanes; ++k, w += kBlocks * kLanes) {
        VF ar[kPixels];
        for (size_t r = 0; r < kPixels; ++r) ar[r] = hn::Set(d, a[r * ps + k]);
        for (size_t j = 0; j < kBlocks; ++j) {
          const VF wj = hn::Load(d, w + j * kLanes);
          for (size_t r = 0; r < kPixels; ++r) acc[j][r] = hn::MulAdd(ar[r], wj, acc[j][r]);
        }
      }
    }
  }
  for (size_t j = 0; j < kBlocks; ++j) {
    const VF c = t.bias != nullptr ? hn::LoadU(d, t.bias + j * kLanes) : hn::Zero(d);
    for (size_t r = 0; r < kPixels; ++r) hn::StoreU(hn::Add(acc[j][r], c), d, y + j * t.y_group + r * kLanes);
  }
}

template <size_t kPixels, size_t kBlocks, size_t kStride>
HWY_INLINE void TileOfWidth(size_t pixels, const ConvRow& t, const float* x, float* y) {
  if constexpr (kPixels > 0) {
    if (pixels == kPixels) return Tile<kPixels, kBlocks, kStride>(t, x, y);
    TileOfWidth<kPixels - 1, kBlocks, kStride>(pixels, t, x, y);
  }
}

template <size_t kBlocks, size_t kPixels, size_t kStride>
HWY_INLINE void RowTiles(const ConvRow& t) {
  for (size_t i = 0; i < t.num_tiles; ++i) {
    const size_t ox = static_cast<size_t>(t.tiles[2 * i]), width = static_cast<size_t>(t.tiles[2 * i + 1]);
    TileOfWidth<kPixels, kBlocks, kStride>(width, t, t.x + ox * t.pixel_stride, t.y + ox * kLanes);
  }
}

template <size_t kBlocks, size_t kPixels>
HWY_INLINE void RowOfStride(const ConvRow& t) {
  if (t.pixel_stride == kLanes) return RowTiles<kBlocks, kPixels, 1>(t);
  if (t.pixel_stride == 2 * kLanes) return RowTiles<kBlocks, kPixels, 2>(t);
  RowTiles<kBlocks, kPixels, 0>(t);
}

// Every tile of the row (each at most ConvTilePixels(blocks) wide).
void ConvRowRun(const ConvRow& t) {
  if (t.blocks == kWideBlocks) return RowOfStride<kWideBlocks, kWidePixels>(t);
  RowOfStride<kNarrowBlocks, kNarrowPixels>(t);
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace opfuse {
namespace hwy_cpu {
HWY_EXPORT(ConvBlock);
HWY_EXPORT(ConvTilePixels);
HWY_EXPORT(ConvRowRun);

void conv_row_run(const ConvRow& row) { HWY_DYNAMIC_DISPATCH(ConvRowRun)(row); }
size_t conv_tile_pixels(size_t blocks) { return HWY_DYNAMIC_DISPATCH(ConvTilePixels)(blocks); }
}  // namespace hwy_cpu

namespace {

using Dims = std::vector<int64_t>;

// Below this many multiply-adds one thread does the conv (as cpu.gemm).
constexpr int64_t kParallelMacs = int64_t{1} << 18;
// 1x1 convs up to this many multiply-adds run here (oneDNN's split of them is poor), and their
// rows are folded up to this width. Measured on a Zen 3 (AVX2, 2 threads), chains of 1x1 convs +
// ReLU alternating between two widths, time against oneDNN's jit_1x1: 64 <-> 32 on 16x16 and
// 128 <-> 64 on 8x8 (0.5M multiply-adds each) 0.67-0.77; 32 <-> 64 on 32x32 (2.1M) 1.14-1.23;
// 64 <-> 384 on 14x14 1.13-1.20; ResNet-50's and MobileNet-V2's sizes 1.09-1.39.
constexpr int64_t kSmallProductMacs = int64_t{1} << 20;
constexpr int64_t kFoldedRowPixels = 64;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Plan {
  int64_t n = 0, c = 0, h = 0, w = 0;   // X (logical)
  int64_t m = 0, oh = 0, ow = 0;        // Y (logical)
  int64_t kh = 0, kw = 0, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
  int64_t lanes = 0;                    // the block
  BlockedConvOperands operands;
};

std::optional<Plan> plan_of(const KernelCompileContext& ctx) {
  auto in = blocked_conv_operands(ctx);
  if (!in) return std::nullopt;
  const std::vector<int64_t>&x = in->x, &w = in->w, &y = in->y;
  const AttrReader attrs(ctx.node);
  Plan p;
  apply_target_caps();  // the vector is the capped target's
  p.lanes = static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(hwy_cpu::ConvBlock)());
  p.m = w[0];
  p.c = w[1];
  if (attrs.get_int("group") != 1 || attrs.get_int("block") != p.lanes || p.m <= 0 || p.c <= 0) return std::nullopt;
  const int64_t cb = ceil_div(p.c, p.lanes), mb = ceil_div(p.m, p.lanes);
  // Panels of four output blocks, or two: the blocks must come in pairs.
  if (x[1] != cb || x[4] != p.lanes || y[1] != mb || y[4] != p.lanes || mb % 2 != 0) return std::nullopt;
  const auto g = onednn::conv_geometry_for(ctx, Dims{x[0], p.c, x[2], x[3]},
                                           Dims{y[0], p.m, y[2], y[3]}, false);
  if (!g || g->x.size() != 4) return std::nullopt;
  p.n = x[0], p.h = x[2], p.w = x[3], p.oh = y[2], p.ow = y[3];
  p.kh = w[2], p.kw = w[3];
  p.sh = g->strides[0], p.sw = g->strides[1];
  p.dh = g->dilations[0] + 1, p.dw = g->dilations[1] + 1;
  p.pt = g->pad_l[0], p.pl = g->pad_l[1], p.pb = g->pad_r[0], p.pr = g->pad_r[1];
  if (p.kh == 1 && p.kw == 1) {
    // A 1x1 window is a product. oneDNN's 1x1 kernel runs one thread at near the FMA peak (this
    // kernel takes 1.10-1.18x its time), but splits a small product badly over two threads: only
    // those are taken, stride 1 and unpadded, as one image of whole rows folded together (below).
    const int64_t macs = p.n * p.oh * p.ow * p.m * p.c;
    if (omp_get_max_threads() < 2 || macs > kSmallProductMacs || p.sh != 1 || p.sw != 1 || p.pt != 0 ||
        p.pl != 0 || p.pb != 0 || p.pr != 0) {
      return std::nullopt;
    }
    // Rows of a 1x1 conv are contiguous in X and Y, so k of them are one row k times as wide:
    // wider rows cut into fewer short tiles, while at least two rows remain for two threads.
    int64_t k = 1;
    for (int64_t d = 2; d <= p.oh / 2; ++d) {
      if (p.oh % d == 0 && d * p.ow <= kFoldedRowPixels) k = d;
    }
    p.h = p.oh = p.oh / k;
    p.w = p.ow = p.ow * k;
  }
  if (p.n <= 0 || p.oh <= 0 || p.ow <= 0) return std::nullopt;
  p.operands = std::move(*in);
  return p;
}

class DirectConvKernel final : public Kernel, public DirectConvRows {
 public:
  explicit DirectConvKernel(const Plan& p) : p_(p), epilogue_(*hwy_cpu::vector_epilogue(p.operands.epilogue)) {
    const int64_t b = p_.lanes, out_blocks = ceil_div(p_.m, b);
    blocks_ = out_blocks % 4 == 0 ? 4 : 2;
    mr_ = static_cast<int64_t>(hwy_cpu::conv_tile_pixels(static_cast<size_t>(blocks_)));
    groups_ = ceil_div(p_.c, b);
    panels_ = out_blocks / blocks_;
    padded_ = p_.pt > 0 || p_.pl > 0 || p_.pb > 0 || p_.pr > 0;
    hp_ = p_.h + p_.pt + p_.pb;
    wp_ = p_.w + p_.pl + p_.pr;
    // Weights: panel, input block, tap, lane, the panel's outputs; zero for padded channels.
    const int64_t taps = p_.kh * p_.kw, width = blocks_ * b, panel_floats = groups_ * taps * b * width;
    const std::string how = str_cat("cpu.conv m ", p_.m, " c ", p_.c, " taps ", taps, " lanes ", b, " width ", width);
    packed_ = pack_floats(*p_.operands.weights, how, static_cast<size_t>(panels_ * panel_floats), [&](float* dst) {
      const float* wsrc = p_.operands.weights->data<float>();
      for (int64_t panel = 0; panel < panels_; ++panel) {
        for (int64_t g = 0; g < groups_; ++g) {
          for (int64_t tap = 0; tap < taps; ++tap) {
            for (int64_t k = 0; k < b; ++k) {
              for (int64_t j = 0; j < width; ++j, ++dst) {
                const int64_t oc = panel * width + j, c = g * b + k;
                *dst = oc < p_.m && c < p_.c ? wsrc[(oc * p_.c + c) * taps + tap] : 0.0f;
              }
            }
          }
        }
      }
    });
    bias_.assign(static_cast<size_t>(panels_ * width), 0.0f);
    if (p_.operands.bias != nullptr) std::copy_n(p_.operands.bias->data<float>(), p_.m, bias_.begin());
    // A run's weights: taps x b x panel width floats per input block.
    split_ = direct_conv_split(groups_, taps * b * width * 4, p_.oh, p_.ow, mr_, p_.kh, p_.kw, p_.dh, p_.dw, wp_, b);
  }

  std::string_view name() const override { return "cpu.conv"; }
  // The weights and bias are packed at creation.
  bool reads_input(size_t i) const override { return i == 0 || (i == 3 && p_.operands.residual); }
  std::string implementation() const override {
    return str_cat(highway_dispatch_target(), " ", mr_, "x", blocks_ * p_.lanes, " ", split_.run_groups * p_.lanes,
                   " channels per run", padded_ ? ", padded copy" : "");
  }

  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    const int64_t b = p_.lanes, x_image = groups_ * p_.h * p_.w * b, y_image = panels_ * blocks_ * b * p_.oh * p_.ow;
    const Tensor* xt = in.empty() ? nullptr : in[0];
    const Tensor* rt = p_.operands.residual && in.size() > 3 ? in[3] : nullptr;
    Tensor* yt = out.empty() ? nullptr : out[0];
    if (xt == nullptr || xt->dtype() != DType::kF32 || xt->numel() != p_.n * x_image || yt == nullptr ||
        yt->dtype() != DType::kF32 || yt->numel() != p_.n * y_image ||
        (p_.operands.residual && (rt == nullptr || rt->dtype() != DType::kF32 || rt->numel() != p_.n * y_image))) {
      return Status::internal_error("cpu.conv: an operand does not have its planned shape");
    }
    // The zero-bordered copy of one image: the calling thread's, kept between runs (a kernel may
    // run on several sessions' threads at once).
    thread_local hwy::AlignedFreeUniquePtr<float[]> padded;
    thread_local size_t capacity = 0;
    const size_t padded_floats = static_cast<size_t>(groups_ * hp_ * wp_ * b);
    if (padded_ && capacity < padded_floats) {
      padded = hwy::AllocateAligned<float>(padded_floats);
      capacity = padded_floats;
    }
    const int64_t macs = p_.n * p_.oh * p_.ow * p_.m * p_.c * p_.kh * p_.kw;
    const int threads = macs >= kParallelMacs ? omp_get_max_threads() : 1;
    const int64_t bands = ceil_div(p_.oh, split_.band_rows), items = panels_ * bands;
    const int64_t chunk = std::max<int64_t>(1, items / (8 * threads));
    for (int64_t image = 0; image < p_.n; ++image) {
      const float* x = xt->data<float>() + image * x_image;
      float* y = yt->data<float>() + image * y_image;
      const float* residual = rt != nullptr ? rt->data<float>() + image * y_image : nullptr;
      float* xp = padded_ ? padded.get() : nullptr;
#pragma omp parallel num_threads(threads) if (threads > 1)
      {
        if (xp != nullptr) {
#pragma omp for schedule(static)
          for (int64_t row = 0; row < groups_ * hp_; ++row) {
            copy_zero_bordered_row(x, xp, row, p_.h, p_.w, p_.pt, p_.pl, hp_, wp_, b);
          }
        }
        const Source src = xp != nullptr ? Source{xp, hp_, wp_, split_.taps.data()}
                                         : Source{x, p_.h, p_.w, split_.taps.data()};
        if (product_) {
          // Band-major and static: a thread takes the same pixels in every product, which a
          // chain of them (a bottleneck's 1x1 pair) then finds in its own L2 (0.67-0.75 of the
          // dynamic split's time on 16x16 chains, 0.98 on fr_landmark).
#pragma omp for schedule(static)
          for (int64_t item = 0; item < items; ++item) {
            const int64_t oy = item / panels_ * split_.band_rows;
            run_band(src, y, residual, item % panels_, oy, std::min(p_.oh, oy + split_.band_rows));
          }
        } else {
#pragma omp for schedule(dynamic, chunk)
          for (int64_t item = 0; item < items; ++item) {
            const int64_t oy = item % bands * split_.band_rows;
            run_band(src, y, residual, item / bands, oy, std::min(p_.oh, oy + split_.band_rows));
          }
        }
      }
    }
    return Status::ok();
  }

  void run_rows(const float* src, int64_t src_h, int64_t src_w, float* y, const float* residual, int64_t oy0,
                int64_t oy1) const override {
    std::vector<size_t> taps;
    for (int64_t ky = 0; ky < p_.kh; ++ky) {
      for (int64_t kx = 0; kx < p_.kw; ++kx) {
        taps.push_back(static_cast<size_t>((ky * p_.dh * src_w + kx * p_.dw) * p_.lanes));
      }
    }
    const Source source{src, src_h, src_w, taps.data()};
    for (int64_t panel = 0; panel < panels_; ++panel) run_band(source, y, residual, panel, oy0, oy1);
  }

 private:
  // The image the window reads: X, or a zero-bordered copy of it, h x w pixels per input block;
  // each tap's offset from an output pixel's input in it.
  struct Source {
    const float* x;
    int64_t h, w;
    const size_t* taps;
  };

  // Output rows [oy0, oy1) of one panel: for each run of input blocks, the tiles of every row
  // (the run's weights stay in L1 across the band), then the epilogue over each row of each output
  // block (contiguous, still in L1). `src` is X, or its padded copy when there is padding (then
  // the window's origin is the copy's origin: no negative offsets).
  void run_band(const Source& src, float* y, const float* residual, int64_t panel, int64_t oy0, int64_t oy1) const {
    const int64_t b = p_.lanes, plane = p_.oh * p_.ow, in_w = src.w, in_h = src.h;
    hwy_cpu::ConvRow t{};
    t.pixel_stride = static_cast<size_t>(p_.sw * b);
    t.taps = src.taps;
    t.num_taps = split_.taps.size();
    t.group_stride = static_cast<size_t>(in_h * in_w * b);
    t.blocks = static_cast<size_t>(blocks_);
    t.y_group = static_cast<size_t>(plane * b);
    t.tiles = split_.row_tiles.data();
    t.num_tiles = split_.row_tiles.size() / 2;
    const int64_t group_weights = p_.kh * p_.kw * b * blocks_ * b;
    const float* panel_weights = packed_->get() + panel * groups_ * group_weights;
    float* const y_panel = y + blocks_ * panel * plane * b;
    for (int64_t g0 = 0; g0 < groups_; g0 += split_.run_groups) {
      const int64_t g1 = std::min(groups_, g0 + split_.run_groups);
      t.groups = static_cast<size_t>(g1 - g0);
      t.w = panel_weights + g0 * group_weights;
      t.accumulate = g0 > 0;
      t.bias = g1 == groups_ ? bias_.data() + panel * blocks_ * b : nullptr;
      for (int64_t oy = oy0; oy < oy1; ++oy) {
        t.x = src.x + g0 * t.group_stride + oy * p_.sh * in_w * b;
        t.y = y_panel + oy * p_.ow * b;
        hwy_cpu::conv_row_run(t);
      }
    }
    for (int64_t j = 0; j < blocks_ && !epilogue_.empty(); ++j) {
      const int64_t offset = (blocks_ * panel + j) * plane * b + oy0 * p_.ow * b;
      hwy_cpu::apply_epilogue_here(epilogue_, y + offset, residual != nullptr ? residual + offset : nullptr,
                                   (oy1 - oy0) * p_.ow * b);
    }
    // Padded output lanes are zero, as the reference's (ops/layout_ops.cc): their weights are, but
    // a NaN or Inf input times zero is NaN, which the next conv would read into every channel.
    const int64_t last = p_.m / b, real = p_.m % b;
    if (real != 0 && last / blocks_ == panel) {
      float* pixel = y + last * plane * b + oy0 * p_.ow * b;
      for (int64_t i = 0; i < (oy1 - oy0) * p_.ow; ++i, pixel += b) std::fill(pixel + real, pixel + b, 0.0f);
    }
  }

  Plan p_;
  hwy_cpu::VectorEpilogue epilogue_;
  int64_t mr_ = 0, groups_ = 0, panels_ = 0, hp_ = 0, wp_ = 0;
  int64_t blocks_ = 2;  // output blocks per panel: 4, or 2 when they do not come in fours
  bool padded_ = false;
  bool product_ = p_.kh == 1 && p_.kw == 1;  // a 1x1 conv (split by pixels, statically)
  DirectConvSplit split_;
  PackedFloats packed_;
  std::vector<float> bias_;  // padded to whole panels
};

bool supports(const KernelCompileContext& ctx) { return plan_of(ctx).has_value(); }

Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
  const auto p = plan_of(ctx);
  if (!p) return Status::internal_error(str_cat(ctx.node.describe(), ": not a cpu.conv node"));
  return std::unique_ptr<Kernel>(std::make_unique<DirectConvKernel>(*p));
}

}  // namespace

std::unique_ptr<DirectConvRows> direct_conv_rows(const KernelCompileContext& ctx) {
  const auto p = plan_of(ctx);
  if (!p) return nullptr;
  return std::make_unique<DirectConvKernel>(*p);
}

// Measured on an AMD EPYC Zen 3 (AVX2, 2 threads), each conv alone between two 1x1 convs, median
// us of alternating runs, oneDNN 2.6's jit:avx2 against this kernel: 3x3 64->64 on 56x56
// 1644/1548, 128->128 on 28x28 1752/1726, 256->256 on 14x14 2030/1720, 512->512 on 7x7 2426/2237,
// 128->128 stride 2 on 56x56 1922/1697, 128->32 on 80x80 about even. On one core, oneDNN's
// kernel runs at 0.9 of the FMA peak and this one as fast, but oneDNN's two-thread split scales
// worse. Not measured against AVX-512 kernels (oneDNN's brgemm convs there): those keep oneDNN.
bool direct_conv_wins(const Target& target) { return target.isa < IsaTier::kAvx512Core; }

KernelImpl direct_conv_kernel() {
  return {"cpu.conv", "BlockedConv", supports, create,
          [](const Target& target, const KernelCompileContext&) { return direct_conv_wins(target); }};
}

}  // namespace opfuse
#endif  // HWY_ONCE
