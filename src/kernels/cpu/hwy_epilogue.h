// An epilogue (ops/fused.h) applied by our own vector code, in place over an anchor's output:
// for the post-ops oneDNN 2.6's convolution kernels run slowly or not at all. Measured on a 1x1
// conv 16 -> 96 at 112x112 (nChw16c, 2 threads): 380-450 us plain, +0-50 with relu, +50 with
// clip, +350 with hardswish, +600 with exp, +1100-1200 with logistic or swish (x * sigmoid(x)),
// +800 with tanh, +1300 with gelu_erf; a 3x3 depthwise conv at the same size: +950 with swish.
// That is 1 ns per element for swish, while the same pass here costs a fraction of that.
//
// The post-ops are not written again here: their composed scalar expression (epilogue_expr)
// runs through the per-op vector code every elementwise kernel uses (hwy_vector_ops-inl.h), a
// block of a few vectors at a time so the whole program stays in L1.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kernels/cpu/hwy_vinstr.h"
#include "ops/fused.h"

namespace opfuse::hwy_cpu {

// The longest epilogue program the vector code runs (each instruction holds a block of
// scratch on the stack): a chain of a dozen activations fits.
constexpr size_t kMaxEpilogueInstrs = 64;

// An epilogue as a vector program over y (argument 0) and the residual (argument 1); no code for
// an empty epilogue.
struct VectorEpilogue {
  std::vector<VInstr> code;
  bool reads_residual = false;
};

// nullopt when a post-op has no expression or the program is longer than kMaxEpilogueInstrs.
std::optional<VectorEpilogue> vector_epilogue(std::span<const PostOp> ops);

// y = epilogue(y, residual) elementwise over n floats, in place; `residual` (n floats) is read
// when the epilogue adds it. Spread over OpenMP threads when n is large.
void apply_epilogue(const VectorEpilogue& e, float* y, const float* residual, int64_t n);
// The same on the calling thread only (for kernels that apply it to their own part of Y).
void apply_epilogue_here(const VectorEpilogue& e, float* y, const float* residual, int64_t n);

}  // namespace opfuse::hwy_cpu
