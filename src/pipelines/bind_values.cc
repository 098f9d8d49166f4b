// Plans bound to input values: a scalar setting an If depends on (a sample rate choosing a
// branch) becomes a constant, so the If folds (inline_constant_if) and its branch is optimised
// with the rest of the graph. Session compiles a plan per value met; the report binds the
// values it is given.
#include <set>

#include "pipelines/pipeline.h"

namespace opfuse {

// The scalar integer or bool inputs some If reads, directly or through the nodes computing its
// inputs (its condition, and what its branches read, which may decide Ifs nested in them).
std::vector<size_t> inputs_deciding_ifs(const Graph& graph) {
  std::set<const Value*> seen;
  std::vector<const Value*> stack;
  for (const Node* node : graph.nodes()) {
    if (node->op_type() != "If" || !node->domain().empty()) continue;
    for (const Value* in : node->inputs()) stack.push_back(in);
  }
  while (!stack.empty()) {
    const Value* v = stack.back();
    stack.pop_back();
    if (v == nullptr || !seen.insert(v).second || !v->producer()) continue;
    for (const Value* in : v->producer()->inputs()) stack.push_back(in);
  }
  std::vector<size_t> out;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Value* in = graph.inputs()[i];
    const bool scalar_setting = in->shape && in->shape->empty() &&
                                (in->dtype == DType::kI64 || in->dtype == DType::kI32 || in->dtype == DType::kBool);
    if (scalar_setting && seen.count(in)) out.push_back(i);
  }
  return out;
}
void bind_input_values(Graph& graph, const std::map<std::string, Tensor>& values, PassContext& context) {
  for (const auto& [name, value] : values) {
    Value* in = graph.find_value(name);
    if (in == nullptr || !in->is_graph_input()) continue;
    Value* bound = graph.add_constant(name + "/bound", value);
    graph.replace_all_uses(in, bound);
    context.decide(application("specialize_inputs",
                               str_cat("input '", name, "' bound to its value ", value.get_int(0),
                                       ": an If depends on it; other values get plans of their own"),
                               {name}));
  }
}

}  // namespace opfuse
