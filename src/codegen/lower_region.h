// Lowering a fused region (its member subgraph, as a Graph whose inputs are the region's inputs
// and whose outputs are the region's outputs) into a FusedProgram.
//
// The program is built by inlining from the outputs: a value is emitted under the index map
// that takes iteration coordinates to its own coordinates. Elementwise and broadcast members
// splice in their OpDef's ScalarExpr (inputs emitted under the map extended by the broadcast),
// injective members (Reshape, Transpose, Slice, Expand, Squeeze/Unsqueeze/Flatten) extend the
// map, Pad/Concat/Gather become table loads of region inputs, and a reduction along its input's
// last axis becomes a row reduction whose operand is emitted with the reduced axis mapped to the
// iteration's last dim. Whatever does not fit (a reduction whose rows would not line up with the
// iteration rows, an output of another shape, a non-f32 value) is a user-facing reason string,
// which region fusion records as the refusal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/fused_program.h"
#include "ir/graph.h"

namespace opfuse::codegen {

struct LowerOptions {
  // Build the offset tables of non-affine loads (the kernel needs them; the fusion pass only
  // asks whether a region lowers and what it would cost).
  bool build_tables = true;
  int64_t max_row = 16384;  // longest row a reduction program keeps in its tile buffers
};

struct LowerStats {
  int64_t table_bytes = 0;          // memory of the offset tables
  int duplicated_expensive = 0;     // exp/erf/tanh/log/sigmoid/pow evaluated more than once per element
};

// `input_constants[i]`: the data of region input i when it is a compile-time constant (Gather
// indices, Slice starts ...), else null. Errors are user errors whose message is the reason.
Result<FusedProgram> lower_region(const Graph& body, const std::vector<const Tensor*>& input_constants,
                                  const LowerOptions& options = {}, LowerStats* stats = nullptr);

}  // namespace opfuse::codegen
