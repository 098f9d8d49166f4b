// An If whose condition has become a constant (folded shape arithmetic, a bound input) is
// replaced by the nodes of the branch it takes, so they fold and fuse with their neighbours like
// any other node. (Conditions the model file itself makes constant are inlined on import:
// frontend/onnx/constant_if.cc.)
#include <unordered_map>

#include "ops/infer_shapes.h"
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace opfuse {
namespace {

std::optional<bool> constant_condition(const Node& node) {
  const Tensor* t = constant_data(node.input(0));
  if (!t || t->dtype() != DType::kBool || t->numel() != 1) return std::nullopt;
  return t->data<bool>()[0];
}

// Copies the nodes of `branch` into `graph`, its inputs bound to the If's trailing inputs;
// returns the values standing for the branch's outputs.
Result<std::vector<Value*>> inline_branch(Graph& graph, const Node& node, const Graph& branch) {
  std::unordered_map<const Value*, Value*> mapped;
  for (size_t i = 0; i < branch.inputs().size(); ++i) mapped[branch.inputs()[i]] = node.input(1 + i);
  const std::string prefix = node.name() + "/";
  for (const Value* v : branch.values()) {
    if (v->is_constant() && !v->is_graph_input()) mapped[v] = graph.add_constant(prefix + v->name(), *v->constant());
  }
  for (const Node* inner : branch.nodes()) {
    std::vector<Value*> inputs;
    for (const Value* in : inner->inputs()) inputs.push_back(in ? mapped.at(in) : nullptr);
    std::vector<std::string> names;
    for (const Value* out : inner->outputs()) names.push_back(prefix + out->name());
    OPFUSE_ASSIGN_OR_RETURN(Node * copy, graph.add_node(inner->op_type(), std::move(inputs), std::move(names),
                                                        inner->attrs, prefix + inner->name(), inner->domain()));
    for (size_t i = 0; i < inner->outputs().size(); ++i) {
      copy->output(i)->dtype = inner->output(i)->dtype;
      copy->output(i)->shape = inner->output(i)->shape;
      mapped[inner->output(i)] = copy->output(i);
    }
  }
  std::vector<Value*> outputs;
  for (const Value* out : branch.outputs()) outputs.push_back(mapped.at(out));
  return outputs;
}

}  // namespace

Result<bool> run_inline_constant_if_pass(Graph& graph, PassContext& context) {
  bool changed = false;
  for (Node* node : graph.nodes()) {
    if (node->op_type() != "If" || !node->domain().empty()) continue;
    const std::optional<bool> cond = constant_condition(*node);
    if (!cond) continue;
    const char* taken = *cond ? "then_branch" : "else_branch";
    const Graph& branch = *std::get<GraphAttr>(node->attrs.at(taken));
    OPFUSE_ASSIGN_OR_RETURN(std::vector<Value*> results, inline_branch(graph, *node, branch));
    const std::string name = node->name();
    // A graph output keeps its name: it is parked on a placeholder while the If goes, then given
    // to an Identity of the branch's result.
    std::vector<std::pair<Value*, Value*>> renamed;  // (Identity output, placeholder)
    std::vector<std::string> names;
    for (size_t i = 0; i < results.size(); ++i) {
      Value* out = node->output(i);
      // The If's value keeps its inferred type where the branch's copy has none yet.
      if (results[i]->dtype == DType::kUndefined) results[i]->dtype = out->dtype;
      if (!out->is_graph_output()) {
        graph.replace_all_uses(out, results[i]);
        continue;
      }
      Value* placeholder = graph.add_value("", out->dtype, out->shape);
      graph.replace_all_uses(out, placeholder);
      OPFUSE_ASSIGN_OR_RETURN(Node * identity, graph.add_node("Identity", {results[i]}, {""}, {}, name + "/output"));
      renamed.emplace_back(identity->output(0), placeholder);
      names.push_back(out->name());
    }
    OPFUSE_TRY(graph.remove_node(node));
    graph.remove_dead_values();  // frees the names of the If's outputs
    for (size_t k = 0; k < renamed.size(); ++k) {
      OPFUSE_TRY(graph.rename_value(renamed[k].first, names[k]));
      graph.replace_all_uses(renamed[k].second, renamed[k].first);
    }
    context.decide(application("inline_constant_if",
                               str_cat("If '", name, "': its condition is constant ", *cond ? "true" : "false",
                                       "; its ", taken, " is inlined"),
                               {name}));
    changed = true;
  }
  if (changed) {
    graph.remove_dead_values();
    OPFUSE_TRY(graph.topological_sort());
    OPFUSE_TRY(infer_shapes(graph));  // bodies are typed per use, so the copies are not yet
  }
  return changed;
}

}  // namespace opfuse
