// Structural checks of a graph against the op records: what every pass may assume and what the
// importer and each pass must leave true. Cheap (linear in the graph), so tests and debug
// pipelines run it after every pass.
#pragma once

#include "core/status.h"
#include "ir/graph.h"

namespace opfuse {

// Checks, stopping at the first failure:
//  - each node's input/output counts lie within its OpDef's [min, max], and its first
//    min_inputs inputs are present;
//  - every attribute is declared in the OpDef with the same AttrType; required ones are set;
//  - every input is a graph input, a constant, or an output of an earlier node (topological
//    order); each value is produced by at most one node, and never also a constant or input;
//  - graph outputs are graph inputs, constants or node outputs.
// These are user errors naming the node (a bad model, or a pass that built a bad graph from
// one). Broken internal links (producer/use lists that disagree with node inputs and outputs,
// duplicate names, values from another graph) are internal errors: only an opfuse bug makes them.
Status verify_graph(const Graph& graph);

}  // namespace opfuse
