// A small CNN built in code (no files, fixed-seed random weights): the model `opfuse demo`
// runs and tests use. Stem Conv+BN+ReLU, a residual block, a strided Conv+BN+Clip(ReLU6), a
// depthwise Conv+BN+HardSwish, GlobalAveragePool, Flatten, Gemm, Softmax.
#pragma once

#include <cstdint>

#include "ir/graph.h"

namespace opfuse {

Result<Graph> build_demo_cnn(int64_t image_size = 224, uint64_t seed = 42);

}  // namespace opfuse
