// Shape and dtype inference over a whole graph: runs each node's OpDef::infer in topological
// order, feeding it the data of constant inputs, and writes the result onto the output values.
#pragma once

#include "ir/graph.h"

namespace opfuse {

// Fails with the node named when an inference function rejects its inputs. Shapes a model
// declared for its outputs are kept where inference knows less (e.g. symbolic vs unknown).
Status infer_shapes(Graph& graph);

}  // namespace opfuse
