// What `opfuse info` prints about a model: its signature, op histogram, parameter count and
// FLOPs (from each OpDef's flops function over the inferred static shapes).
#pragma once

#include <map>
#include <string>

#include "ir/graph.h"

namespace opfuse {

struct ModelSummary {
  size_t num_nodes = 0;
  std::map<std::string, int64_t> op_histogram;  // op type -> node count
  int64_t parameters = 0;       // elements in float constants (weights)
  int64_t constant_bytes = 0;   // bytes of all constants
  int64_t flops = 0;            // sum over nodes whose flops are known
  int64_t nodes_without_flops = 0;  // compute nodes whose flops are unknown (dynamic shapes)
};

ModelSummary summarize(const Graph& graph);
// Human-readable multi-line text (inputs, outputs, histogram, totals).
std::string format_summary(const Graph& graph, const ModelSummary& summary);
// "4.09 G", "25.6 M", "812 K".
std::string human_count(double n);

}  // namespace opfuse
