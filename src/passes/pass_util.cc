#include "passes/pass_util.h"

#include "ops/op_def.h"

namespace opfuse {

const Tensor* constant_data(const Value* value) {
  if (value == nullptr || value->is_graph_input()) return nullptr;
  return value->constant();
}

bool is_pure(const Node& node) { return !node.def().traits.has_side_effects; }

bool replace_uses_keeping_outputs(Graph& graph, Value* from, Value* to) {
  if (from == to || from->is_graph_output()) return false;
  graph.replace_all_uses(from, to);
  return true;
}

Status replace_with_constants(Graph& graph, Node* node, std::vector<Tensor> data) {
  const std::vector<Value*> outputs = node->outputs();
  if (data.size() != outputs.size()) {
    return Status::internal_error(str_cat(node->describe(), ": ", data.size(),
                                          " folded tensors for ", outputs.size(), " outputs"));
  }
  // Park the uses (and graph-output slots) on placeholders so the node can go, then turn each
  // freed output value into a constant and move everything back: names never change.
  std::vector<Value*> parked;
  for (Value* out : outputs) {
    Value* placeholder = graph.add_value("", out->dtype, out->shape);
    graph.replace_all_uses(out, placeholder);
    parked.push_back(placeholder);
  }
  OPFUSE_TRY(graph.remove_node(node));
  for (size_t i = 0; i < outputs.size(); ++i) {
    graph.set_constant(outputs[i], std::move(data[i]));
    graph.replace_all_uses(parked[i], outputs[i]);
  }
  return Status::ok();
}

std::optional<std::vector<int64_t>> known_dims(const Value* value) {
  if (value == nullptr || !value->shape) return std::nullopt;
  return static_dims(*value->shape);
}

int64_t value_bytes(const Value* value) {
  const auto dims = known_dims(value);
  if (!dims) return 0;
  int64_t n = static_cast<int64_t>(dtype_size(value->dtype));
  for (int64_t d : *dims) n *= d;
  return n;
}

std::string node_label(const Node& node) { return str_cat(node.op_type(), " '", node.name(), "'"); }

}  // namespace opfuse
