// Shape and dtype inference over a whole graph: runs each node's OpDef::infer in topological
// order, feeding it the data of constant inputs, and writes the result onto the output values.
#pragma once

#include "ir/graph.h"

namespace opfuse {

// Fails with the node named when an inference function rejects its inputs. Shapes a model
// declared for its outputs are kept where inference knows less (e.g. symbolic vs unknown).
Status infer_shapes(Graph& graph);

// A copy of `model` with its inputs given `input_shapes` (one per input, in order) and every
// other shape inferred anew from them, apart from the shapes the model declares for its outputs
// (merged as infer_shapes merges them): how a graph with symbolic dims is compiled for concrete
// ones (Session per run shape, the fusion report for --dim values).
Result<Graph> bind_input_shapes(const Graph& model, const std::vector<Shape>& input_shapes);

}  // namespace opfuse
