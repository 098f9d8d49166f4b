// An epilogue (ops/fused.h) applied by our own vector code, in place over an anchor's output:
// for the post-ops oneDNN 2.6's convolution kernels run slowly or not at all. Measured on a 1x1
// conv 16 -> 96 at 112x112 (nChw16c, 2 threads): 380-450 us plain, +0-50 with relu, +50 with
// clip, +350 with hardswish, +600 with exp, +1100-1200 with logistic or swish (x * sigmoid(x)),
// +800 with tanh, +1300 with gelu_erf; a 3x3 depthwise conv at the same size: +950 with swish.
// That is 1 ns per element for swish, while the same pass here costs a fraction of that.
// Hardswish is cheaper in oneDNN's kernels than that measurement said: on a Zen 5 (2 threads)
// +106 us on that conv (+208 at the AVX2 tier) and +0-12 us on 14x14 and 7x7 ones, less than a
// pass here over the output, so it stays inside them (onednn_post_ops.cc: cheap_in_conv).
//
// A post-op's math is its expression (ops/fused.h: epilogue_expr), which runs here through the
// per-op vector code every elementwise kernel uses (hwy_vector_ops-inl.h), a block of vectors
// at a time so the whole program stays in L1; the hot post-ops also have hand-written forms.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "kernels/cpu/hwy_vinstr.h"
#include "ops/fused.h"

namespace opfuse::hwy_cpu {

// The longest epilogue program the vector code runs (each instruction holds a block of
// scratch on the stack): a chain of a dozen activations fits.
constexpr size_t kMaxEpilogueInstrs = 64;

// A post-op with a hand-written vector form (hwy_epilogue-inl.h). These are optimisations of
// the hot post-ops, like oneDNN's counterparts, tested against the derived reference: run
// instruction by instruction, their expressions cost 1.3x to 3.7x as much (100K cache-resident
// floats, one thread, Zen 5, AVX-512, medians of 200: relu 7.5 us vs 10.3, hardswish 7.5 vs 28,
// clip 7.0 vs 15.4, SiLU 19 vs 24, gelu_erf 53 vs 67).
struct FastPostOp {
  enum class Kind {
    kRelu, kLeakyRelu, kClip, kSigmoid, kSigmoidMul, kHardSwish, kTanh, kElu, kGeluErf,
    kGeluTanh, kHardSigmoid, kLinear, kAdd,
  };
  Kind kind;
  float a = 0, b = 0;  // the post-op's parameters (alpha; min, max; a, b)
};

// An epilogue for the vector code: op by op through the hand-written forms when every post-op
// has one (`fast`), else its composed expression as one program over y (argument 0) and the
// residual (argument 1) (`code`). Both empty for an empty epilogue.
struct VectorEpilogue {
  std::vector<FastPostOp> fast;
  std::vector<VInstr> code;
  bool reads_residual = false;
  bool empty() const { return fast.empty() && code.empty(); }
};

// nullopt when a post-op has no expression or the program is longer than kMaxEpilogueInstrs.
// `hand_written` false: the program even when every post-op has a hand-written form (tests
// check both).
std::optional<VectorEpilogue> vector_epilogue(std::span<const PostOp> ops, bool hand_written = true);

// (lo, hi) when the epilogue is one Relu or Clip: kernels clamp their accumulators in registers
// before the only store (comparisons with NaN are false, so NaN stays NaN).
std::optional<std::pair<float, float>> clamp_of(const VectorEpilogue& e);

// The epilogue of anchor `node` (an opfuse op with an `epilogue` attribute and its residual as
// input 3) when a kernel can run it over its output of dims `y`: every post-op has a vector form,
// "add" appears exactly when the residual is given, and the residual has Y's dims; else nullopt.
std::optional<std::vector<PostOp>> anchor_vector_epilogue(const Node& node, const std::vector<int64_t>& y);

// y = epilogue(y, residual) elementwise over n floats, in place; `residual` (n floats) is read
// when the epilogue adds it. Spread over OpenMP threads when n is large.
void apply_epilogue(const VectorEpilogue& e, float* y, const float* residual, int64_t n);
// The same on the calling thread only (for kernels that apply it to their own part of Y).
void apply_epilogue_here(const VectorEpilogue& e, float* y, const float* residual, int64_t n);

}  // namespace opfuse::hwy_cpu
