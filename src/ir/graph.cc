#include "ir/graph.h"

#include <algorithm>
#include <queue>
#include <unordered_set>

#include "ops/registry.h"

namespace opfuse {

std::string Value::type_string() const {
  std::string out(dtype_name(dtype));
  return out + (shape ? shape_to_string(*shape) : "[*]");
}

std::string Node::describe() const {
  std::string out = str_cat(op_type_, " node '", name_, "'");
  return out;
}

std::string Graph::unique_value_name(const std::string& base) {
  std::string stem = base.empty() ? "v" : base;
  if (!base.empty() && !value_by_name_.count(base)) return base;
  std::string candidate;
  do {
    candidate = str_cat(stem, "_", name_counter_++);
  } while (value_by_name_.count(candidate));
  return candidate;
}

std::string Graph::unique_node_name(const std::string& base) {
  if (!base.empty() && !node_by_name_.count(base)) return base;
  std::string stem = base.empty() ? "node" : base;
  std::string candidate;
  do {
    candidate = str_cat(stem, "_", name_counter_++);
  } while (node_by_name_.count(candidate));
  return candidate;
}

Value* Graph::add_value(const std::string& name, DType dtype, std::optional<Shape> shape) {
  auto value = std::make_unique<Value>();
  value->name_ = unique_value_name(name);
  value->dtype = dtype;
  value->shape = std::move(shape);
  Value* raw = value.get();
  value_by_name_[raw->name_] = raw;
  raw->position_ = values_.size();
  values_.push_back(std::move(value));
  suspect(raw);  // dead until something uses it
  return raw;
}

Value* Graph::add_input(const std::string& name, DType dtype, Shape shape) {
  Value* v = add_value(name, dtype, std::move(shape));
  v->is_graph_input_ = true;
  inputs_.push_back(v);
  return v;
}

Value* Graph::add_constant(const std::string& name, Tensor data) {
  Value* v = add_value(name, data.dtype(), data.shape());
  v->constant_ = std::move(data);
  constant_source.reset();
  return v;
}

void Graph::set_constant(Value* value, Tensor data) {
  value->dtype = data.dtype();
  value->shape = data.shape();
  value->constant_ = std::move(data);
  constant_source.reset();
}

void Graph::release_constant_data(Value* value) {
  if (!value->constant_) return;
  value->constant_ = Tensor::wrap(value->constant_->dtype(), value->constant_->dims(), nullptr, nullptr);
}

void Graph::add_output(Value* value) {
  value->is_graph_output_ = true;
  outputs_.push_back(value);
}

Result<Node*> Graph::add_node(const std::string& op_type, std::vector<Value*> inputs,
                              std::vector<std::string> output_names, Attributes attrs,
                              const std::string& node_name, const std::string& domain) {
  const OpDef* def = OpRegistry::global().find(domain, op_type);
  if (def == nullptr) {
    return Status::user_error(str_cat("node '", node_name, "': op ", op_type, " (domain ",
                                      display_domain(domain), ") is not supported by opfuse"));
  }
  auto node = std::make_unique<Node>();
  node->name_ = unique_node_name(node_name.empty() ? op_type : node_name);
  node->op_type_ = op_type;
  node->domain_ = def->domain;
  node->def_ = def;
  node->attrs = std::move(attrs);
  Node* raw = node.get();
  for (size_t i = 0; i < inputs.size(); ++i) {
    raw->inputs_.push_back(inputs[i]);
    if (inputs[i]) inputs[i]->uses_.push_back(Use{raw, static_cast<int>(i)});
  }
  for (size_t i = 0; i < output_names.size(); ++i) {
    Value* out = add_value(output_names[i].empty() ? raw->name_ : output_names[i]);
    out->producer_ = raw;
    out->producer_output_ = static_cast<int>(i);
    raw->outputs_.push_back(out);
  }
  node_by_name_[raw->name_] = raw;
  raw->position_ = nodes_.size();
  nodes_.push_back(std::move(node));
  return raw;
}

void Graph::set_input(Node* node, size_t index, Value* value) {
  if (index >= node->inputs_.size()) node->inputs_.resize(index + 1, nullptr);
  Value* old = node->inputs_[index];
  if (old) {
    auto& uses = old->uses_;
    uses.erase(std::remove_if(uses.begin(), uses.end(),
                              [&](const Use& u) {
                                return u.node == node && u.input_index == static_cast<int>(index);
                              }),
               uses.end());
    suspect(old);
  }
  node->inputs_[index] = value;
  if (value) value->uses_.push_back(Use{node, static_cast<int>(index)});
}

void Graph::replace_all_uses(Value* from, Value* to) {
  if (from == to) return;
  const std::vector<Use> uses = from->uses_;
  for (const Use& use : uses) set_input(use.node, use.input_index, to);
  if (from->is_graph_output_) {
    for (Value*& out : outputs_) {
      if (out == from) out = to;
    }
    from->is_graph_output_ = false;
    to->is_graph_output_ = true;
    suspect(from);
  }
}

Status Graph::remove_node(Node* node) {
  for (Value* out : node->outputs_) {
    if (!out->uses_.empty() || out->is_graph_output_) {
      return Status::internal_error(
          str_cat("cannot remove ", node->describe(), ": output '", out->name_, "' is still used"));
    }
  }
  for (size_t i = 0; i < node->inputs_.size(); ++i) set_input(node, i, nullptr);
  for (Value* out : node->outputs_) {
    out->producer_ = nullptr;
    suspect(out);
  }
  node_by_name_.erase(node->name_);
  nodes_[node->position_].reset();
  if (++removed_ * 2 > nodes_.size()) compact_nodes();
  return Status::ok();
}

void Graph::compact_nodes() {
  std::erase(nodes_, nullptr);
  for (size_t i = 0; i < nodes_.size(); ++i) nodes_[i]->position_ = i;
  removed_ = 0;
}

void Graph::suspect(Value* value) {
  if (value->maybe_dead_) return;
  value->maybe_dead_ = true;
  maybe_dead_.push_back(value);
}

void Graph::remove_dead_values() {
  for (Value* v : maybe_dead_) {  // each at most once (maybe_dead_ flag), so none is freed twice
    v->maybe_dead_ = false;
    const bool dead = v->producer_ == nullptr && v->uses_.empty() && !v->is_graph_input_ &&
                      !v->is_graph_output_;
    if (!dead) continue;
    value_by_name_.erase(v->name_);
    values_[v->position_].reset();
    ++removed_values_;
  }
  maybe_dead_.clear();
  if (removed_values_ * 2 > values_.size()) {
    std::erase(values_, nullptr);
    for (size_t i = 0; i < values_.size(); ++i) values_[i]->position_ = i;
    removed_values_ = 0;
  }
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(num_nodes());
  for (const auto& n : nodes_) {
    if (n) out.push_back(n.get());
  }
  return out;
}

std::vector<Value*> Graph::values() const {
  std::vector<Value*> out;
  out.reserve(values_.size() - removed_values_);
  for (const auto& v : values_) {
    if (v) out.push_back(v.get());
  }
  return out;
}

Status Graph::rename_value(Value* value, const std::string& name) {
  if (value->name_ == name) return Status::ok();
  if (value_by_name_.count(name)) return Status::internal_error(str_cat("rename to '", name, "': the name is taken"));
  value_by_name_.erase(value->name_);
  value->name_ = name;
  value_by_name_[name] = value;
  if (value->constant_) constant_source.reset();
  return Status::ok();
}

Value* Graph::find_value(const std::string& name) const {
  auto it = value_by_name_.find(name);
  return it == value_by_name_.end() ? nullptr : it->second;
}

Node* Graph::find_node(const std::string& name) const {
  auto it = node_by_name_.find(name);
  return it == node_by_name_.end() ? nullptr : it->second;
}

Status Graph::topological_sort() {
  // Kahn's algorithm; among ready nodes the earliest in the current order goes first, so an
  // already sorted graph keeps its order.
  compact_nodes();  // positions are now the indices below
  std::vector<size_t> pending(nodes_.size(), 0);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (Value* in : nodes_[i]->inputs_) {
      if (in && in->producer_) ++pending[i];
    }
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (pending[i] == 0) ready.push(i);
  }
  std::vector<size_t> order;
  while (!ready.empty()) {
    const size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (Value* out : nodes_[i]->outputs_) {
      for (const Use& use : out->uses_) {
        if (--pending[use.node->position_] == 0) ready.push(use.node->position_);
      }
    }
  }
  if (order.size() != nodes_.size()) {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (pending[i] != 0) {
        return Status::user_error(str_cat("graph has a cycle through ", nodes_[i]->describe()));
      }
    }
  }
  std::vector<std::unique_ptr<Node>> sorted;
  sorted.reserve(nodes_.size());
  for (size_t i : order) sorted.push_back(std::move(nodes_[i]));
  nodes_ = std::move(sorted);
  for (size_t i = 0; i < nodes_.size(); ++i) nodes_[i]->position_ = i;
  return Status::ok();
}

Graph Graph::clone() const {
  Graph copy;
  copy.name = name;
  copy.opset_imports = opset_imports;
  copy.captured_inputs = captured_inputs;
  copy.constant_source = constant_source;
  copy.name_counter_ = name_counter_;
  std::unordered_map<const Value*, Value*> value_map;
  for (const auto& v : values_) {
    if (!v) continue;
    auto nv = std::make_unique<Value>();
    nv->name_ = v->name_;
    nv->dtype = v->dtype;
    nv->shape = v->shape;
    nv->constant_ = v->constant_;
    nv->is_graph_input_ = v->is_graph_input_;
    nv->is_graph_output_ = v->is_graph_output_;
    value_map[v.get()] = nv.get();
    copy.value_by_name_[nv->name_] = nv.get();
    nv->position_ = copy.values_.size();
    copy.suspect(nv.get());  // the copy's next remove_dead_values looks at every value once
    copy.values_.push_back(std::move(nv));
  }
  for (const auto& n : nodes_) {
    if (!n) continue;
    auto nn = std::make_unique<Node>();
    nn->name_ = n->name_;
    nn->op_type_ = n->op_type_;
    nn->domain_ = n->domain_;
    nn->def_ = n->def_;
    nn->attrs = n->attrs;
    for (size_t i = 0; i < n->inputs_.size(); ++i) {
      Value* in = n->inputs_[i] ? value_map.at(n->inputs_[i]) : nullptr;
      nn->inputs_.push_back(in);
      if (in) in->uses_.push_back(Use{nn.get(), static_cast<int>(i)});
    }
    for (size_t i = 0; i < n->outputs_.size(); ++i) {
      Value* out = value_map.at(n->outputs_[i]);
      out->producer_ = nn.get();
      out->producer_output_ = static_cast<int>(i);
      nn->outputs_.push_back(out);
    }
    copy.node_by_name_[nn->name_] = nn.get();
    nn->position_ = copy.nodes_.size();
    copy.nodes_.push_back(std::move(nn));
  }
  for (Value* v : inputs_) copy.inputs_.push_back(value_map.at(v));
  for (Value* v : outputs_) copy.outputs_.push_back(value_map.at(v));
  return copy;
}

}  // namespace opfuse
