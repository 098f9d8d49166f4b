// The register tile of the packed-panel GEMMs (cpu.gemm, packed_gemm_kernel.cc; cpu.gemm_i16,
// integer_gemm_kernel.cc) per Highway target: its geometry, the walk over one panel's rows in
// tiles (a narrow last panel through a tile-sized buffer) and the epilogue over a tile in L1
// before its only store to Y.
// Both kernels accumulate in 32-bit lanes, so one geometry serves them. Included once per target
// by foreach_target.h, hence the toggling include guard.
#if defined(OPFUSE_KERNELS_CPU_GEMM_TILE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef OPFUSE_KERNELS_CPU_GEMM_TILE_INL_H_
#undef OPFUSE_KERNELS_CPU_GEMM_TILE_INL_H_
#else
#define OPFUSE_KERNELS_CPU_GEMM_TILE_INL_H_
#endif

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "hwy/highway.h"
#include "kernels/cpu/hwy_epilogue-inl.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr size_t kGemmLanes = hn::MaxLanes(hn::ScalableTag<float>());
constexpr size_t kGemmPanel = 2 * kGemmLanes;  // NR
// MR: rows per tile. 2 * MR accumulators + 2 B vectors + 1 broadcast fit the register file
// (16 vector registers below AVX-512: 6 rows; 32 with it: 12 rows).
constexpr size_t kGemmTileRows = kGemmLanes >= 16 ? 12 : 6;

// Where a tile's rows of Y (and of the residual "add" reads) are: rows `ldc` floats apart, the
// second vector of a row `c_group` floats after the first (one vector in a row-major Y, a
// channel group in a blocked one).
struct TileRows {
  float* c;
  size_t ldc, c_group;
  const float* residual;  // null when the epilogue reads none
  size_t ldr;
};

// The first `width` columns of a tile row, between layouts whose two vectors are `*_group` apart.
HWY_INLINE void CopyTileRow(const float* from, size_t from_group, float* to, size_t to_group, size_t width) {
  std::memcpy(to, from, std::min(width, kGemmLanes) * sizeof(float));
  if (width > kGemmLanes) std::memcpy(to + to_group, from + from_group, (width - kGemmLanes) * sizeof(float));
}

// `rows` rows of one panel's K block, of which the first `width` columns are Y's, in tiles of MR
// rows: run(out, r0, n) computes rows [r0, r0 + n) into `out`. A full-width panel's tiles are
// Y's own rows; a narrower one's (the last panel) a zeroed tile-sized buffer holding what Y had
// (when the tile `accumulate`s onto it) and the residual, copied back after, so no store or load
// reaches past Y's row.
template <class Run>
HWY_INLINE void PanelTiles(const TileRows& y, size_t rows, size_t width, bool accumulate, Run&& run) {
  const bool narrow = width < kGemmPanel;
  for (size_t r0 = 0; r0 < rows; r0 += kGemmTileRows) {
    const size_t n = std::min(kGemmTileRows, rows - r0);
    const TileRows at{y.c + r0 * y.ldc, y.ldc, y.c_group, y.residual ? y.residual + r0 * y.ldr : nullptr, y.ldr};
    HWY_ALIGN float c[kGemmTileRows * kGemmPanel], res[kGemmTileRows * kGemmPanel];
    if (narrow) {
      std::fill(c, c + kGemmTileRows * kGemmPanel, 0.0f);
      for (size_t r = 0; r < n; ++r) {
        if (accumulate) CopyTileRow(at.c + r * at.ldc, at.c_group, c + r * kGemmPanel, kGemmLanes, width);
        if (at.residual) CopyTileRow(at.residual + r * at.ldr, at.c_group, res + r * kGemmPanel, kGemmLanes, width);
      }
    }
    // One call, so the tile code is inlined once.
    run(narrow ? TileRows{c, kGemmPanel, kGemmLanes, at.residual ? res : nullptr, kGemmPanel} : at, r0, n);
    if (narrow) {
      for (size_t r = 0; r < n; ++r) CopyTileRow(c + r * kGemmPanel, kGemmLanes, at.c + r * at.ldc, at.c_group, width);
    }
  }
}

// tile(std::integral_constant<size_t, k>()) for rows == k in [1, kMax]: one instantiation per row
// count, for a panel's last rows % MR.
template <size_t kMax, class Tile>
HWY_INLINE void WithRowCount(size_t rows, Tile&& tile) {
  if constexpr (kMax > 0) {
    if (rows == kMax) return tile(std::integral_constant<size_t, kMax>());
    WithRowCount<kMax - 1>(rows, tile);
  }
}

// The epilogue over `rows` rows of a tile computed into `tile` (rows of NR floats, a buffer in
// L1), then the only store to Y: the hand-written post-ops op by op over the tile's vectors (one
// dispatch per op and tile, the op's math inlined into a loop whose iterations the core
// overlaps), or the expression program over the tile as one contiguous run (its jumps paid once
// per tile). Storing the tile to Y first and reading it back stalled on the reload (Y's lines
// are written for the first time, so not yet in L1): at the AVX2 tier on a Zen 5, 57% of the
// epilogue's samples in BERT-base fell just after that load. Through the buffer (O3, --target
// avx2, 2 threads, alternating binaries): mlp_blocks 9.24-9.58 -> 8.71-9.11 ms, bert_small
// 20.3-20.6 -> 19.2-20.2, bert_base 130-141 -> 125-131. Each kernel calls it from one
// HWY_NOINLINE function per target: the post-op math inlined into every tile size made the
// sanitizer build of cpu.gemm take over 20 minutes.
HWY_INLINE void EpilogueIntoRows(const VectorEpilogue& e, float* HWY_RESTRICT tile, const TileRows& y, size_t rows) {
  const DF d;
  const bool reads_residual = e.reads_residual && y.residual != nullptr;
  if (!e.fast.empty()) {
    for (const FastPostOp& op : e.fast) {
      VisitKind(op.kind, [&](auto kind) HWY_ATTR {
        constexpr bool kAdd = decltype(kind)::value == FastPostOp::Kind::kAdd;
        for (size_t r = 0; r < rows; ++r) {
          for (size_t v = 0; v < 2; ++v) {
            float* x = tile + r * kGemmPanel + v * kGemmLanes;
            const VF res = kAdd && reads_residual ? hn::LoadU(d, y.residual + r * y.ldr + v * y.c_group) : hn::Zero(d);
            hn::Store(Apply<decltype(kind)::value>(d, op, hn::Load(d, x), res), d, x);
          }
        }
      });
    }
  } else {
    HWY_ALIGN float res[kGemmTileRows * kGemmPanel];
    HWY_ALIGN float slots[kMaxEpilogueInstrs * kEpilogueBlock];
    if (reads_residual) {
      for (size_t r = 0; r < rows; ++r) {
        CopyTileRow(y.residual + r * y.ldr, y.c_group, res + r * kGemmPanel, kGemmLanes, kGemmPanel);
      }
    }
    RunEpilogue(e, tile, reads_residual ? res : nullptr, rows * kGemmPanel, slots);
  }
  for (size_t r = 0; r < rows; ++r) {
    hn::StoreU(hn::Load(d, tile + r * kGemmPanel), d, y.c + r * y.ldc);
    hn::StoreU(hn::Load(d, tile + r * kGemmPanel + kGemmLanes), d, y.c + r * y.ldc + y.c_group);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#endif  // include guard
