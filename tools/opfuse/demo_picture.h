// The demo's before/after pictures as Graphviz DOT text, until the report library's renderer
// (issue 6) lands: one box per node (op type and name), fused nodes filled, constants left out.
#pragma once

#include <string>

#include "ir/graph.h"

namespace opfuse::cli {

std::string graph_to_dot(const Graph& graph, const std::string& title);

}  // namespace opfuse::cli
