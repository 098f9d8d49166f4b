// Eager mode: runs a graph node by node with the reference kernels, allocating each output as it
// is produced and dropping each intermediate after its last use. The correctness oracle and the
// baseline every later speed-up is measured against.
#pragma once

#include <map>
#include <string>

#include "ir/graph.h"

namespace opfuse {

using TensorMap = std::map<std::string, Tensor>;

// Runs `graph` (topologically sorted) on `inputs` keyed by graph input name; inputs are assumed
// already checked against the signature (Session does that). Returns the graph outputs by name.
Result<TensorMap> run_eager(const Graph& graph, const TensorMap& inputs);

}  // namespace opfuse
