#include "ops/control_flow.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/run_limits.h"
#include "ops/eager.h"
#include "ops/infer_shapes.h"
#include "ops/op_list.h"

namespace opfuse {
namespace {

const Graph& body_named(const Node& node, const std::string& name) {
  return *std::get<GraphAttr>(node.attrs.at(name));
}

size_t formal_inputs(const Graph& body) { return body.inputs().size() - body.captured_inputs; }

// The truth of a one-element bool tensor (If's and Loop's conditions).
Result<bool> truth(const Tensor& t, const Node& node, const std::string& what) {
  if (t.dtype() != DType::kBool || t.numel() != 1) {
    return Status::user_error(str_cat(node.describe(), ": ", what, " is ", t.type_string(),
                                      "; expected one bool"));
  }
  return t.data<bool>()[0];
}

int64_t normalized_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

// Element `index` of `t` along `axis`, with that axis removed (a Scan's slice).
Result<Tensor> take_along(const Tensor& t, int64_t axis, int64_t index) {
  std::vector<int64_t> dims = t.dims();
  const int64_t length = dims[axis];
  dims.erase(dims.begin() + axis);
  OPFUSE_ASSIGN_OR_RETURN(Tensor out, Tensor::zeros(t.dtype(), dims, "a scanned slice"));
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= t.dims()[d];
  const size_t inner = out.numel() == 0 ? 0 : out.nbytes() / static_cast<size_t>(outer);
  const auto* in = static_cast<const uint8_t*>(t.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t o = 0; o < outer && inner > 0; ++o) {
    std::memcpy(dst + o * inner, in + (o * length + index) * inner, inner);
  }
  return out;
}

// `parts` stacked along a new axis `axis` of the result. Every part must have one type; with no
// parts, `empty_dims` (the type of one part, if known) gives the result's other dims.
Result<Tensor> stack_along(const std::vector<Tensor>& parts, int64_t axis, DType dtype,
                           std::vector<int64_t> empty_dims, const Node& node, const std::string& what) {
  std::vector<int64_t> dims = parts.empty() ? std::move(empty_dims) : parts[0].dims();
  for (const Tensor& p : parts) {
    if (p.dims() != parts[0].dims() || p.dtype() != parts[0].dtype()) {
      return Status::user_error(str_cat(node.describe(), ": ", what, " is ", parts[0].type_string(),
                                        " in one iteration and ", p.type_string(),
                                        " in another; iterations must agree to be stacked"));
    }
  }
  const auto rank = static_cast<int64_t>(dims.size());
  axis = normalized_axis(axis, rank + 1);
  if (axis < 0 || axis > rank) {
    return Status::user_error(str_cat(node.describe(), ": ", what, " has axis ", axis,
                                      " outside the stacked rank ", rank + 1));
  }
  dims.insert(dims.begin() + axis, static_cast<int64_t>(parts.size()));
  OPFUSE_ASSIGN_OR_RETURN(Tensor out, Tensor::zeros(parts.empty() ? dtype : parts[0].dtype(), dims, what));
  if (parts.empty() || out.numel() == 0) return out;
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= dims[d];
  const size_t inner = parts[0].nbytes() / static_cast<size_t>(outer);
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t p = 0; p < parts.size(); ++p) {
      std::memcpy(dst + (o * static_cast<int64_t>(parts.size()) + static_cast<int64_t>(p)) * inner,
                  static_cast<const uint8_t*>(parts[p].raw_data()) + o * inner, inner);
    }
  }
  return out;
}

// The static dims of output `i` without its stacked axis, for a scan output of no iterations.
std::vector<int64_t> per_iteration_dims(const Node& node, size_t i, int64_t axis) {
  const Value* v = node.output(i);
  if (!v || !v->shape) return {};
  auto dims = static_dims(*v->shape);
  if (!dims || dims->empty()) return {};
  axis = normalized_axis(axis, static_cast<int64_t>(dims->size()));
  if (axis < 0 || axis >= static_cast<int64_t>(dims->size())) return {};
  dims->erase(dims->begin() + axis);
  return *dims;
}

Result<std::vector<Tensor>> run_if(const Node& node, std::span<const Tensor* const> inputs,
                                   const BodyRunner& runner) {
  OPFUSE_ASSIGN_OR_RETURN(bool cond, truth(*inputs[0], node, "the condition (input 0)"));
  const Graph& branch = body_named(node, cond ? "then_branch" : "else_branch");
  std::vector<Tensor> captures;
  for (size_t i = 1; i < inputs.size(); ++i) captures.push_back(*inputs[i]);
  OPFUSE_ASSIGN_OR_RETURN(std::vector<Tensor> outs, runner.run(branch, std::move(captures)));
  if (outs.size() != node.outputs().size()) {
    return Status::user_error(str_cat(node.describe(), ": its ", cond ? "then" : "else", " branch returns ",
                                      outs.size(), " values for ", node.outputs().size(), " outputs"));
  }
  return outs;
}

Result<std::vector<Tensor>> run_loop(const Node& node, std::span<const Tensor* const> inputs,
                                     const BodyRunner& runner) {
  const Graph& body = body_named(node, "body");
  const size_t carried = formal_inputs(body) - 2;
  const size_t scanned = body.outputs().size() - 1 - carried;
  auto input = [&](size_t i) { return i < inputs.size() ? inputs[i] : nullptr; };
  int64_t trip_count = std::numeric_limits<int64_t>::max();  // absent: until the condition is false
  if (const Tensor* m = input(0)) {
    if (m->numel() != 1) {
      return Status::user_error(str_cat(node.describe(), ": the trip count (input 0) is ", m->type_string(),
                                        "; expected one integer"));
    }
    trip_count = m->get_int(0);
  }
  bool keep_going = true;
  if (const Tensor* c = input(1)) {
    OPFUSE_ASSIGN_OR_RETURN(keep_going, truth(*c, node, "the condition (input 1)"));
  }
  std::vector<Tensor> state;
  for (size_t k = 0; k < carried; ++k) state.push_back(*inputs[2 + k]);
  std::vector<std::vector<Tensor>> scans(scanned);
  const RunLimits& limits = current_run_limits();
  for (int64_t i = 0; i < trip_count && keep_going; ++i) {
    if (i >= limits.max_loop_iterations) {
      return Status::user_error(str_cat(
          node.describe(), ": stopped at the cap of ", limits.max_loop_iterations,
          " iterations with its condition still true (trip count ",
          input(0) ? std::to_string(trip_count) : std::string("absent"),
          "); raise RunLimits::max_loop_iterations (--max-loop-iterations) if the model needs more"));
    }
    if (i > 0 && limits.stop_requested()) {
      return limits.stopped(str_cat("in ", node.describe(), " after ", i, " iterations"));
    }
    std::vector<Tensor> args;
    args.push_back(Tensor::scalar<int64_t>(i));
    args.push_back(Tensor::scalar<bool>(keep_going));
    for (Tensor& t : state) args.push_back(std::move(t));
    for (size_t j = 2 + carried; j < inputs.size(); ++j) args.push_back(*inputs[j]);
    OPFUSE_ASSIGN_OR_RETURN(std::vector<Tensor> outs, runner.run(body, std::move(args)));
    OPFUSE_ASSIGN_OR_RETURN(keep_going, truth(outs[0], node, "the body's condition (output 0)"));
    state.assign(std::make_move_iterator(outs.begin() + 1), std::make_move_iterator(outs.begin() + 1 + static_cast<int64_t>(carried)));
    for (size_t k = 0; k < scanned; ++k) scans[k].push_back(std::move(outs[1 + carried + k]));
  }
  std::vector<Tensor> results = std::move(state);
  for (size_t k = 0; k < scanned; ++k) {
    const Value* out = node.output(carried + k);
    OPFUSE_ASSIGN_OR_RETURN(Tensor stacked,
                            stack_along(scans[k], 0, out->dtype, per_iteration_dims(node, carried + k, 0), node,
                                        str_cat("scan output ", k)));
    results.push_back(std::move(stacked));
  }
  return results;
}

struct ScanAttrs {
  int64_t scan_inputs = 0;
  std::vector<int64_t> input_axes, input_directions, output_axes, output_directions;
};

ScanAttrs scan_attrs(const Node& node, size_t scanned_outputs) {
  AttrReader attrs(node);
  ScanAttrs a;
  a.scan_inputs = attrs.get_int("num_scan_inputs");
  auto list = [&](const char* name, size_t n) {
    std::vector<int64_t> v = attrs.has(name) ? attrs.get_ints(name) : std::vector<int64_t>{};
    v.resize(std::max(v.size(), n), 0);
    return v;
  };
  a.input_axes = list("scan_input_axes", static_cast<size_t>(a.scan_inputs));
  a.input_directions = list("scan_input_directions", static_cast<size_t>(a.scan_inputs));
  a.output_axes = list("scan_output_axes", scanned_outputs);
  a.output_directions = list("scan_output_directions", scanned_outputs);
  return a;
}

Result<std::vector<Tensor>> run_scan(const Node& node, std::span<const Tensor* const> inputs,
                                     const BodyRunner& runner) {
  const Graph& body = body_named(node, "body");
  const ScanAttrs a = scan_attrs(node, 0);
  const size_t m = static_cast<size_t>(a.scan_inputs);
  const size_t states = formal_inputs(body) - m;
  const size_t scanned = body.outputs().size() - states;
  const ScanAttrs attrs = scan_attrs(node, scanned);
  int64_t length = -1;
  std::vector<int64_t> axes;
  for (size_t j = 0; j < m; ++j) {
    const Tensor& x = *inputs[states + j];
    const int64_t axis = normalized_axis(attrs.input_axes[j], x.rank());
    if (axis < 0 || axis >= x.rank()) {
      return Status::user_error(str_cat(node.describe(), ": scan input ", j, " is ", x.type_string(),
                                        " but its scan axis is ", attrs.input_axes[j]));
    }
    if (length >= 0 && x.dims()[axis] != length) {
      return Status::user_error(str_cat(node.describe(), ": scan input ", j, " has ", x.dims()[axis],
                                        " elements along its scan axis but scan input 0 has ", length));
    }
    length = x.dims()[axis];
    axes.push_back(axis);
  }
  std::vector<Tensor> state;
  for (size_t k = 0; k < states; ++k) state.push_back(*inputs[k]);
  std::vector<std::vector<Tensor>> scans(scanned);
  const RunLimits& limits = current_run_limits();
  for (int64_t t = 0; t < length; ++t) {
    if (t > 0 && limits.stop_requested()) {
      return limits.stopped(str_cat("in ", node.describe(), " after ", t, " iterations"));
    }
    std::vector<Tensor> args = std::move(state);
    for (size_t j = 0; j < m; ++j) {
      const int64_t index = attrs.input_directions[j] ? length - 1 - t : t;
      OPFUSE_ASSIGN_OR_RETURN(Tensor element, take_along(*inputs[states + j], axes[j], index));
      args.push_back(std::move(element));
    }
    for (size_t j = states + m; j < inputs.size(); ++j) args.push_back(*inputs[j]);
    OPFUSE_ASSIGN_OR_RETURN(std::vector<Tensor> outs, runner.run(body, std::move(args)));
    state.assign(std::make_move_iterator(outs.begin()), std::make_move_iterator(outs.begin() + static_cast<int64_t>(states)));
    for (size_t k = 0; k < scanned; ++k) scans[k].push_back(std::move(outs[states + k]));
  }
  std::vector<Tensor> results = std::move(state);
  for (size_t k = 0; k < scanned; ++k) {
    if (attrs.output_directions[k]) std::reverse(scans[k].begin(), scans[k].end());
    const Value* out = node.output(states + k);
    OPFUSE_ASSIGN_OR_RETURN(
        Tensor stacked, stack_along(scans[k], attrs.output_axes[k], out->dtype,
                                    per_iteration_dims(node, states + k, attrs.output_axes[k]), node,
                                    str_cat("scan output ", k)));
    results.push_back(std::move(stacked));
  }
  return results;
}

class EagerBodyRunner final : public BodyRunner {
 public:
  Result<std::vector<Tensor>> run(const Graph& body, std::vector<Tensor> inputs) const override {
    TensorMap feeds;
    for (size_t i = 0; i < body.inputs().size(); ++i) feeds[body.inputs()[i]->name()] = std::move(inputs[i]);
    OPFUSE_ASSIGN_OR_RETURN(TensorMap outs, run_eager(body, feeds));
    std::vector<Tensor> results;
    for (const Value* v : body.outputs()) results.push_back(outs.at(v->name()));
    return results;
  }
};

// ---- shape inference --------------------------------------------------------------------------

// What two types have in common: the same dtype (else an error), the dims both agree on.
Result<ValueType> merge_types(const ValueType& a, const ValueType& b, const InferContext& ctx, const std::string& what) {
  if (a.dtype != b.dtype && a.dtype != DType::kUndefined && b.dtype != DType::kUndefined) {
    return ctx.error(str_cat(what, " is ", dtype_name(a.dtype), " in one case and ", dtype_name(b.dtype),
                             " in another"));
  }
  ValueType out{a.dtype == DType::kUndefined ? b.dtype : a.dtype, std::nullopt};
  if (a.shape && b.shape && a.shape->size() == b.shape->size()) {
    Shape s;
    for (size_t i = 0; i < a.shape->size(); ++i) s.push_back((*a.shape)[i] == (*b.shape)[i] ? (*a.shape)[i] : Dim::unknown());
    out.shape = std::move(s);
  }
  return out;
}

// Infers `body` for the given input types; returns its outputs' types (and, through `folded`,
// whether output 0 is known to be true in every iteration: a Loop whose count is its trip count).
Result<std::vector<ValueType>> infer_body(const InferContext& ctx, const Graph& body,
                                          const std::vector<ValueType>& inputs, bool* condition_stays_true = nullptr) {
  Graph g = body.clone();
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    g.inputs()[i]->dtype = inputs[i].dtype;
    g.inputs()[i]->shape = inputs[i].shape;
  }
  Status inferred = infer_shapes(g);
  if (!inferred.is_ok()) return ctx.error(str_cat("in its subgraph '", body.name, "': ", inferred.message()));
  std::vector<ValueType> out;
  for (const Value* v : g.outputs()) out.push_back({v->dtype, v->shape});
  if (condition_stays_true && !g.outputs().empty()) {
    const Value* cond = g.outputs()[0];
    const Tensor* c = cond->constant();
    const bool passed_through = g.inputs().size() > 1 && (cond == g.inputs()[1] ||
        (cond->producer() && cond->producer()->op_type() == "Identity" && cond->producer()->input(0) == g.inputs()[1]));
    *condition_stays_true = passed_through || (c && c->dtype() == DType::kBool && c->numel() == 1 && c->data<bool>()[0]);
  }
  return out;
}

std::vector<ValueType> input_types(const InferContext& ctx) {
  std::vector<ValueType> types;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    types.push_back(ctx.has_input(i) ? ValueType{ctx.input_dtype(i), ctx.input_shape(i)} : ValueType{});
  }
  return types;
}

Status check_body_arity(const InferContext& ctx, const Graph& body, size_t inputs, size_t min_outputs, const char* what) {
  if (body.inputs().size() != inputs) {
    return ctx.error(str_cat("its ", what, " takes ", formal_inputs(body), " inputs but the node passes ",
                             static_cast<int64_t>(inputs) - static_cast<int64_t>(body.captured_inputs)));
  }
  if (body.outputs().size() < min_outputs) {
    return ctx.error(str_cat("its ", what, " returns ", body.outputs().size(), " values; expected at least ", min_outputs));
  }
  return Status::ok();
}

Status infer_if(InferContext& ctx) {
  if (ctx.input_dtype(0) != DType::kBool) {
    return ctx.error(str_cat("the condition (input 0) has dtype ", dtype_name(ctx.input_dtype(0)), "; expected bool"));
  }
  const Node& node = ctx.node();
  const std::vector<ValueType> types = body_input_types(node, body_named(node, "then_branch"), input_types(ctx));
  std::vector<std::vector<ValueType>> branches;
  for (const char* name : {"then_branch", "else_branch"}) {
    const Graph& branch = body_named(node, name);
    OPFUSE_TRY(check_body_arity(ctx, branch, ctx.num_inputs() - 1, node.outputs().size(), name));
    if (branch.outputs().size() != node.outputs().size()) {
      return ctx.error(str_cat("its ", name, " returns ", branch.outputs().size(), " values for ",
                               node.outputs().size(), " outputs"));
    }
    OPFUSE_ASSIGN_OR_RETURN(auto outs, infer_body(ctx, branch, types));
    branches.push_back(std::move(outs));
  }
  for (size_t i = 0; i < node.outputs().size(); ++i) {
    OPFUSE_ASSIGN_OR_RETURN(ValueType t, merge_types(branches[0][i], branches[1][i], ctx, str_cat("output ", i)));
    ctx.set_output(i, t.dtype, t.shape);
  }
  return Status::ok();
}

Status infer_loop(InferContext& ctx) {
  const Node& node = ctx.node();
  const Graph& body = body_named(node, "body");
  if (formal_inputs(body) < 2) return ctx.error("its body takes fewer than 2 inputs (iteration number, condition)");
  const size_t carried = formal_inputs(body) - 2;
  // Trailing omitted inputs are dropped: a Loop carrying nothing may have fewer than 2.
  const bool short_form = carried == 0 && body.captured_inputs == 0 && ctx.num_inputs() < 2;
  OPFUSE_TRY(check_body_arity(ctx, body, short_form ? body.inputs().size() : ctx.num_inputs(), 1 + carried, "body"));
  if (node.outputs().size() + 1 != body.outputs().size()) {
    return ctx.error(str_cat("its body returns ", body.outputs().size(), " values; the node has ",
                             node.outputs().size(), " outputs (expected one fewer: the condition)"));
  }
  bool stays_true = false;
  OPFUSE_ASSIGN_OR_RETURN(auto outs, infer_body(ctx, body, body_input_types(node, body, input_types(ctx)), &stays_true));
  for (size_t k = 0; k < carried; ++k) {
    OPFUSE_ASSIGN_OR_RETURN(ValueType t, merge_types({ctx.input_dtype(2 + k), ctx.input_shape(2 + k)}, outs[1 + k], ctx,
                                                     str_cat("loop-carried value ", k)));
    ctx.set_output(k, t.dtype, t.shape);
  }
  // Scan outputs stack one value per iteration: the count is the trip count only when the
  // condition cannot end the loop early.
  Dim iterations = Dim::unknown();
  const Tensor* m = ctx.has_input(0) ? ctx.input_constant(0) : nullptr;
  const Tensor* c = ctx.has_input(1) ? ctx.input_constant(1) : nullptr;
  const bool starts_true = !ctx.has_input(1) || (c && c->dtype() == DType::kBool && c->numel() == 1 && c->data<bool>()[0]);
  if (m && m->numel() == 1 && starts_true && stays_true) iterations = Dim(std::max<int64_t>(m->get_int(0), 0));
  for (size_t k = carried; k < node.outputs().size(); ++k) {
    const ValueType& per = outs[1 + k];
    std::optional<Shape> shape;
    if (per.shape) {
      shape = Shape{iterations};
      shape->insert(shape->end(), per.shape->begin(), per.shape->end());
    }
    ctx.set_output(k, per.dtype, shape);
  }
  return Status::ok();
}

Status infer_scan(InferContext& ctx) {
  const Node& node = ctx.node();
  const Graph& body = body_named(node, "body");
  const auto m = static_cast<size_t>(ctx.attrs().get_int("num_scan_inputs"));
  if (m < 1 || m > formal_inputs(body)) {
    return ctx.error(str_cat("num_scan_inputs is ", m, " but its body takes ", formal_inputs(body), " inputs"));
  }
  const size_t states = formal_inputs(body) - m;
  OPFUSE_TRY(check_body_arity(ctx, body, ctx.num_inputs(), states, "body"));
  const size_t scanned = body.outputs().size() - states;
  if (node.outputs().size() != body.outputs().size()) {
    return ctx.error(str_cat("its body returns ", body.outputs().size(), " values for ", node.outputs().size(), " outputs"));
  }
  const ScanAttrs attrs = scan_attrs(node, scanned);
  Dim length = Dim::unknown();
  for (size_t j = 0; j < m; ++j) {
    const auto& shape = ctx.input_shape(states + j);
    if (!shape) continue;
    const int64_t axis = normalized_axis(attrs.input_axes[j], static_cast<int64_t>(shape->size()));
    if (axis < 0 || axis >= static_cast<int64_t>(shape->size())) {
      return ctx.error(str_cat("scan input ", j, " has rank ", shape->size(), " but its scan axis is ", attrs.input_axes[j]));
    }
    length = (*shape)[axis];
  }
  OPFUSE_ASSIGN_OR_RETURN(auto outs, infer_body(ctx, body, body_input_types(node, body, input_types(ctx))));
  for (size_t k = 0; k < states; ++k) {
    OPFUSE_ASSIGN_OR_RETURN(ValueType t, merge_types({ctx.input_dtype(k), ctx.input_shape(k)}, outs[k], ctx,
                                                     str_cat("state ", k)));
    ctx.set_output(k, t.dtype, t.shape);
  }
  for (size_t k = 0; k < scanned; ++k) {
    const ValueType& per = outs[states + k];
    std::optional<Shape> shape = per.shape;
    if (shape) {
      const int64_t axis = normalized_axis(attrs.output_axes[k], static_cast<int64_t>(shape->size()) + 1);
      if (axis < 0 || axis > static_cast<int64_t>(shape->size())) {
        return ctx.error(str_cat("scan output ", k, " has rank ", shape->size(), " but its axis is ", attrs.output_axes[k]));
      }
      shape->insert(shape->begin() + axis, length);
    }
    ctx.set_output(states + k, per.dtype, shape);
  }
  return Status::ok();
}

Status control_flow_kernel(KernelContext& ctx) {
  std::vector<const Tensor*> inputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) inputs.push_back(ctx.input_or_null(i));
  OPFUSE_ASSIGN_OR_RETURN(std::vector<Tensor> outs, run_control_flow(ctx.node(), inputs, eager_body_runner()));
  for (size_t i = 0; i < outs.size() && i < ctx.num_outputs(); ++i) ctx.set_output(i, std::move(outs[i]));
  return Status::ok();
}

constexpr int kMaxNodeInputs = 1 << 16;  // the formal inputs and the outer-scope values the bodies read

}  // namespace

const BodyRunner& eager_body_runner() {
  static const EagerBodyRunner runner;
  return runner;
}

std::vector<const Graph*> node_bodies(const Node& node) {
  std::vector<const Graph*> bodies;
  for (const auto& [name, value] : node.attrs) {
    if (const auto* g = std::get_if<GraphAttr>(&value); g && *g) bodies.push_back(g->get());
  }
  return bodies;
}

std::vector<ValueType> body_input_types(const Node& node, const Graph& body, const std::vector<ValueType>& node_inputs) {
  std::vector<ValueType> types;
  const size_t formal = formal_inputs(body);
  const size_t captures_at = node_inputs.size() - body.captured_inputs;
  if (node.op_type() == "Loop") {
    types.push_back({DType::kI64, Shape{}});
    types.push_back({DType::kBool, Shape{}});
    for (size_t k = 2; k < formal; ++k) types.push_back(k < node_inputs.size() ? node_inputs[k] : ValueType{});
  } else if (node.op_type() == "Scan") {
    const auto m = static_cast<size_t>(AttrReader(node).get_int("num_scan_inputs"));
    const size_t states = formal - std::min(formal, m);
    const ScanAttrs attrs = scan_attrs(node, 0);
    for (size_t k = 0; k < formal && k < node_inputs.size(); ++k) {
      ValueType t = node_inputs[k];
      if (k >= states && t.shape) {
        const int64_t axis = normalized_axis(attrs.input_axes[k - states], static_cast<int64_t>(t.shape->size()));
        if (axis >= 0 && axis < static_cast<int64_t>(t.shape->size())) t.shape->erase(t.shape->begin() + axis);
      }
      types.push_back(t);
    }
  }
  types.resize(formal);
  for (size_t i = captures_at; i < node_inputs.size(); ++i) types.push_back(node_inputs[i]);
  return types;
}

Result<std::vector<Tensor>> run_control_flow(const Node& node, std::span<const Tensor* const> inputs,
                                             const BodyRunner& runner) {
  if (node.op_type() == "If") return run_if(node, inputs, runner);
  if (node.op_type() == "Loop") return run_loop(node, inputs, runner);
  return run_scan(node, inputs, runner);
}

std::vector<OpDef> control_flow_ops() {
  std::vector<OpDef> ops;
  {
    OpDef d;
    d.name = "If";
    d.min_opset = 1;
    d.max_opset = 21;
    d.max_inputs = kMaxNodeInputs;
    d.max_outputs = kMaxNodeInputs;
    d.attrs = {{"then_branch", AttrType::kGraph, std::nullopt, true},
               {"else_branch", AttrType::kGraph, std::nullopt, true}};
    d.infer = infer_if;
    d.reference = control_flow_kernel;
    d.summary = "runs then_branch or else_branch (subgraphs) on a bool computed at run time";
    ops.push_back(std::move(d));
  }
  {
    OpDef d;
    d.name = "Loop";
    d.min_opset = 1;
    d.max_opset = 21;
    d.max_inputs = kMaxNodeInputs;
    d.min_outputs = 0;
    d.max_outputs = kMaxNodeInputs;
    d.attrs = {{"body", AttrType::kGraph, std::nullopt, true}};
    d.infer = infer_loop;
    d.reference = control_flow_kernel;
    d.summary = "runs body up to a trip count while its condition holds; carries values, stacks scan outputs";
    ops.push_back(std::move(d));
  }
  {
    OpDef d;
    d.name = "Scan";
    d.min_opset = 9;
    d.max_opset = 21;
    d.max_inputs = kMaxNodeInputs;
    d.max_outputs = kMaxNodeInputs;
    d.attrs = {{"body", AttrType::kGraph, std::nullopt, true},
               {"num_scan_inputs", AttrType::kInt, std::nullopt, true},
               {"scan_input_axes", AttrType::kInts, std::nullopt},
               {"scan_input_directions", AttrType::kInts, std::nullopt},
               {"scan_output_axes", AttrType::kInts, std::nullopt},
               {"scan_output_directions", AttrType::kInts, std::nullopt}};
    d.infer = infer_scan;
    d.reference = control_flow_kernel;
    d.summary = "runs body once per slice of its scan inputs; carries states, stacks scan outputs";
    ops.push_back(std::move(d));
  }
  return ops;
}

}  // namespace opfuse
