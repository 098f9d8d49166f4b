// What the fusion passes did to one model at one level, computed once and shared by the fusion
// report, the pictures and the export: the graph before fusion (O0: as imported, shape
// arithmetic folded), the graph after the level's passes, and every decision and rule counter.
// Shapes are bound (symbolic dims from `dims`, else 1), as graph mode compiles per shape.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "ir/graph.h"
#include "passes/pass.h"
#include "pipelines/pipeline.h"

namespace opfuse {

struct FusionAnalysis {
  OptLevel level = OptLevel::kO1;
  FusionConfig config;
  Graph before;  // the O0 graph: what runs with no rewrites
  Graph after;   // the level's graph
  PassContext context;  // the level's decisions and rule counters
};

// The model with every input's shape made static: symbolic dims from `dims` (default 1), bound
// as Session binds a run's shapes (ops/infer_shapes.h: bind_input_shapes).
Result<Graph> bind_input_dims(const Graph& model, const std::map<std::string, int64_t>& dims);

// Runs O0 and the level (with `pipeline`, whose fusion config applies) on the bound model;
// `values` binds inputs to values as graph mode does for scalar settings an If depends on.
Result<FusionAnalysis> analyze_fusion(const Graph& model, OptLevel level, const PipelineOptions& pipeline,
                                      const std::map<std::string, int64_t>& dims = {},
                                      const std::map<std::string, Tensor>& values = {});

// The same, restricted to standard ONNX ops: rules whose applied decisions produced a node outside
// the default domain are disabled and the level rerun until none is left (folds and fusions into
// standard ops stay). `disabled` gets the rules switched off.
Result<FusionAnalysis> analyze_fusion_standard_only(const Graph& model, OptLevel level,
                                                    const PipelineOptions& pipeline,
                                                    const std::map<std::string, int64_t>& dims,
                                                    std::vector<std::string>& disabled,
                                                    const std::map<std::string, Tensor>& values = {});

// Whether a compiled plan runs a kernel for this node (views of intermediates alias instead).
bool runs_kernel(const Node& node);
// Estimated bytes a run moves: every kernel reads its inputs (weights included) and writes its
// outputs once.
int64_t estimated_traffic_bytes(const Graph& graph);
size_t count_kernels(const Graph& graph);

}  // namespace opfuse
