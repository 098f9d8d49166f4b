// Test inputs for whole graphs: what every "compile it, run it, compare with eager mode" test
// feeds. Eager mode itself is runtime/eager.h's run_eager (the reference kernels, op by op).
#pragma once

#include <cstdint>

#include "core/random.h"
#include "ir/graph.h"
#include "runtime/session.h"

namespace opfuse::testing_graphs {

// Uniform f32 values in [lo, hi] for every (non-constant) graph input, which must have a static
// shape; input i is drawn with seed `first_seed + i`, so each input is reproducible on its own.
inline TensorMap random_inputs(const Graph& g, uint64_t first_seed, float lo = -2, float hi = 2) {
  TensorMap out;
  uint64_t seed = first_seed;
  for (const Value* v : g.inputs()) {
    if (v->is_constant()) continue;
    Tensor t = Tensor::zeros(DType::kF32, *static_dims(*v->shape)).value();
    Random rng(seed++);
    fill_uniform(t, rng, lo, hi);
    out[v->name()] = std::move(t);
  }
  return out;
}

}  // namespace opfuse::testing_graphs
