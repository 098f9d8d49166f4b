// "cpu.gemm": Y[M, N] = post(alpha * A[M, K] * B[K, N] + bias) with a constant B and M > 1
// (kernels/cpu/packed_gemm_kernel.h).
//
// Why not oneDNN everywhere: oneDNN 2.6's matmul on AVX2 is `gemm:jit`, which copies (packs) B on
// every call; for the transformer shapes that copy is a large share of the run (64x1024x1024:
// 1.5 ms, 89 GFLOP/s on a Zen 3). Here B is packed once, at creation, into panels of NR = two
// vectors' columns (alpha folded in, the last panel zero padded), K block by K block so that a
// thread's panels of one block are one sequential stream, and the product runs the classic
// register-tiled loop:
//   for each K block (kc rows: one panel's block of NR x kc floats in L2, gemm_blocking.h)
//     for each block of mc rows of A (mc x kc floats, in the thread's share of L3)
//       for each panel this thread owns
//         for each MR rows: MR x NR accumulators in registers, kc FMAs deep
// A is read in place (its rows strided by K): each broadcast load serves two FMAs, and the
// hardware prefetcher follows MR row streams; the full tiles of a panel share the prefetch of
// the next panel's block, a line every few K steps. After the last K block the bias is added to
// the accumulators; with an epilogue (hwy_epilogue-inl.h) the tile goes to a buffer in L1, the
// post-ops run there and the result is Y's only store. Threads split the panels (or, for narrow
// products, the rows) and write disjoint tiles.
// Measured at the AVX2 tier on a Zen 5 (mlp_blocks at O3, median ms, alternating runs): packing
// A's block per run (MR rows interleaved) 11.0 against 10.1 reading it in place; the K-block-major
// panel order and the prefetch each gained a few percent. On a Xeon (AVX2 tier, one core) the
// prefetch spread over the panel instead of issued in its first tile took six 64x1024x2048
// products with 48 MB of weights from 0.72 to 0.82 of the FMA peak.
#ifndef OPFUSE_KERNELS_CPU_PACKED_GEMM_KERNEL_DECLS_
#define OPFUSE_KERNELS_CPU_PACKED_GEMM_KERNEL_DECLS_
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "hwy/aligned_allocator.h"
#include "kernels/cpu/constant_weights_product.h"
#include "kernels/cpu/gemm_blocking.h"
#include "kernels/cpu/hwy_epilogue.h"
#include "kernels/cpu/packed_floats.h"
#include "kernels/cpu/packed_gemm_kernel.h"
#include "kernels/target_caps.h"

namespace opfuse::hwy_cpu {
// One call of the micro-kernel loop: rows of A times one panel's K block.
// A and Y are row-major, or channel-blocked (a 1x1 conv on nChw8c / nChw16c): then each group
// of one vector's columns is its own [rows, lanes] matrix, a_group (c_group) floats after the
// previous one.
struct GemmTile {
  bool blocked;
  const float* a;           // A's first row of the tile, at the K block's first column
  size_t lda;               // floats between rows of A
  size_t a_group;           // blocked: floats between A's groups of columns
  const float* b;           // the panel's K block: kc rows of NR floats, 64-byte aligned
  size_t kc;
  float* c;                 // Y's first element of the tile
  size_t ldc;
  size_t c_group;           // floats between the two vectors of a tile row of Y and of the residual
                            // (one vector when row-major)
  bool accumulate;          // add to Y (an earlier K block's sums) instead of starting at zero
  const float* next_b;      // rows of the next panel's K block to prefetch (NR floats each), or null
  size_t prefetch_rows;     // how many, one every `prefetch_every` steps of k
  size_t prefetch_every;
  // Only on the last K block (else null / 0):
  const float* bias;        // NR floats
  const VectorEpilogue* epilogue;  // null when there is none (or it is the clamp below)
  bool clamp;               // the epilogue is one Relu or Clip: accumulators clamped to [lo, hi]
  float lo, hi;
  const float* residual;    // "add"'s input at the tile's first element
  size_t ldr;
};
}  // namespace opfuse::hwy_cpu
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/packed_gemm_kernel.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/cpu/gemm_tile-inl.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// The tile's geometry (gemm_tile-inl.h): NR = two vectors, MR rows.
constexpr size_t kLanes = kGemmLanes, kPanel = kGemmPanel, kTileRows = kGemmTileRows;

size_t GemmPanelWidth() { return kPanel; }
size_t GemmTileRows() { return kTileRows; }

// The epilogue over a computed tile, then its store (gemm_tile-inl.h), one function per target.
HWY_NOINLINE void EpilogueTile(const GemmTile& t, float* tile, size_t rows) {
  EpilogueIntoRows(*t.epilogue, tile, TileRows{t.c, t.ldc, t.c_group, t.residual, t.ldr}, rows);
}

// Every accumulator set to zero in its register. A loop storing zeros into the arrays is what
// GCC's loop distribution turns into a memset: two `rep stos` of the arrays on the stack per
// tile, then loads of them into the registers, 14% of a 1x1 conv's samples with 16 input
// channels (Zen 4, AVX-512).
template <size_t... kRow>
HWY_INLINE void ZeroAccumulators(DF d, VF* acc0, VF* acc1, std::index_sequence<kRow...>) {
  ((acc0[kRow] = hn::Zero(d), acc1[kRow] = hn::Zero(d)), ...);
}

// kRows x NR of Y: accumulate over the K block in registers, add the bias, store; with an
// epilogue, the store goes to a tile in L1 that the epilogue stores to Y.
// kHalf: only the panel's first vector of columns is Y's (the last panel of an odd number of
// vectors): its FMAs and stores are left out.
template <size_t kRows, bool kPrefetch, bool kBlocked, bool kHalf = false>
HWY_INLINE void Tile(const GemmTile& t) {
  const DF d;
  const size_t c_group = kBlocked ? t.c_group : kLanes;
  // Every loop over the rows is unrolled completely (the pragmas), so each accumulator is one
  // register from the first FMA to the store. Left to its own size limits GCC kept the arrays on
  // the stack around the bias and the stores: 684 reloads of zmm accumulators in the AVX-512
  // tiles, 383 in the AVX2 ones; without them a 1x1 conv of 16 -> 64 channels at 112x112 went
  // 365 -> 285 us on one Zen 4 core (oneDNN's jit_1x1 249), mlp_blocks at --target avx2 0.977x.
  VF acc0[kRows], acc1[kRows];
  if (t.accumulate) {
#pragma GCC unroll 16
    for (size_t r = 0; r < kRows; ++r) {
      acc0[r] = hn::LoadU(d, t.c + r * t.ldc);
      if constexpr (!kHalf) acc1[r] = hn::LoadU(d, t.c + r * t.ldc + c_group);
    }
  } else {
    ZeroAccumulators(d, acc0, acc1, std::make_index_sequence<kRows>());
  }
  const float* HWY_RESTRICT b = t.b;
  // Steps [k, k1) of A's columns from `a` (its column k0 at a[k0]).
  const auto run = [&](const float* HWY_RESTRICT a, size_t k, size_t k1) HWY_ATTR {
    // Unrolled: the loop's adds and compare would otherwise take issue slots from the FMAs
    // (one core of the Xeon at AVX2, 128x768x3072: 0.85 -> 0.90 of the FMA peak; 8 no better).
#pragma GCC unroll 4
    for (; k < k1; ++k, b += kPanel) {
      const VF b0 = hn::Load(d, b), b1 = kHalf ? b0 : hn::Load(d, b + kLanes);
#pragma GCC unroll 16
      for (size_t r = 0; r < kRows; ++r) {
        const VF ar = hn::Set(d, a[r * t.lda + k]);
        acc0[r] = hn::MulAdd(ar, b0, acc0[r]);
        if constexpr (!kHalf) acc1[r] = hn::MulAdd(ar, b1, acc1[r]);
      }
    }
  };
  // Steps [k0, k1) of the K block: row-major A in one run; channel-blocked A a group of kLanes
  // columns at a time (k0 and k1 are multiples of kLanes there), each a [rows, kLanes] matrix,
  // so the group's steps address all rows from one pointer and unroll completely. (One
  // instantiation each: a loop's pointers in registers, not two loops'.)
  const auto steps = [&](size_t k0, size_t k1) HWY_ATTR {
    if constexpr (!kBlocked) {
      run(t.a, k0, k1);
    } else {
      for (size_t g = k0; g < k1; g += kLanes) {
        const float* HWY_RESTRICT a = t.a + g / kLanes * t.a_group;
#pragma GCC unroll 4
        for (size_t k = 0; k < kLanes; ++k, b += kPanel) {
          const VF b0 = hn::Load(d, b), b1 = kHalf ? b0 : hn::Load(d, b + kLanes);
#pragma GCC unroll 16
          for (size_t r = 0; r < kRows; ++r) {
            const VF ar = hn::Set(d, a[r * kLanes + k]);
            acc0[r] = hn::MulAdd(ar, b0, acc0[r]);
            if constexpr (!kHalf) acc1[r] = hn::MulAdd(ar, b1, acc1[r]);
          }
        }
      }
    }
  };
  if constexpr (kPrefetch) {
    // One panel row (one or two cache lines) every few steps: the tiles of a panel share the
    // next panel's block between them, so the stream from memory is as even as the FMAs.
    const float* next = t.next_b;
    size_t left = t.prefetch_rows;
    const size_t chunks = (t.kc + t.prefetch_every - 1) / t.prefetch_every;
    const size_t per_chunk = (left + chunks - 1) / chunks;
    for (size_t k0 = 0; k0 < t.kc; k0 += t.prefetch_every) {
      for (size_t i = 0; i < per_chunk && left != 0; ++i, --left, next += kPanel) {
        hwy::Prefetch(next);
        if constexpr (kPanel * sizeof(float) > 64) hwy::Prefetch(next + 16);
      }
      steps(k0, std::min(t.kc, k0 + t.prefetch_every));
    }
  } else {
    steps(0, t.kc);
  }
  if (t.bias != nullptr) {
    const VF c0 = hn::LoadU(d, t.bias), c1 = hn::LoadU(d, t.bias + kLanes);
#pragma GCC unroll 16
    for (size_t r = 0; r < kRows; ++r) {
      acc0[r] = hn::Add(acc0[r], c0);
      if constexpr (!kHalf) acc1[r] = hn::Add(acc1[r], c1);
    }
  }
  if (t.clamp) {  // in registers, before the only store (comparisons with NaN are false: NaN stays)
    const VF lo = hn::Set(d, t.lo), hi = hn::Set(d, t.hi);
#pragma GCC unroll 16
    for (size_t r = 0; r < kRows; ++r) {
      acc0[r] = hn::IfThenElse(hn::Lt(acc0[r], lo), lo, acc0[r]);
      if constexpr (!kHalf) acc1[r] = hn::IfThenElse(hn::Lt(acc1[r], lo), lo, acc1[r]);
    }
    if (t.hi < std::numeric_limits<float>::infinity()) {  // a Clip (a Relu has no upper bound)
#pragma GCC unroll 16
      for (size_t r = 0; r < kRows; ++r) {
        acc0[r] = hn::IfThenElse(hn::Gt(acc0[r], hi), hi, acc0[r]);
        if constexpr (!kHalf) acc1[r] = hn::IfThenElse(hn::Gt(acc1[r], hi), hi, acc1[r]);
      }
    }
  }
  if (t.epilogue != nullptr) {
    HWY_ALIGN float tile[kRows * kPanel];
#pragma GCC unroll 16
    for (size_t r = 0; r < kRows; ++r) {
      hn::Store(acc0[r], d, tile + r * kPanel);
      if constexpr (!kHalf) hn::Store(acc1[r], d, tile + r * kPanel + kLanes);
    }
    return EpilogueTile(t, tile, kRows);
  }
#pragma GCC unroll 16
  for (size_t r = 0; r < kRows; ++r) {
    hn::StoreU(acc0[r], d, t.c + r * t.ldc);
    if constexpr (!kHalf) hn::StoreU(acc1[r], d, t.c + r * t.ldc + c_group);
  }
}

// `rows` rows of one panel's K block, of which the first `width` columns are Y's (the last
// panel is narrower), in tiles (gemm_tile-inl.h's PanelTiles). A last panel of exactly one
// vector without an epilogue beyond a clamp (a 1x1 conv with an odd number of channel blocks,
// or N an odd multiple of the vector) runs its full tiles on that vector alone, in place: through
// the tile-sized buffer half of its FMAs were on zero columns and every tile was copied (1x1 conv
// of 672 -> 112 channels at 14x14, 2 threads, Zen 4: 156 -> 139 us with gemm_share weighing the
// half panel; oneDNN's jit_1x1 137-144).
template <bool kBlocked>
void PanelRows(const GemmTile& whole, size_t rows, size_t width) {
  size_t done = 0;
  if (width == kLanes && whole.epilogue == nullptr && whole.residual == nullptr) {
    for (; done + kTileRows <= rows; done += kTileRows) {
      GemmTile t = whole;
      t.a += done * t.lda;
      t.c += done * t.ldc;
      Tile<kTileRows, false, kBlocked, /*kHalf=*/true>(t);
    }
    if (done == rows) return;
  }
  GemmTile tile = whole;  // the rows left
  tile.a += done * tile.lda;
  tile.c += done * tile.ldc;
  if (tile.residual != nullptr) tile.residual += done * tile.ldr;
  rows -= done;
  const TileRows y{tile.c, tile.ldc, tile.c_group, tile.residual, tile.ldr};
  PanelTiles(y, rows, width, tile.accumulate, [&](const TileRows& out, size_t r0, size_t n) HWY_ATTR {
    GemmTile t = tile;
    t.a += r0 * t.lda;
    t.c = out.c;
    t.ldc = out.ldc;
    t.c_group = out.c_group;
    t.residual = out.residual;
    t.ldr = out.ldr;
    if (n < kTileRows) {  // the panel's last rows % MR
      return WithRowCount<kTileRows - 1>(n, [&](auto k) HWY_ATTR { Tile<decltype(k)::value, false, kBlocked>(t); });
    }
    if (t.next_b == nullptr) return Tile<kTileRows, false, kBlocked>(t);
    // Full tile j of `full` prefetches rows [j * share, (j + 1) * share) of the next panel's
    // block: spread over the whole panel, not burst in its first tile, where a block from
    // memory (weights beyond the caches) filled every line-fill buffer and stalled the loads
    // of A behind it.
    const size_t full = rows / kTileRows, share = (tile.kc + full - 1) / full, j = r0 / kTileRows;
    t.next_b += std::min(tile.kc, j * share) * kPanel;
    t.prefetch_rows = std::min(tile.kc, (j + 1) * share) - std::min(tile.kc, j * share);
    t.prefetch_every = std::max<size_t>(1, tile.kc / std::max<size_t>(1, t.prefetch_rows));
    // Blocked A is stepped a whole group at a time (kc is a multiple of kLanes there).
    if constexpr (kBlocked) t.prefetch_every = (t.prefetch_every + kLanes - 1) / kLanes * kLanes;
    Tile<kTileRows, true, kBlocked>(t);
  });
}

void GemmPanelRows(const GemmTile& tile, size_t rows, size_t width) {
  if (tile.blocked) return PanelRows<true>(tile, rows, width);
  PanelRows<false>(tile, rows, width);
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace opfuse {
namespace hwy_cpu {
HWY_EXPORT(GemmPanelWidth);
HWY_EXPORT(GemmTileRows);
HWY_EXPORT(GemmPanelRows);
}  // namespace hwy_cpu

namespace {

// Below this many multiply-adds one thread does the product: waking a second costs more.
constexpr int64_t kParallelMacs = int64_t{1} << 18;

class PackedGemmKernel final : public Kernel {
 public:
  explicit PackedGemmKernel(const ConstantWeightsProduct& p)
      : m_(p.m), k_(p.k), n_(p.n), images_(p.images), epilogue_(*hwy_cpu::vector_epilogue(p.epilogue)),
        has_residual_(p.has_residual()) {
    nr_ = static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(hwy_cpu::GemmPanelWidth)());
    mr_ = static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(hwy_cpu::GemmTileRows)());
    panels_ = (n_ + nr_ - 1) / nr_;
    lanes_ = nr_ / 2;
    blocked_ = p.channel_block > 0;  // product_of checked that the block is one vector
    lda_ = blocked_ ? lanes_ : k_;
    ldc_ = blocked_ ? lanes_ : n_;
    group_ = m_ * lanes_;
    choose_blocks(active_target());
    pack(p);
    const std::vector<float> bias = p.expanded_bias();
    if (!bias.empty()) {
      bias_.assign(static_cast<size_t>(panels_ * nr_), 0.0f);
      std::copy(bias.begin(), bias.end(), bias_.begin());
    }
  }

  std::string_view name() const override { return "cpu.gemm"; }
  // B is packed and a bias expanded at creation (create() declines a computed bias).
  bool reads_input(size_t i) const override { return i == 0 || (i == 3 && has_residual_); }
  std::string implementation() const override {
    return str_cat(highway_dispatch_target(), " ", mr_, "x", nr_, " kc ", kc_, blocked_ ? " blocked" : "");
  }

  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    auto f32_of = [&](size_t i, int64_t numel) -> const float* {
      const Tensor* t = i < in.size() ? in[i] : nullptr;
      return t && t->dtype() == DType::kF32 && t->numel() == numel ? t->data<float>() : nullptr;
    };
    const float* a = f32_of(0, images_ * m_ * k_);
    const float* residual = has_residual_ ? f32_of(3, images_ * m_ * n_) : nullptr;
    if (a == nullptr || (has_residual_ && residual == nullptr) || out.empty() || out[0] == nullptr ||
        out[0]->dtype() != DType::kF32 || out[0]->numel() != images_ * m_ * n_) {
      return Status::internal_error("cpu.gemm: an operand does not have its planned shape");
    }
    float* y = out[0]->data<float>();
    const int64_t threads = images_ * m_ * n_ * k_ >= kParallelMacs ? omp_get_max_threads() : 1;
#pragma omp parallel num_threads(static_cast<int>(threads)) if (threads > 1)
    {
      const GemmShare share = gemm_share(panels_, m_, mr_, omp_get_thread_num(), omp_get_num_threads(),
                                         /*last_panel_half=*/n_ % nr_ == lanes_ && clamp_or_none());
      for (int64_t i = 0; i < images_; ++i) {
        run_block(a + i * m_ * k_, residual != nullptr ? residual + i * m_ * n_ : nullptr, y + i * m_ * n_, share.p0,
                  share.p1, share.r0, share.r1);
      }
    }
    return Status::ok();
  }

 private:
  // gemm_blocking.h's blocks of floats; blocked A's start on a channel group.
  void choose_blocks(const Target& target) {
    const GemmBlocks b = gemm_blocks(target, k_, panels_, nr_, mr_, sizeof(float), blocked_ ? lanes_ : 1);
    kc_ = b.kc;
    mc_ = b.mc;
  }

  // Panel p holds columns [p * NR, p * NR + NR) of alpha * B as rows of NR floats, K block by
  // K block: block [k0, k0 + kc) of every panel in turn, so a thread's panels of one K block are
  // one sequential stream for the hardware prefetcher.
  const float* panel_block(int64_t p, int64_t k0, int64_t kc) const {
    return packed_->get() + (k0 * panels_ + p * kc) * nr_;
  }
  float* weight_slot(float* packed, int64_t p, int64_t i) const {
    const int64_t k0 = i / kc_ * kc_, kc = std::min(kc_, k_ - k0);
    return packed + (k0 * panels_ + p * kc + (i - k0)) * nr_;
  }

  // The packed panels depend on B's bytes and on these (the session's plans share them:
  // kernels/packed_weight_cache.h).
  void pack(const ConstantWeightsProduct& p) {
    uint32_t alpha_bits = 0;
    std::memcpy(&alpha_bits, &p.alpha, sizeof(alpha_bits));
    const std::string how = str_cat("cpu.gemm k ", k_, " n ", n_, p.trans_b ? " trans_b" : "", " alpha ", alpha_bits,
                                    " nr ", nr_, " kc ", kc_);
    packed_ = pack_floats(*p.b, how, static_cast<size_t>(panels_ * k_ * nr_), [&](float* packed) {
      for (int64_t panel = 0; panel < panels_; ++panel) {
        const int64_t col = panel * nr_, width = std::min(nr_, n_ - col);
        // Read B along its contiguous axis.
        if (p.trans_b) {
          for (int64_t j = 0; j < width; ++j) {
            for (int64_t i = 0; i < k_; ++i) weight_slot(packed, panel, i)[j] = p.alpha * p.weight(i, col + j);
          }
        } else {
          for (int64_t i = 0; i < k_; ++i) {
            float* dst = weight_slot(packed, panel, i);
            for (int64_t j = 0; j < width; ++j) dst[j] = p.alpha * p.weight(i, col + j);
          }
        }
      }
    });
  }

  // Rows [r0, r1) x panels [p0, p1) of Y: one thread's share.
  void run_block(const float* a, const float* residual, float* y, int64_t p0, int64_t p1, int64_t r0,
                 int64_t r1) const {
    for (int64_t k0 = 0; k0 < k_; k0 += kc_) {
      const int64_t kc = std::min(kc_, k_ - k0);
      const bool last = k0 + kc == k_;
      for (int64_t i0 = r0; i0 < r1; i0 += mc_) {
        const int64_t rows = std::min(mc_, r1 - i0);
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t col = p * nr_;
          hwy_cpu::GemmTile tile{};
          tile.blocked = blocked_;
          tile.a = a + i0 * lda_ + (blocked_ ? k0 / lanes_ * group_ : k0);
          tile.lda = static_cast<size_t>(lda_);
          tile.a_group = static_cast<size_t>(group_);
          tile.b = panel_block(p, k0, kc);
          tile.kc = static_cast<size_t>(kc);
          const int64_t c_at = i0 * ldc_ + (blocked_ ? col / lanes_ * group_ : col);
          tile.c = y + c_at;
          tile.ldc = static_cast<size_t>(ldc_);
          tile.c_group = static_cast<size_t>(blocked_ ? group_ : lanes_);
          tile.accumulate = k0 > 0;
          tile.next_b = p + 1 < p1 ? panel_block(p + 1, k0, kc) : nullptr;
          if (last) {
            tile.bias = bias_.empty() ? nullptr : bias_.data() + col;
            tile.epilogue = epilogue_.empty() || clamp_ ? nullptr : &epilogue_;
            tile.clamp = clamp_.has_value();
            tile.lo = clamp_ ? clamp_->first : 0.0f;
            tile.hi = clamp_ ? clamp_->second : 0.0f;
            tile.residual = residual != nullptr ? residual + c_at : nullptr;
            tile.ldr = static_cast<size_t>(ldc_);
          }
          HWY_DYNAMIC_DISPATCH(hwy_cpu::GemmPanelRows)(tile, static_cast<size_t>(rows),
                                                       static_cast<size_t>(std::min(nr_, n_ - col)));
        }
      }
    }
  }

  int64_t m_, k_, n_, images_;
  // A's and Y's layout (GemmTile): row-major, or channel-blocked images of m_ pixels, whose
  // groups of lanes_ channels are group_ floats apart.
  bool blocked_ = false;
  int64_t lanes_ = 0, lda_ = 0, ldc_ = 0, group_ = 0;
  hwy_cpu::VectorEpilogue epilogue_;
  // Whether the tiles store straight to Y (no epilogue, or only a clamp): then a last panel of
  // one vector runs on that vector alone (PanelRows).
  bool clamp_or_none() const { return (epilogue_.empty() || clamp_) && !has_residual_; }
  // (lo, hi) when the epilogue is one Relu or Clip, applied to the accumulators: through the L1
  // tile it took a 1x1 conv of 16 -> 64 channels at 112x112 from 143 to 180-203 us (2 threads, Zen 4).
  std::optional<std::pair<float, float>> clamp_ = hwy_cpu::clamp_of(epilogue_);
  bool has_residual_;
  int64_t nr_ = 0, mr_ = 0, panels_ = 0, kc_ = 0, mc_ = 0;
  PackedFloats packed_;
  std::vector<float> bias_;  // the constant bias, padded to whole panels
};

enum class Anchor { kMatMul, kGemm, kConv1x1 };

template <Anchor kAnchor, bool kFused>
std::optional<ConstantWeightsProduct> product_of(const KernelCompileContext& ctx) {
  // The panel width below is the dispatched target's: cap Highway first, also when supports()
  // is asked before any kernel was created (a tuner listing alternatives, a test).
  apply_target_caps();
  auto p = kAnchor == Anchor::kMatMul ? matmul_product(ctx, kFused)
           : kAnchor == Anchor::kGemm ? gemm_product(ctx, kFused)
                                      : blocked_conv_product(ctx);
  // M = 1 is cpu.gemv's; A transposed and a computed bias are left to oneDNN; a channel block
  // must be one vector of the micro-kernel.
  if (!p || p->m < 2 || p->trans_a || (p->bias_input >= 0 && p->bias_constant == nullptr) ||
      !hwy_cpu::vector_epilogue(p->epilogue) ||
      (p->channel_block > 0 &&
       p->channel_block * 2 != static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(hwy_cpu::GemmPanelWidth)()))) {
    return std::nullopt;
  }
  return p;
}

template <Anchor kAnchor, bool kFused>
bool supports(const KernelCompileContext& ctx) {
  return product_of<kAnchor, kFused>(ctx).has_value();
}

template <Anchor kAnchor, bool kFused>
Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
  auto p = product_of<kAnchor, kFused>(ctx);
  if (!p) return Status::internal_error(str_cat(ctx.node.describe(), ": not a cpu.gemm node"));
  return std::unique_ptr<Kernel>(std::make_unique<PackedGemmKernel>(*p));
}

}  // namespace

// Measured on a Zen 5 (2 threads, mlp_blocks at O3, median ms): at the AVX2 tier 10.1 here
// against 13.7 with oneDNN's gemm:jit; at AVX-512 6.5 here against 4.7 with oneDNN's brgemm
// matmul (which packs once too and has the wider 2-FMA-port kernel), so there oneDNN keeps it.
bool packed_gemm_wins(const Target& target) { return target.isa < IsaTier::kAvx512Core; }

// ResNet-50's 1x1 convs as products, each node timed in both kernels inside the model, 2
// threads, 3 alternating runs (the ratio normalised by the untouched 3x3 convs' drift): on a
// real AVX2 CPU (AMD EPYC Zen 3) cpu.gemm took 1.2-2.1x oneDNN's jit_1x1:avx2 on the 14x14
// stage and 0.9-1.3x on 7x7; `opfuse tune` kept oneDNN for all of them (whole model 0.91x).
// (At the AVX2 tier of an AVX-512 Xeon an earlier session measured oneDNN at 0.53-0.79 of the
// FMA peak on those stages and cpu.gemm ahead.) So oneDNN is the default everywhere and cpu.gemm
// an alternative that `opfuse tune` measures per model.
bool packed_gemm_wins_conv(const Target&) { return false; }

namespace {
bool gemm_preferred(const Target& target, const KernelCompileContext&) { return packed_gemm_wins(target); }
bool conv_preferred(const Target& target, const KernelCompileContext&) { return packed_gemm_wins_conv(target); }
}  // namespace

KernelImpl packed_matmul_kernel() {
  return {"cpu.gemm", "MatMul", supports<Anchor::kMatMul, false>, create<Anchor::kMatMul, false>, gemm_preferred};
}
KernelImpl packed_gemm_kernel() {
  return {"cpu.gemm", "Gemm", supports<Anchor::kGemm, false>, create<Anchor::kGemm, false>, gemm_preferred};
}
KernelImpl packed_fused_matmul_kernel() {
  return {"cpu.gemm", "FusedMatMul", supports<Anchor::kMatMul, true>, create<Anchor::kMatMul, true>, gemm_preferred};
}
KernelImpl packed_fused_gemm_kernel() {
  return {"cpu.gemm", "FusedGemm", supports<Anchor::kGemm, true>, create<Anchor::kGemm, true>, gemm_preferred};
}
KernelImpl packed_blocked_conv_kernel() {
  return {"cpu.gemm", "BlockedConv", supports<Anchor::kConv1x1, true>, create<Anchor::kConv1x1, true>, conv_preferred};
}

}  // namespace opfuse
#endif  // HWY_ONCE
