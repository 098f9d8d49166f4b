// The one matrix-multiply routine behind the reference kernels of Conv, ConvTranspose, MatMul and
// Gemm. Reference kernels are also the eager-mode baseline, so this is a plain but cache-blocked
// GEMM (packed panels, a register-tiled micro-kernel, OpenMP over output tiles) rather than a
// triple loop: eager ResNet-50 / BERT must finish in seconds, not minutes.
#pragma once

#include <cstdint>

namespace opfuse {

// C[m,n] = alpha * op(A) * op(B) + beta * C, all row-major.
//   op(A) is [m,k]: A itself (row stride lda >= k) or, with trans_a, the transpose of a stored
//   [k,m] matrix (lda >= m). Likewise op(B) is [k,n] from B or a stored [n,k] matrix.
// beta == 0 overwrites C without reading it (NaNs already in C do not leak through).
// With `parallel` the work is split over OpenMP threads; callers that already run inside a
// parallel loop (one GEMM per group or per batch) pass false.
// Defined for T = float and double.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc, bool parallel = true);

}  // namespace opfuse
