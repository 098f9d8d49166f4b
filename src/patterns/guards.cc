// Standard guards every fusion asks (single consumer, not a graph output, constant operand,
// dtype/shape agreement, no cycle) and the one way a match is replaced by a node.
#include <unordered_set>

#include "passes/pass_util.h"
#include "patterns/pattern.h"

namespace opfuse::patterns {

Reason private_to_match(const Value* value, const Match& match) {
  if (value->is_graph_output()) return "graph output";
  for (const Use& u : value->uses()) {
    if (!match.contains(u.node)) return "shared intermediate";
  }
  return {};
}

Reason single_consumer(const Value* value) {
  return value->uses().size() == 1 ? Reason{} : Reason("shared intermediate");
}

Reason not_graph_output(const Value* value) {
  return value->is_graph_output() ? Reason("graph output") : Reason{};
}

const Tensor* constant_operand(const Value* value) { return constant_data(value); }

Reason same_type(const Value* a, const Value* b) {
  if (a->dtype != b->dtype) return "dtypes differ";
  const auto da = known_dims(a), db = known_dims(b);
  if (!da || !db) return "shape not static";
  return *da == *db ? Reason{} : Reason("shapes differ");
}

Reason is_f32(const Value* value) {
  return value->dtype == DType::kF32 ? Reason{} : Reason("dtype is not f32");
}

bool depends_on(const Value* value, const Node* node) {
  std::vector<const Node*> stack;
  std::unordered_set<const Node*> seen;
  if (value->producer()) stack.push_back(value->producer());
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (n == node) return true;
    if (!seen.insert(n).second) continue;
    for (const Value* in : n->inputs()) {
      if (in && in->producer()) stack.push_back(in->producer());
    }
  }
  return false;
}

Reason standard_guards(const Pattern& pattern, const Match& match, const PassContext& context) {
  if (!context.fusion.rule_enabled(pattern.name)) return "rule disabled";
  for (const Node* n : match.nodes) {
    if (!context.fusion.node_fusible(*n)) return context.fusion.node_refusal(*n);
  }
  if (!pattern.interior_must_be_private) return {};
  for (const Node* n : match.nodes) {
    if (n == match.root) continue;
    for (const Value* out : n->outputs()) {
      if (Reason why = private_to_match(out, match); !why.empty()) return why;
    }
  }
  return {};
}

Result<Node*> replace_match(Graph& graph, const Match& match, std::string op_type,
                            std::string domain, std::vector<Value*> inputs,
                            Attributes attrs, std::string node_name) {
  Value* result = match.root->output(0);
  const std::string value_name = result->name();
  const DType dtype = result->dtype;
  const std::optional<Shape> shape = result->shape;
  // Names are unique, so the node is built once under temporary names, the match removed, and
  // then built again under the freed names (the root's output may be a graph output whose name
  // users see; the node keeps the name users gave the anchor).
  auto build = [&](const std::string& out_name, const std::string& name) -> Result<Node*> {
    OPFUSE_ASSIGN_OR_RETURN(Node * n, graph.add_node(op_type, inputs, {out_name}, attrs, name, domain));
    n->output(0)->dtype = dtype;
    n->output(0)->shape = shape;
    return n;
  };
  OPFUSE_ASSIGN_OR_RETURN(Node * temp, build(value_name + "_fusing", node_name + "_fusing"));
  graph.replace_all_uses(result, temp->output(0));
  // Remove consumers before producers: repeatedly drop a matched node whose outputs are unused.
  std::vector<Node*> left = match.nodes;
  while (!left.empty()) {
    bool removed = false;
    for (auto it = left.begin(); it != left.end(); ++it) {
      bool unused = true;
      for (const Value* out : (*it)->outputs()) unused &= out->uses().empty() && !out->is_graph_output();
      if (!unused) continue;
      OPFUSE_TRY(graph.remove_node(*it));
      left.erase(it);
      removed = true;
      break;
    }
    if (!removed) {
      return Status::internal_error(str_cat("replace_match: ", left.front()->describe(),
                                            " is still used outside the match"));
    }
  }
  graph.remove_dead_values();
  OPFUSE_ASSIGN_OR_RETURN(Node * fused, build(value_name, node_name));
  graph.replace_all_uses(temp->output(0), fused->output(0));
  OPFUSE_TRY(graph.remove_node(temp));
  graph.remove_dead_values();
  return fused;
}

}  // namespace opfuse::patterns
