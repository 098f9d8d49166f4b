#include "frontend/builder/composite.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "ops/eager.h"
#include "ops/fused.h"
#include "ops/registry.h"

namespace opfuse {
namespace {

struct Table {
  std::mutex mutex;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<const CompositeOpDef>> ops;
};
Table& table() {
  static Table t;
  return t;
}

std::shared_ptr<const CompositeOpDef> find_composite(const std::string& domain, const std::string& op) {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  auto it = t.ops.find({domain, op});
  return it == t.ops.end() ? nullptr : it->second;
}

// Instantiates the body on `b` for `node`'s inputs; checks what it returns.
Result<std::vector<Var>> instantiate(ModelBuilder& b, const CompositeOpDef& def, const Node& node,
                                     const std::vector<Var>& inputs) {
  AttrReader attrs(node);
  std::vector<Var> outputs = def.body(b, inputs, attrs);
  if (!b.ok()) return b.status().with_context(str_cat("in the body of composite ", node.describe()));
  if (static_cast<int>(outputs.size()) != def.num_outputs) {
    return Status::user_error(str_cat("the body of composite ", node.describe(), " returned ",
                                      outputs.size(), " values for ", def.num_outputs, " outputs"));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].valid() || outputs[i].builder() != &b) {
      return Status::user_error(str_cat("the body of composite ", node.describe(), ": output ", i,
                                        " is not a value built by the body"));
    }
  }
  return outputs;
}

// A stand-alone graph of the body for `node`'s input types (constant inputs stay constants, so
// bodies may read them, e.g. a shape).
struct Scratch {
  Graph graph;
  std::vector<Var> outputs;
};
Result<std::unique_ptr<Scratch>> scratch_body(const CompositeOpDef& def, const Node& node,
                                              const std::vector<ValueType>& types,
                                              const std::vector<const Tensor*>& constants) {
  auto s = std::make_unique<Scratch>();
  ModelBuilder b(s->graph, 0);
  std::vector<Var> inputs;
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i].dtype == DType::kUndefined) {
      inputs.emplace_back();
    } else if (constants[i] != nullptr) {
      inputs.emplace_back(&b, s->graph.add_constant(str_cat("in", i), *constants[i]));
    } else {
      Value* v = s->graph.add_input(str_cat("in", i), types[i].dtype, Shape{});
      v->shape = types[i].shape;
      inputs.emplace_back(&b, v);
    }
  }
  OPFUSE_ASSIGN_OR_RETURN(s->outputs, instantiate(b, def, node, inputs));
  return s;
}

Status composite_infer(InferContext& ctx) {
  auto def = find_composite(ctx.node().domain(), ctx.node().op_type());
  if (!def) return Status::internal_error(ctx.node().describe() + ": composite not registered");
  std::vector<ValueType> types;
  std::vector<const Tensor*> constants;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    types.push_back(ctx.has_input(i) ? ValueType{ctx.input_dtype(i), ctx.input_shape(i)} : ValueType{});
    constants.push_back(ctx.has_input(i) ? ctx.input_constant(i) : nullptr);
  }
  OPFUSE_ASSIGN_OR_RETURN(auto s, scratch_body(*def, ctx.node(), types, constants));
  for (size_t i = 0; i < s->outputs.size() && i < ctx.num_outputs(); ++i) {
    ctx.set_output(i, s->outputs[i].dtype(), s->outputs[i].value()->shape);
  }
  return Status::ok();
}

// Eager mode: the body's primitives, node by node, on concrete inputs.
Status composite_reference(KernelContext& ctx) {
  auto def = find_composite(ctx.node().domain(), ctx.node().op_type());
  if (!def) return Status::internal_error(ctx.node().describe() + ": composite not registered");
  std::vector<ValueType> types;
  std::vector<const Tensor*> constants(ctx.num_inputs(), nullptr);
  TensorMap feeds;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) {
      types.emplace_back();
      continue;
    }
    const Tensor& t = ctx.input(i);
    types.push_back(ValueType{t.dtype(), make_shape(t.dims())});
    feeds[str_cat("in", i)] = t;
  }
  OPFUSE_ASSIGN_OR_RETURN(auto s, scratch_body(*def, ctx.node(), types, constants));
  for (const Var& out : s->outputs) s->graph.add_output(out.value());
  OPFUSE_TRY(s->graph.topological_sort());
  OPFUSE_ASSIGN_OR_RETURN(TensorMap results, run_eager(s->graph, feeds));
  for (size_t i = 0; i < s->outputs.size(); ++i) {
    const Tensor& r = results.at(s->outputs[i].name());
    OPFUSE_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(i, r.dtype(), r.dims()));
    std::memcpy(out->raw_data(), r.raw_data(), r.nbytes());
  }
  return Status::ok();
}

}  // namespace

Status register_composite_op(CompositeOpDef def) {
  const std::string who = str_cat("composite op ", def.name, " (domain ", display_domain(def.domain), ")");
  if (def.name.empty()) return Status::user_error("composite op: no name");
  if (def.domain.empty() || def.domain == "ai.onnx" || def.domain == kFusedDomain) {
    return Status::user_error(who + ": give it its own domain (not ai.onnx or opfuse)");
  }
  if (!def.body) return Status::user_error(who + ": no body");
  if (def.min_inputs < 0 || def.min_inputs > def.max_inputs || def.num_outputs < 1) {
    return Status::user_error(who + ": bad arity");
  }
  if (OpRegistry::global().find(def.domain, def.name) != nullptr) {
    return Status::user_error(who + " is already registered");
  }
  OpDef op;
  op.name = def.name;
  op.domain = def.domain;
  op.min_opset = 1;
  op.max_opset = 1 << 20;
  op.min_inputs = def.min_inputs;
  op.max_inputs = def.max_inputs;
  op.min_outputs = op.max_outputs = def.num_outputs;
  op.attrs = def.attrs;
  // Opaque until expanded: passes that run before expansion must not look inside.
  op.kind = FusionKind::kOpaque;
  op.infer = composite_infer;
  op.reference = composite_reference;
  op.summary = def.summary.empty() ? "composite op" : def.summary;
  {
    Table& t = table();
    std::lock_guard lock(t.mutex);
    t.ops[{def.domain, def.name}] = std::make_shared<const CompositeOpDef>(def);
  }
  Status s = OpRegistry::global().add(std::move(op));
  if (!s.is_ok()) {
    Table& t = table();
    std::lock_guard lock(t.mutex);
    t.ops.erase({def.domain, def.name});
  }
  return s;
}

bool is_composite_op(const std::string& domain, const std::string& op_type) {
  return find_composite(domain, op_type) != nullptr;
}

Status expand_composite(Graph& graph, Node* node) {
  auto def = find_composite(node->domain(), node->op_type());
  if (!def) return Status::internal_error(node->describe() + " is not a composite op");
  std::unordered_set<const Node*> outer_nodes;
  for (const Node* n : graph.nodes()) outer_nodes.insert(n);
  ModelBuilder b(graph, 0);
  ModelBuilder::Scope scope(b, node->name());
  std::vector<Var> inputs;
  for (Value* in : node->inputs()) inputs.push_back(in ? Var(&b, in) : Var());
  OPFUSE_ASSIGN_OR_RETURN(std::vector<Var> outputs, instantiate(b, *def, *node, inputs));
  // Park the uses of the node's outputs, drop the node and its values (freeing their names),
  // then point the uses at the body's results. A graph output keeps its name: the body node
  // computing it is re-made under that name (or, when the body returns an input, an Identity).
  const std::vector<Value*> old = node->outputs();
  std::vector<std::string> names;
  std::vector<bool> was_output;
  std::vector<Value*> parked;
  for (Value* v : old) {
    names.push_back(v->name());
    was_output.push_back(v->is_graph_output());
    Value* p = nullptr;  // an output nobody reads needs no placeholder (and would be dead)
    if (!v->uses().empty() || v->is_graph_output()) {
      p = graph.add_value("", v->dtype, v->shape);
      graph.replace_all_uses(v, p);
    }
    parked.push_back(p);
  }
  OPFUSE_TRY(graph.remove_node(node));
  graph.remove_dead_values();
  std::map<Value*, Value*> renamed;  // a body value re-made under an output's name
  for (size_t i = 0; i < old.size(); ++i) {
    if (parked[i] == nullptr) continue;
    Value* result = outputs[i].value();
    if (auto it = renamed.find(result); it != renamed.end()) result = it->second;
    if (was_output[i]) {
      Value* named = nullptr;
      if (result->producer() != nullptr && !outer_nodes.count(result->producer())) {
        OPFUSE_ASSIGN_OR_RETURN(named, rename_by_rebuilding(graph, result, names[i]));
      }
      if (named != nullptr) {
        renamed[outputs[i].value()] = named;
        result = named;
      } else {
        OPFUSE_ASSIGN_OR_RETURN(Node * id, graph.add_node("Identity", {result}, {names[i]}, {},
                                                          b.scoped("output"), ""));
        id->output(0)->dtype = result->dtype;
        id->output(0)->shape = result->shape;
        result = id->output(0);
      }
    }
    graph.replace_all_uses(parked[i], result);
  }
  graph.remove_dead_values();
  return Status::ok();
}

}  // namespace opfuse
