#include "ir/verifier.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ops/op_def.h"

namespace opfuse {
namespace {

std::string value_label(const Value* v) { return str_cat("'", v->name(), "'"); }

std::string arity_range(int lo, int hi) {
  return lo == hi ? std::to_string(lo) : str_cat(lo, " to ", hi);
}

Status check_arity(const Node& node) {
  const OpDef& def = node.def();
  const auto n_in = static_cast<int64_t>(node.inputs().size());
  const auto n_out = static_cast<int64_t>(node.outputs().size());
  if (n_in < def.min_inputs || n_in > def.max_inputs) {
    return Status::user_error(str_cat(node.describe(), ": has ", n_in, " inputs, ", def.name,
                                      " takes ", arity_range(def.min_inputs, def.max_inputs)));
  }
  if (n_out < def.min_outputs || n_out > def.max_outputs) {
    return Status::user_error(str_cat(node.describe(), ": has ", n_out, " outputs, ", def.name,
                                      " produces ", arity_range(def.min_outputs, def.max_outputs)));
  }
  for (int i = 0; i < def.min_inputs; ++i) {
    if (!node.has_input(i)) {
      return Status::user_error(
          str_cat(node.describe(), ": required input ", i, " is missing (", def.name,
                  " needs at least ", def.min_inputs, " inputs)"));
    }
  }
  return Status::ok();
}

Status check_attributes(const Node& node) {
  const OpDef& def = node.def();
  for (const auto& [name, value] : node.attrs) {
    const AttrSpec* spec = def.find_attr(name);
    if (spec == nullptr) {
      std::string known;
      for (const AttrSpec& s : def.attrs) known += (known.empty() ? "" : ", ") + s.name;
      return Status::user_error(str_cat(node.describe(), ": unknown attribute '", name, "' (",
                                        def.name, " has ", known.empty() ? "none" : known, ")"));
    }
    if (attr_type_of(value) != spec->type) {
      return Status::user_error(str_cat(node.describe(), ": attribute '", name, "' should be ",
                                        attr_type_name(spec->type), " but is ",
                                        attr_type_name(attr_type_of(value))));
    }
  }
  for (const AttrSpec& spec : def.attrs) {
    if (spec.required && !node.attrs.count(spec.name)) {
      return Status::user_error(str_cat(node.describe(), ": required attribute '", spec.name, "' (",
                                        attr_type_name(spec.type), ") is missing"));
    }
  }
  return Status::ok();
}

size_t count_uses(const Value* v, const Node* node, size_t index) {
  return static_cast<size_t>(std::count_if(v->uses().begin(), v->uses().end(), [&](const Use& u) {
    return u.node == node && u.input_index == static_cast<int>(index);
  }));
}

class Verifier {
 public:
  explicit Verifier(const Graph& graph) : graph_(graph) {}

  Status run() {
    OPFUSE_TRY(check_values());
    const std::vector<Node*> nodes = graph_.nodes();
    std::unordered_set<std::string> node_names;
    for (size_t i = 0; i < nodes.size(); ++i) {
      node_index_[nodes[i]] = i;
      if (!node_names.insert(nodes[i]->name()).second) {
        return Status::internal_error(str_cat("two nodes are named '", nodes[i]->name(), "'"));
      }
    }
    for (Value* v : graph_.inputs()) defined_.insert(v);
    for (Value* v : graph_.values()) {
      if (v->is_constant()) defined_.insert(v);
    }
    for (const Node* node : nodes) {
      OPFUSE_TRY(check_arity(*node));
      OPFUSE_TRY(check_attributes(*node));
      OPFUSE_TRY(check_inputs(*node));
      OPFUSE_TRY(check_outputs(*node));
    }
    for (const Value* v : graph_.outputs()) {
      if (v == nullptr || !values_.count(v)) {
        return Status::internal_error("a graph output is not a value of the graph");
      }
      if (!defined_.count(v)) {
        return Status::user_error(str_cat("graph output ", value_label(v),
                                          " is not a graph input, a constant or a node output"));
      }
    }
    return check_use_lists();
  }

 private:
  Status check_values() {
    std::unordered_set<std::string> names;
    for (const Value* v : graph_.values()) {
      values_.insert(v);
      if (!names.insert(v->name()).second) {
        return Status::internal_error(str_cat("two values are named '", v->name(), "'"));
      }
      if (const Tensor* t = v->constant()) {
        if (t->dtype() != v->dtype || (v->shape && *v->shape != t->shape())) {
          return Status::internal_error(str_cat("constant ", value_label(v), " is declared ",
                                                v->type_string(), " but its data is ",
                                                t->type_string()));
        }
      }
    }
    return Status::ok();
  }

  Status check_inputs(const Node& node) {
    for (size_t i = 0; i < node.inputs().size(); ++i) {
      const Value* v = node.input(i);
      if (v == nullptr) continue;
      if (!values_.count(v)) {
        return Status::internal_error(
            str_cat(node.describe(), ": input ", i, " is a value of another graph"));
      }
      if (count_uses(v, &node, i) != 1) {
        return Status::internal_error(str_cat(node.describe(), ": input ", i, " (",
                                              value_label(v), ") does not list this use once"));
      }
      if (defined_.count(v)) continue;
      const Node* producer = v->producer();
      if (producer == &node) {
        return Status::user_error(str_cat(node.describe(), ": input ", i, " (", value_label(v),
                                          ") is its own output: the graph has a cycle"));
      }
      if (producer != nullptr && node_index_.count(producer)) {
        return Status::user_error(str_cat(
            node.describe(), ": input ", i, " (", value_label(v), ") is produced by ",
            producer->describe(), ", which comes later: nodes are not in topological order"));
      }
      return Status::user_error(str_cat(node.describe(), ": input ", i, " (", value_label(v),
                                        ") is not a graph input, a constant or a node output"));
    }
    return Status::ok();
  }

  Status check_outputs(const Node& node) {
    for (size_t i = 0; i < node.outputs().size(); ++i) {
      const Value* v = node.output(i);
      if (v == nullptr || !values_.count(v)) {
        return Status::internal_error(
            str_cat(node.describe(), ": output ", i, " is not a value of the graph"));
      }
      auto [it, fresh] = produced_by_.emplace(v, &node);
      if (!fresh) {
        return Status::user_error(str_cat("value ", value_label(v), " is produced twice, by ",
                                          it->second->describe(), " and by ", node.describe()));
      }
      if (v->is_constant()) {
        return Status::user_error(str_cat(node.describe(), ": output ", value_label(v),
                                          " is also a constant"));
      }
      if (v->is_graph_input()) {
        return Status::user_error(str_cat(node.describe(), ": output ", value_label(v),
                                          " is also a graph input"));
      }
      if (v->producer() != &node || v->producer_output() != static_cast<int>(i)) {
        return Status::internal_error(str_cat(node.describe(), ": output ", i, " (",
                                              value_label(v), ") does not point back to it"));
      }
      defined_.insert(v);
    }
    return Status::ok();
  }

  // Every use recorded on a value must be a real input slot holding that value.
  Status check_use_lists() {
    for (const Value* v : graph_.values()) {
      for (const Use& use : v->uses()) {
        if (!node_index_.count(use.node) || use.input_index < 0 ||
            use.node->input(static_cast<size_t>(use.input_index)) != v) {
          return Status::internal_error(str_cat("value ", value_label(v),
                                                " lists a use that is not an input of a node"));
        }
      }
      if (v->producer() != nullptr && produced_by_.find(v) == produced_by_.end()) {
        return Status::internal_error(str_cat("value ", value_label(v),
                                              " names a producer that is not in the graph"));
      }
    }
    return Status::ok();
  }

  const Graph& graph_;
  std::unordered_set<const Value*> values_;
  std::unordered_map<const Node*, size_t> node_index_;
  std::unordered_set<const Value*> defined_;
  std::unordered_map<const Value*, const Node*> produced_by_;
};

}  // namespace

Status verify_graph(const Graph& graph) { return Verifier(graph).run(); }

}  // namespace opfuse
