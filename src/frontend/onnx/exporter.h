// The ONNX exporter: an opfuse Graph (typically after optimisation) as an ONNX model.
//
// Standard ops are written at one ai.onnx opset (the smallest >= 13 every op used supports);
// opfuse's own fused ops go into the "opfuse" domain, version 1 (docs/opfuse-domain.md) with
// their attributes as they are: fused nodes are self-describing through attributes only, so
// this is generic and the importer loads them back through the same op records. Constants
// become initializers; every value with a known shape gets a value_info.
#pragma once

#include <string>

#include "core/status.h"
#include "ir/graph.h"

namespace opfuse {

struct OnnxExportOptions {
  std::string graph_name = "opfuse";
  // Fail when a node is outside the default ONNX domain (other runtimes could not load it).
  bool standard_only = false;
  // The ISA tier the graph was optimised for (isa_tier_name), recorded as the model's metadata
  // kTargetMetadataKey; the importer refuses the model when the active target is lower.
  std::string target;
};

inline constexpr const char* kTargetMetadataKey = "opfuse.target";

// The serialized ModelProto.
Result<std::string> export_onnx(const Graph& graph, const OnnxExportOptions& options = {});

}  // namespace opfuse
