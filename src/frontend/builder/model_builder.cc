#include "frontend/builder/model_builder.h"

#include <cmath>

#include "ir/verifier.h"
#include "ops/op_def.h"
#include "ops/registry.h"
#include "ops/infer_shapes.h"

namespace opfuse {

// ---- Var ----

int64_t Var::rank() const {
  return value_ && value_->shape ? static_cast<int64_t>(value_->shape->size()) : -1;
}

int64_t Var::dim(int64_t axis) const {
  const int64_t r = rank();
  if (r < 0) return -1;
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return -1;
  const Dim& d = (*value_->shape)[static_cast<size_t>(axis)];
  return d.is_known() ? d.value() : -1;
}

const std::string& Var::name() const {
  static const std::string kInvalid = "<invalid>";
  return value_ ? value_->name() : kInvalid;
}

namespace {

ModelBuilder* builder_of(Var a, Var b) { return a.builder() ? a.builder() : b.builder(); }

Var binary(const char* op, Var a, Var b) {
  ModelBuilder* mb = builder_of(a, b);
  if (mb == nullptr) return {};
  return mb->op(op, {a, b});
}

Var binary_scalar(const char* op, Var a, double b, bool scalar_first) {
  if (a.builder() == nullptr) return {};
  Var s = a.builder()->scalar(b, a.dtype() == DType::kUndefined ? DType::kF32 : a.dtype());
  return scalar_first ? a.builder()->op(op, {s, a}) : a.builder()->op(op, {a, s});
}

}  // namespace

Var operator+(Var a, Var b) { return binary("Add", a, b); }
Var operator-(Var a, Var b) { return binary("Sub", a, b); }
Var operator*(Var a, Var b) { return binary("Mul", a, b); }
Var operator/(Var a, Var b) { return binary("Div", a, b); }
Var operator+(Var a, double b) { return binary_scalar("Add", a, b, false); }
Var operator-(Var a, double b) { return binary_scalar("Sub", a, b, false); }
Var operator*(Var a, double b) { return binary_scalar("Mul", a, b, false); }
Var operator/(Var a, double b) { return binary_scalar("Div", a, b, false); }
Var operator-(double a, Var b) { return binary_scalar("Sub", b, a, true); }
Var operator*(double a, Var b) { return binary_scalar("Mul", b, a, true); }

Result<Value*> rename_by_rebuilding(Graph& graph, Value* value, const std::string& name) {
  Node* p = value->producer();
  if (p == nullptr || p->outputs().size() != 1 || value->is_graph_output()) return nullptr;
  if (graph.find_value(name) != nullptr) {
    return Status::internal_error(str_cat("cannot name a value '", name, "': the name is taken"));
  }
  const std::string op = p->op_type(), domain = p->domain(), node_name = p->name();
  const std::vector<Value*> inputs = p->inputs();
  const Attributes attrs = p->attrs;
  Value* parked = graph.add_value("", value->dtype, value->shape);
  graph.replace_all_uses(value, parked);
  OPFUSE_TRY(graph.remove_node(p));  // its inputs stay alive: no dead-value sweep here
  OPFUSE_ASSIGN_OR_RETURN(Node * copy, graph.add_node(op, inputs, {name}, attrs, node_name, domain));
  copy->output(0)->dtype = value->dtype;
  copy->output(0)->shape = value->shape;
  graph.replace_all_uses(parked, copy->output(0));
  return copy->output(0);  // the placeholder and the old value are dead: the caller sweeps them
}

// ---- ModelBuilder: graph plumbing ----

ModelBuilder::ModelBuilder(std::string name, uint64_t seed) : owned_(std::in_place), rng_(seed) {
  graph_ = &*owned_;
  graph_->name = std::move(name);
  graph_->opset_imports[""] = 17;
}

ModelBuilder::ModelBuilder(Graph& graph, uint64_t seed) : graph_(&graph), rng_(seed) {}

Var ModelBuilder::fail(Status status) {
  if (status_.is_ok()) status_ = std::move(status);
  return {};
}

ModelBuilder::Scope::Scope(ModelBuilder& b, const std::string& name)
    : b_(b), previous_size_(b.scope_.size()) {
  b_.scope_ += name + "/";
}
ModelBuilder::Scope::~Scope() { b_.scope_.resize(previous_size_); }

std::string ModelBuilder::scoped(const std::string& name) const { return scope_ + name; }

Var ModelBuilder::input(const std::string& name, DType dtype, Shape shape) {
  if (!ok()) return {};
  if (graph_->find_value(name) != nullptr) {
    return fail(Status::user_error(str_cat("input '", name, "': the name is already used")));
  }
  return Var(this, graph_->add_input(name, dtype, std::move(shape)));
}

Var ModelBuilder::constant(const std::string& name, Tensor data) {
  if (!ok()) return {};
  return Var(this, graph_->add_constant(scoped(name), std::move(data)));
}

Var ModelBuilder::scalar(double value, DType dtype) {
  if (!ok()) return {};
  Result<Tensor> t = Tensor::zeros(dtype, {});
  if (!t.is_ok()) return fail(t.status());
  t->set_double(0, value);
  return constant(str_cat("const", counter_++), std::move(*t));
}

Var ModelBuilder::ints(std::vector<int64_t> values) {
  if (!ok()) return {};
  const auto n = static_cast<int64_t>(values.size());
  return constant(str_cat("const", counter_++), Tensor::from_vector<int64_t>({n}, values));
}

void ModelBuilder::init_tensor(Tensor& t, const Init& init) {
  const std::vector<int64_t>& dims = t.dims();
  int64_t receptive = 1;
  for (size_t i = 2; i < dims.size(); ++i) receptive *= dims[i];
  const int64_t fan_in = dims.size() >= 2 ? dims[1] * receptive : (dims.empty() ? 1 : dims[0]);
  const int64_t fan_out = dims.empty() ? 1 : dims[0] * receptive;
  switch (init.kind) {
    case Init::Kind::kConstant:
      for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, init.a);
      return;
    case Init::Kind::kUniform:
      fill_uniform(t, rng_, init.a, init.b);
      return;
    case Init::Kind::kHeUniform: {
      const double limit = std::sqrt(6.0 / static_cast<double>(std::max<int64_t>(fan_in, 1)));
      fill_uniform(t, rng_, -limit, limit);
      return;
    }
    case Init::Kind::kXavierUniform: {
      const double limit = std::sqrt(6.0 / static_cast<double>(std::max<int64_t>(fan_in + fan_out, 1)));
      fill_uniform(t, rng_, -limit, limit);
      return;
    }
  }
}

Var ModelBuilder::weight(const std::string& name, std::vector<int64_t> dims, Init init, DType dtype) {
  if (!ok()) return {};
  Result<Tensor> t = Tensor::zeros(dtype, dims, str_cat("weight '", scoped(name), "'"));
  if (!t.is_ok()) return fail(t.status());
  init_tensor(*t, init);
  return constant(name, std::move(*t));
}

void ModelBuilder::output(Var v, const std::string& name) {
  if (!ok()) return;
  if (!v.valid()) {
    fail(Status::user_error("output: invalid value handle"));
    return;
  }
  const std::string& final_name = name.empty() ? v.name() : name;
  for (const auto& [value, n] : outputs_) {
    if (n == final_name) {
      fail(Status::user_error(str_cat("output '", final_name, "' is declared twice")));
      return;
    }
  }
  if (final_name != v.name() && graph_->find_value(final_name) != nullptr) {
    fail(Status::user_error(str_cat("output '", final_name, "': the name is already used")));
    return;
  }
  // Named at finish(): renaming re-makes the producing node, which would leave the caller's
  // handles to the old value dangling while building goes on.
  outputs_.emplace_back(v.value(), final_name);
}

Status ModelBuilder::name_outputs() {
  for (auto& [value, name] : outputs_) {
    Value* out = value;
    if (value->name() != name) {
      OPFUSE_ASSIGN_OR_RETURN(out, rename_by_rebuilding(*graph_, value, name));
      if (out == nullptr) {  // an input, a constant or already an output: through an Identity
        OPFUSE_ASSIGN_OR_RETURN(Node * id, graph_->add_node("Identity", {value}, {name}, {}, name));
        OPFUSE_TRY(check_and_infer(*id));
        out = id->output(0);
      }
      // Later entries may name the same value again: point them at the renamed one.
      for (auto& [other, other_name] : outputs_) {
        if (other == value) other = out;
      }
    }
    graph_->add_output(out);
  }
  graph_->remove_dead_values();
  return Status::ok();
}

Result<Graph> ModelBuilder::finish() {
  if (!owned_) return Status::internal_error("finish() on a builder that does not own its graph");
  OPFUSE_TRY(status_);
  if (outputs_.empty()) {
    return Status::user_error(str_cat("model '", graph_->name, "' has no outputs"));
  }
  OPFUSE_TRY(name_outputs());
  OPFUSE_TRY(infer_shapes(*graph_));
  OPFUSE_TRY(verify_graph(*graph_));
  status_ = Status::user_error("finish() was already called");
  return std::move(*owned_);
}

Status ModelBuilder::check_and_infer(Node& node) {
  const OpDef& def = node.def();
  const auto n_in = static_cast<int>(node.inputs().size());
  if (n_in < def.min_inputs || n_in > def.max_inputs) {
    return Status::user_error(str_cat(node.describe(), ": ", def.name, " takes ", def.min_inputs,
                                      " to ", def.max_inputs, " inputs, got ", n_in));
  }
  for (const auto& [name, value] : node.attrs) {
    const AttrSpec* spec = def.find_attr(name);
    if (spec == nullptr) {
      return Status::user_error(str_cat(node.describe(), ": ", def.name, " has no attribute '", name, "'"));
    }
    if (attr_type_of(value) != spec->type) {
      return Status::user_error(str_cat(node.describe(), ": attribute '", name, "' should be ",
                                        attr_type_name(spec->type), ", got ",
                                        attr_type_name(attr_type_of(value))));
    }
  }
  std::vector<ValueType> types;
  std::vector<const Tensor*> constants;
  for (Value* in : node.inputs()) {
    types.push_back(in ? ValueType{in->dtype, in->shape} : ValueType{});
    constants.push_back(in ? in->constant() : nullptr);
  }
  InferContext ctx(node, std::move(types), std::move(constants));
  OPFUSE_TRY(def.infer(ctx));
  for (size_t i = 0; i < node.outputs().size(); ++i) {
    node.output(i)->dtype = ctx.outputs()[i].dtype;
    node.output(i)->shape = ctx.outputs()[i].shape;
  }
  return Status::ok();
}

std::vector<Var> ModelBuilder::op_n(const std::string& op_type, const std::vector<Var>& inputs,
                                    int num_outputs, Attributes attrs, const std::string& name,
                                    const std::string& domain) {
  std::vector<Var> none(static_cast<size_t>(std::max(num_outputs, 0)));
  if (!ok()) return none;
  const OpDef* def = OpRegistry::global().find(domain, op_type);
  const std::string node_name = scoped(name.empty() ? op_type : name);
  if (def == nullptr) {
    fail(Status::user_error(str_cat("node '", node_name, "': op ", op_type, " (domain ",
                                    display_domain(domain), ") is not registered")));
    return none;
  }
  if (num_outputs < def->min_outputs || num_outputs > def->max_outputs) {
    fail(Status::user_error(str_cat("node '", node_name, "': ", op_type, " has ", def->min_outputs,
                                    " to ", def->max_outputs, " outputs, asked for ", num_outputs)));
    return none;
  }
  std::vector<Value*> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    // A default-constructed Var (no builder) is an omitted optional input; a Var from a failed
    // call cannot reach here (the builder is already failed).
    values.push_back(inputs[i].value());
  }
  // Node names are unique per graph; the graph suffixes duplicates.
  std::vector<std::string> out_names;
  for (int i = 0; i < num_outputs; ++i) out_names.push_back(num_outputs == 1 ? "" : str_cat(node_name, ":", i));
  Result<Node*> node = graph_->add_node(op_type, std::move(values), out_names, std::move(attrs),
                                        node_name, domain);
  if (!node.is_ok()) {
    fail(node.status());
    return none;
  }
  Status s = check_and_infer(**node);
  if (!s.is_ok()) {
    fail(s);
    return none;
  }
  std::vector<Var> out;
  for (Value* v : (*node)->outputs()) out.emplace_back(this, v);
  return out;
}

Var ModelBuilder::op(const std::string& op_type, const std::vector<Var>& inputs, Attributes attrs,
                     const std::string& name, const std::string& domain) {
  return op_n(op_type, inputs, 1, std::move(attrs), name, domain)[0];
}

}  // namespace opfuse
