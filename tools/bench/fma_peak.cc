// The FP32 FMA peak of this machine per ISA tier: independent FMA chains on ymm (AVX2) and zmm
// (AVX-512) registers, on 1 and on N OpenMP threads. Benchmarks quote their GFLOP/s as a fraction
// of the tier's peak measured in the same run (docs/benchmarks.md).
//   ninja -C build opfuse_fma_peak && ./build/opfuse_fma_peak [threads]
#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

constexpr long kIters = 200'000'000;

// 10 independent accumulators in named registers hide the FMA latency (4 cycles x 2 pipes on
// current cores); an array would be kept in memory and measure store forwarding instead.
#define OPFUSE_FMA_CHAINS(T, SET, FMA, SUM)                                          \
  T a0 = SET(1.0f), a1 = SET(1.1f), a2 = SET(1.2f), a3 = SET(1.3f), a4 = SET(1.4f); \
  T a5 = SET(1.5f), a6 = SET(1.6f), a7 = SET(1.7f), a8 = SET(1.8f), a9 = SET(1.9f); \
  const T m = SET(0.999999f), c = SET(1e-7f);                                      \
  for (long n = 0; n < iters; ++n) {                                               \
    a0 = FMA(a0, m, c), a1 = FMA(a1, m, c), a2 = FMA(a2, m, c), a3 = FMA(a3, m, c); \
    a4 = FMA(a4, m, c), a5 = FMA(a5, m, c), a6 = FMA(a6, m, c), a7 = FMA(a7, m, c); \
    a8 = FMA(a8, m, c), a9 = FMA(a9, m, c);                                         \
  }                                                                                \
  return SUM(a0) + SUM(a1) + SUM(a2) + SUM(a3) + SUM(a4) + SUM(a5) + SUM(a6) + SUM(a7) + SUM(a8) + SUM(a9);

__attribute__((target("avx2,fma"))) float ymm_loop(long iters) {
  OPFUSE_FMA_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_cvtss_f32)
}

__attribute__((target("avx512f"))) float zmm_loop(long iters) {
  OPFUSE_FMA_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_reduce_add_ps)
}

// GFLOP/s of `loop` over `threads` threads: 2 flops x lanes x 10 chains per iteration.
double gflops(float (*loop)(long), int lanes, int threads) {
  const long iters = kIters / 10;
  float sink = 0;
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  sink += loop(iters);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (sink == 12345.0f) std::puts("");  // keep the result alive
  return 2.0 * lanes * 10 * static_cast<double>(iters) * threads / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : omp_get_max_threads();
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    gflops(ymm_loop, 8, threads);  // warm-up (clocks, thread start)
    std::printf("avx2 (ymm FMA): %.1f GFLOP/s on 1 thread, %.1f on %d\n", gflops(ymm_loop, 8, 1),
                gflops(ymm_loop, 8, threads), threads);
  }
  if (__builtin_cpu_supports("avx512f")) {
    std::printf("avx512 (zmm FMA): %.1f GFLOP/s on 1 thread, %.1f on %d\n", gflops(zmm_loop, 16, 1),
                gflops(zmm_loop, 16, threads), threads);
  }
  return 0;
}
