// How the packed-panel GEMMs (cpu.gemm, kernels/cpu/packed_gemm_kernel.cc, and cpu.gemm_i16,
// kernels/cpu/integer_gemm_kernel.cc) cut a product into cache-sized blocks and thread shares.
#pragma once

#include <cstdint>

#include "core/target.h"

namespace opfuse {

// Measured on a Zen 3 (AVX2, 2 threads, 32 KiB L1d, 512 KiB L2; in-process alternating runs of
// BERT-base and MLP products with weights streamed from memory): K blocks of 768-1024 (a panel's
// block from L2, which the next-panel prefetch and the hardware stream keep ahead of the FMAs)
// took 0.92-0.97 of the time of L1-sized blocks of 256, whose extra passes load and store every
// tile of Y again; cutting M into blocks that fit L2 (so B streams from memory once per block)
// took 1.0-1.06x. So kc is sized by L2 and mc by the thread's share of L3.
//
// But when a thread's panels of one K block fit in half of L2 (a 1x1 conv's weights), B is not
// what streams: then mc x kc elements fill a quarter of L2, so that every panel re-reads the
// block of A from L2, not from L3. On the channel-blocked A of a 1x1 conv each tile reads one
// line per channel group, 32-64 streams the prefetcher cannot follow, so A's misses dominated.
// `opfuse tune` on a Zen 3 (AVX2, 2 threads), cpu.gemm against oneDNN's jit_1x1 (+ SiLU) on
// chains of 1x1 convs: 256-512 channels at 40x40 2.9x -> 1.2-1.3x, 64-128 at 80x80 2.5x ->
// 1.5x, 32-64 at 160x160 2.2x -> 1.6x (oneDNN stays the default there). Plain products with
// small weights (8192x64x128, 3136x96x384, 1024x256x256) were unchanged within noise.
struct GemmBlocks {
  int64_t kc = 0;  // K block: one panel's kc x NR elements fill an eighth of L2
  int64_t mc = 0;  // rows of A per block (a multiple of MR): see above
};
// K (of `element_bytes` elements, NR = `panel_width` columns, MR = `tile_rows`) cut into equal
// blocks, each a multiple of `k_multiple` (a channel group of blocked A, a pair of int16 ...);
// B has `panels` panels, split between the target's cores.
GemmBlocks gemm_blocks(const Target& target, int64_t k, int64_t panels, int64_t panel_width, int64_t tile_rows,
                       int64_t element_bytes, int64_t k_multiple);

struct GemmShare {
  int64_t p0 = 0, p1 = 0;  // panels [p0, p1)
  int64_t r0 = 0, r1 = 0;  // rows [r0, r1)
};
// Thread t of nt: a share of the panels when there are enough for every thread (each then reads
// only its own share of the packed weights) and no share holds more than a tenth above the
// average work, else of the rows in whole tiles. `last_panel_half`: the last panel costs half
// (cpu.gemm runs a last panel of one vector on that vector alone). A 1x1 conv of 672 -> 112
// channels on nChw16c is 3.5 panels: by panels one thread had 2, the other 1.5.
GemmShare gemm_share(int64_t panels, int64_t m, int64_t tile_rows, int64_t t, int64_t nt,
                     bool last_panel_half = false);

}  // namespace opfuse
