// opfuse::FusedRegion: a region of elementwise/broadcast/injective/reduction ops fused into one
// kernel by region fusion (passes/region_fusion.cc). The node is self-describing: its `body`
// attribute is the member subgraph in the text IR (ir/text_format.h), whose graph inputs are the
// node's inputs and whose outputs are the node's outputs, in order. Exporter, viewer and reports
// need nothing region-specific; the reference kernel runs the body with the reference kernels
// (the oracle), the optimised kernel compiles it into a FusedProgram once.
#pragma once

#include <memory>
#include <string>

#include "ir/graph.h"

namespace opfuse {

inline constexpr std::string_view kFusedRegionOp = "FusedRegion";

// The parsed body of a FusedRegion node (parsed once per distinct text, then shared).
Result<std::shared_ptr<const Graph>> fused_region_body(const Node& node);

// The text of a body graph, with every constant printed in full.
std::string print_region_body(const Graph& body);

}  // namespace opfuse
