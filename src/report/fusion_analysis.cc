#include "report/fusion_analysis.h"

#include <algorithm>

#include "ops/infer_shapes.h"
#include "ops/op_def.h"
#include "pipelines/pipeline.h"
#include "runtime/measuring_layout_timer.h"
#include "runtime/random_inputs.h"

namespace opfuse {
namespace {

int64_t bytes_of(const Value* v) {
  if (v == nullptr || !v->shape) return 0;
  auto dims = static_dims(*v->shape);
  if (!dims) return 0;
  int64_t n = static_cast<int64_t>(dtype_size(v->dtype));
  for (int64_t d : *dims) n *= d;
  return n;
}

Result<Graph> run_level(const Graph& bound, OptLevel level, const PipelineOptions& pipeline,
                        PassContext& context) {
  Graph graph = bound.clone();
  PipelineOptions options = pipeline;
  supply_layout_timer(options);
  OPFUSE_TRY(run_pipeline(graph, level, options, context));
  return graph;
}

}  // namespace

Result<Graph> bind_input_dims(const Graph& model, const std::map<std::string, int64_t>& dims) {
  std::vector<Shape> shapes;
  for (const Value* in : model.inputs()) {
    if (!in->shape) {
      return Status::user_error(str_cat("input '", in->name(), "' has unknown rank; its shape cannot be bound"));
    }
    shapes.push_back(make_shape(concrete_dims(*in->shape, dims)));
  }
  return bind_input_shapes(model, shapes);
}

Result<FusionAnalysis> analyze_fusion(const Graph& model, OptLevel level, const PipelineOptions& pipeline,
                                      const std::map<std::string, int64_t>& dims,
                                      const std::map<std::string, Tensor>& values) {
  OPFUSE_ASSIGN_OR_RETURN(Graph bound, bind_input_dims(model, dims));
  FusionAnalysis analysis;
  bind_input_values(bound, values, analysis.context);
  analysis.level = level;
  analysis.config = pipeline.fusion;
  PipelineOptions plain;  // O0 rewrites nothing the user could switch
  PassContext ignored;
  OPFUSE_ASSIGN_OR_RETURN(analysis.before, run_level(bound, OptLevel::kO0, plain, ignored));
  OPFUSE_ASSIGN_OR_RETURN(analysis.after, run_level(bound, level, pipeline, analysis.context));
  return analysis;
}

Result<FusionAnalysis> analyze_fusion_standard_only(const Graph& model, OptLevel level,
                                                    const PipelineOptions& pipeline,
                                                    const std::map<std::string, int64_t>& dims,
                                                    std::vector<std::string>& disabled,
                                                    const std::map<std::string, Tensor>& values) {
  PipelineOptions options = pipeline;
  for (int round = 0; round < 16; ++round) {
    OPFUSE_ASSIGN_OR_RETURN(FusionAnalysis a, analyze_fusion(model, level, options, dims, values));
    std::vector<const Node*> custom;
    for (const Node* n : a.after.nodes()) {
      if (!n->domain().empty()) custom.push_back(n);
    }
    if (custom.empty()) return a;
    // The last applied decision naming a custom node as its result made it what it is now
    // (a BN fold into the same Conv earlier made a standard Conv): switch that rule off, rerun.
    size_t before = disabled.size();
    for (const Node* n : custom) {
      const PassDecision* last = nullptr;
      for (const PassDecision& d : a.context.decisions) {
        if (d.applied && d.result == n->name()) last = &d;
      }
      if (last == nullptr) continue;
      const std::string rule = last->rule.empty() ? last->pass : last->rule;
      if (options.fusion.disabled_rules.insert(rule).second) disabled.push_back(rule);
    }
    if (disabled.size() == before) {
      return Status::user_error(str_cat(custom.front()->describe(), " is outside the standard ONNX domain and no "
                                        "fusion rule recorded creating it; cannot export standard ops only"));
    }
  }
  return Status::internal_error("standard-only export did not converge");
}

bool runs_kernel(const Node& node) {
  const Value* out0 = node.output(0);
  if (!node.def().traits.output_is_view || !node.has_input(0) || out0 == nullptr ||
      out0->is_graph_output()) {
    return true;
  }
  for (size_t i = 1; i < node.outputs().size(); ++i) {
    const Value* v = node.output(i);
    if (v && (!v->uses().empty() || v->is_graph_output())) return true;
  }
  return false;
}

int64_t estimated_traffic_bytes(const Graph& graph) {
  int64_t total = 0;
  for (const Node* node : graph.nodes()) {
    if (!runs_kernel(*node)) continue;
    for (const Value* in : node->inputs()) total += bytes_of(in);
    for (const Value* out : node->outputs()) total += bytes_of(out);
  }
  return total;
}

size_t count_kernels(const Graph& graph) {
  size_t n = 0;
  for (const Node* node : graph.nodes()) n += runs_kernel(*node);
  return n;
}

}  // namespace opfuse
