#include "ops/gemm_reference.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace opfuse {
namespace {

// Blocking (Goto-style): a kKC-deep slice of B, kNC columns wide, is packed into column panels
// of kNR; a kMC-row slice of A into row panels of kMR. The micro-kernel multiplies one A panel by
// one B panel into a kMR x kNR register tile. Sizes keep a B panel in L1 and the A block in L2.
constexpr int64_t kMR = 6;
constexpr int64_t kKC = 256;
constexpr int64_t kMC = 72;   // multiple of kMR
constexpr int64_t kNC = 256;  // multiple of kNR for both float and double

template <typename T>
struct Simd {
  // 32-byte GCC vectors: AVX registers in the haswell clone, SSE pairs in the default one.
  typedef T Vec __attribute__((vector_size(32)));
  static constexpr int64_t kLanes = 32 / sizeof(T);
  static constexpr int64_t kNR = 2 * kLanes;  // two vectors per tile row
};

template <typename T>
struct GemmArgs {
  bool trans_a, trans_b;
  int64_t m, n, k;
  T alpha, beta;
  const T* a;
  int64_t lda;
  const T* b;
  int64_t ldb;
  T* c;
  int64_t ldc;
};

// op(A) rows [i0, i0+mc) x depth [p0, p0+kc) -> kMR-row panels, each stored depth-major
// (kMR values per depth step), zero-padded to a whole panel.
template <typename T>
[[gnu::always_inline]] inline void pack_a(const GemmArgs<T>& g, int64_t i0, int64_t mc,
                                          int64_t p0, int64_t kc, T* out) {
  for (int64_t ir = 0; ir < mc; ir += kMR) {
    const int64_t rows = std::min(kMR, mc - ir);
    for (int64_t p = 0; p < kc; ++p) {
      for (int64_t r = 0; r < kMR; ++r) {
        const int64_t i = i0 + ir + r, d = p0 + p;
        out[r] = r >= rows ? T(0) : g.trans_a ? g.a[d * g.lda + i] : g.a[i * g.lda + d];
      }
      out += kMR;
    }
  }
}

// op(B) depth [p0, p0+kc) x columns [j0, j0+nc) -> kNR-column panels stored depth-major.
template <typename T>
[[gnu::always_inline]] inline void pack_b(const GemmArgs<T>& g, int64_t p0, int64_t kc,
                                          int64_t j0, int64_t nc, T* out) {
  constexpr int64_t kNR = Simd<T>::kNR;
  for (int64_t jr = 0; jr < nc; jr += kNR) {
    const int64_t cols = std::min(kNR, nc - jr);
    for (int64_t p = 0; p < kc; ++p) {
      const int64_t d = p0 + p;
      if (!g.trans_b && cols == kNR) {
        std::memcpy(out, g.b + d * g.ldb + j0 + jr, sizeof(T) * kNR);
      } else {
        for (int64_t j = 0; j < kNR; ++j) {
          const int64_t col = j0 + jr + j;
          out[j] = j >= cols ? T(0) : g.trans_b ? g.b[col * g.ldb + d] : g.b[d * g.ldb + col];
        }
      }
      out += kNR;
    }
  }
}

// acc[kMR][kNR] = A panel * B panel over kc depth steps.
template <typename T>
[[gnu::always_inline]] inline void micro_kernel(int64_t kc, const T* __restrict ap,
                                                const T* __restrict bp, T* __restrict acc) {
  using Vec = typename Simd<T>::Vec;
  constexpr int64_t kLanes = Simd<T>::kLanes;
  Vec c[kMR][2] = {};
  for (int64_t p = 0; p < kc; ++p) {
    Vec b0, b1;
    std::memcpy(&b0, bp, sizeof(Vec));
    std::memcpy(&b1, bp + kLanes, sizeof(Vec));
#pragma GCC unroll 6
    for (int64_t r = 0; r < kMR; ++r) {
      const T a = ap[r];
      c[r][0] += a * b0;
      c[r][1] += a * b1;
    }
    ap += kMR;
    bp += 2 * kLanes;
  }
  std::memcpy(acc, c, sizeof(c));
}

// C[i0:i0+mc, j0:j0+nc] += alpha * op(A) op(B) over the whole depth.
template <typename T>
[[gnu::always_inline]] inline void tile_impl(const GemmArgs<T>& g, int64_t i0, int64_t mc,
                                             int64_t j0, int64_t nc, T* apack, T* bpack) {
  constexpr int64_t kNR = Simd<T>::kNR;
  alignas(64) T acc[kMR * kNR];
  for (int64_t p0 = 0; p0 < g.k; p0 += kKC) {
    const int64_t kc = std::min(kKC, g.k - p0);
    pack_a(g, i0, mc, p0, kc, apack);
    pack_b(g, p0, kc, j0, nc, bpack);
    for (int64_t jr = 0; jr < nc; jr += kNR) {
      const int64_t cols = std::min(kNR, nc - jr);
      for (int64_t ir = 0; ir < mc; ir += kMR) {
        const int64_t rows = std::min(kMR, mc - ir);
        micro_kernel(kc, apack + ir * kc, bpack + jr * kc, acc);
        // The first depth slice also applies beta (beta == 0 never reads C, so NaNs in it do
        // not leak); later slices accumulate.
        for (int64_t r = 0; r < rows; ++r) {
          T* crow = g.c + (i0 + ir + r) * g.ldc + j0 + jr;
          const T* arow = acc + r * kNR;
          if (p0 > 0 || g.beta == T(1)) {
            for (int64_t j = 0; j < cols; ++j) crow[j] += g.alpha * arow[j];
          } else if (g.beta == T(0)) {
            for (int64_t j = 0; j < cols; ++j) crow[j] = g.alpha * arow[j];
          } else {
            for (int64_t j = 0; j < cols; ++j) crow[j] = g.beta * crow[j] + g.alpha * arow[j];
          }
        }
      }
    }
  }
}

// The build uses no -march flag, so the hot loop is compiled twice: once for AVX2+FMA (picked at
// run time when the CPU has them) and once for baseline x86-64 (SSE2).
__attribute__((target("avx2,fma"))) void tile_f32_avx2(const GemmArgs<float>& g, int64_t i0,
                                                        int64_t mc, int64_t j0, int64_t nc,
                                                        float* ap, float* bp) {
  tile_impl(g, i0, mc, j0, nc, ap, bp);
}
__attribute__((target("avx2,fma"))) void tile_f64_avx2(const GemmArgs<double>& g, int64_t i0,
                                                        int64_t mc, int64_t j0, int64_t nc,
                                                        double* ap, double* bp) {
  tile_impl(g, i0, mc, j0, nc, ap, bp);
}
void tile_f32_base(const GemmArgs<float>& g, int64_t i0, int64_t mc, int64_t j0, int64_t nc,
                   float* ap, float* bp) {
  tile_impl(g, i0, mc, j0, nc, ap, bp);
}
void tile_f64_base(const GemmArgs<double>& g, int64_t i0, int64_t mc, int64_t j0, int64_t nc,
                   double* ap, double* bp) {
  tile_impl(g, i0, mc, j0, nc, ap, bp);
}

bool cpu_has_avx2_fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}
void tile(const GemmArgs<float>& g, int64_t i0, int64_t mc, int64_t j0, int64_t nc, float* ap,
          float* bp) {
  (cpu_has_avx2_fma() ? tile_f32_avx2 : tile_f32_base)(g, i0, mc, j0, nc, ap, bp);
}
void tile(const GemmArgs<double>& g, int64_t i0, int64_t mc, int64_t j0, int64_t nc, double* ap,
          double* bp) {
  (cpu_has_avx2_fma() ? tile_f64_avx2 : tile_f64_base)(g, i0, mc, j0, nc, ap, bp);
}

}  // namespace

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc, bool parallel) {
  if (m <= 0 || n <= 0) return;
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const bool par = parallel && !omp_in_parallel() && work >= 1e5;

  if (k <= 0 || alpha == T(0)) {  // no product: C = beta * C
    for (int64_t i = 0; i < m; ++i) {
      T* row = c + i * ldc;
      for (int64_t j = 0; j < n; ++j) row[j] = beta == T(0) ? T(0) : beta * row[j];
    }
    return;
  }

  const GemmArgs<T> g{trans_a, trans_b, m, n, k, alpha, beta, a, lda, b, ldb, c, ldc};
  const int64_t m_blocks = (m + kMC - 1) / kMC;
  const int64_t n_blocks = (n + kNC - 1) / kNC;
  const int64_t tiles = m_blocks * n_blocks;
  const int64_t mc_max = std::min(m, kMC), nc_max = std::min(n, kNC);
  const int64_t kc_max = std::min(k, kKC);
  const int64_t kNR = Simd<T>::kNR;

#pragma omp parallel if (par && tiles > 1)
  {
    // Per-thread packing buffers, rounded up to whole panels.
    std::vector<T> apack(((mc_max + kMR - 1) / kMR) * kMR * kc_max);
    std::vector<T> bpack(((nc_max + kNR - 1) / kNR) * kNR * kc_max);
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t i0 = (t / n_blocks) * kMC, j0 = (t % n_blocks) * kNC;
      tile(g, i0, std::min(kMC, m - i0), j0, std::min(kNC, n - j0), apack.data(), bpack.data());
    }
  }
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t, bool);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t, bool);

}  // namespace opfuse
