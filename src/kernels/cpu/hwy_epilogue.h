// An epilogue (ops/fused.h) applied by our own vector code, in place over an anchor's output:
// for the post-ops oneDNN 2.6's convolution kernels run slowly. Measured on a 1x1 conv
// 16 -> 96 at 112x112 (nChw16c, 2 threads): 380-450 us plain, +0-50 with relu, +50 with clip,
// +350 with hardswish, +600 with exp, +1100-1200 with logistic or swish (x * sigmoid(x)), +800
// with tanh, +1300 with gelu_erf; a 3x3 depthwise conv at the same size: +950 with swish.
// That is 1 ns per element for swish, while the same pass here costs a fraction of that.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "ops/fused.h"

namespace opfuse::hwy_cpu {

// One post-op resolved for the vector loop.
struct VectorPostOp {
  enum class Kind {
    kRelu, kLeakyRelu, kClip, kSigmoid, kSigmoidMul, kHardSwish, kTanh, kElu, kGeluErf,
    kGeluTanh, kHardSigmoid, kLinear, kAdd,
  };
  Kind kind;
  float a = 0, b = 0;  // the post-op's parameters (alpha; min, max; a, b)
};

// The post-ops in vector form; nullopt when one is not known here.
std::optional<std::vector<VectorPostOp>> vector_post_ops(std::span<const PostOp> ops);

// y = ops(y) elementwise over n floats, in place; kAdd reads `residual` (n floats).
void apply_post_ops(std::span<const VectorPostOp> ops, float* y, const float* residual, int64_t n);

}  // namespace opfuse::hwy_cpu
