// Blocks and thread shares of the packed-panel GEMMs (kernels/cpu/gemm_blocking.h).
#include "kernels/cpu/gemm_blocking.h"

#include <algorithm>

namespace opfuse {

GemmBlocks gemm_blocks(const Target& target, int64_t k, int64_t panels, int64_t panel_width, int64_t tile_rows,
                       int64_t element_bytes, int64_t k_multiple) {
  const int64_t l2 = target.l2_bytes > 0 ? target.l2_bytes : 512 * 1024;
  const int64_t l3 = target.l3_bytes > 0 ? target.l3_bytes : 4 * l2;
  const int64_t l3_share = std::max<int64_t>(l2, l3 / std::max(1, target.cores));
  const int64_t kc_max = std::max<int64_t>(64, l2 / 8 / (panel_width * element_bytes));
  const int64_t k_blocks = (k + kc_max - 1) / kc_max;
  GemmBlocks b;
  b.kc = ((k + k_blocks - 1) / k_blocks + k_multiple - 1) / k_multiple * k_multiple;
  const int64_t row_bytes = b.kc * element_bytes;
  const int64_t thread_panels = (panels + std::max(1, target.cores) - 1) / std::max(1, target.cores);
  const bool weights_in_l2 = thread_panels * panel_width * row_bytes <= l2 / 2;
  b.mc = std::max(tile_rows, (weights_in_l2 ? l2 / 4 : l3_share / 2) / row_bytes / tile_rows * tile_rows);
  return b;
}

GemmShare gemm_share(int64_t panels, int64_t m, int64_t tile_rows, int64_t t, int64_t nt, bool last_panel_half) {
  GemmShare s{0, panels, 0, m};
  // Work in half panels (vectors of columns) of panels [p0, p1).
  const auto work = [&](int64_t p0, int64_t p1) { return 2 * (p1 - p0) - (last_panel_half && p1 == panels && p1 > p0); };
  bool by_panels = panels >= 2 * nt || m < nt * tile_rows;
  if (by_panels && m >= nt * tile_rows) {
    int64_t most = 0;
    for (int64_t i = 0; i < nt; ++i) most = std::max(most, work(panels * i / nt, panels * (i + 1) / nt));
    by_panels = most * nt * 10 <= work(0, panels) * 11;
  }
  if (by_panels) {
    s.p0 = panels * t / nt;
    s.p1 = panels * (t + 1) / nt;
  } else {
    const int64_t tiles = (m + tile_rows - 1) / tile_rows;
    s.r0 = std::min(m, tiles * t / nt * tile_rows);
    s.r1 = std::min(m, tiles * (t + 1) / nt * tile_rows);
  }
  return s;
}

}  // namespace opfuse
