// Eager mode: runs a graph node by node with the reference kernels, allocating each output as it
// is produced and dropping each intermediate after its last use. The correctness oracle and the
// baseline every later speed-up is measured against.
#pragma once

#include <map>
#include <string>

#include "ir/graph.h"

namespace opfuse {

using TensorMap = std::map<std::string, Tensor>;

// What one eager run allocated, for comparing with graph mode's memory plan.
struct EagerStats {
  int64_t allocated_bytes = 0;  // every node output, summed: eager's total intermediates
  int64_t peak_live_bytes = 0;  // the most bytes alive at once (outputs freed after last use)
  size_t kernels = 0;           // nodes run
};

// Runs `graph` (topologically sorted) on `inputs` keyed by graph input name; inputs are assumed
// already checked against the signature (Session does that). Returns the graph outputs by name.
Result<TensorMap> run_eager(const Graph& graph, const TensorMap& inputs, EagerStats* stats = nullptr);

}  // namespace opfuse
