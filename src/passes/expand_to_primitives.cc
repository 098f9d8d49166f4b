// Expanders (pass `expand_to_primitives`; `expand_composites` is the one that inlines user
// composite ops): built-in composite ops rewritten into primitive ops so that region fusion fuses them with
// their neighbours (a residual Add into LayerNorm, the attention scale and mask into Softmax) in
// one generated kernel, instead of a dedicated kernel per composite and a pass over memory per
// neighbour. One table entry per composite:
//
//   Softmax(x, axis=-1)           -> e = Exp(x - ReduceMax(x)); e / ReduceSum(e)
//   LogSoftmax(x, axis=-1)        -> d = x - ReduceMax(x);      d - Log(ReduceSum(Exp(d)))
//   LayerNormalization(x, g, b)   -> d = x - ReduceMean(x);  d / Sqrt(ReduceMean(d * d) + eps) * g + b
//
// Gelu, HardSwish, HardSigmoid, SiLU-as-Mul(x, Sigmoid(x)), Mish, Softplus ... need no expander:
// they are elementwise ops whose OpDef ScalarExpr already is their primitive form, and region
// fusion composes those expressions directly.
//
// Softmax and LayerNormalization are currently kept for their dedicated kernels (measured faster,
// see kExpanders): their expanders stay, switched by one field. Only the last axis is expanded
// (the row the generated kernel keeps in cache), only f32 with
// static shapes, only when region fusion is enabled and the node may fuse (FusionConfig), and
// LayerNormalization only when its Mean/InvStdDev outputs are unused.
#include "ops/op_def.h"
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace opfuse {
namespace {

constexpr std::string_view kPass = "expand_to_primitives";

struct Builder {
  Graph& graph;
  const Node& node;
  const std::optional<Shape> row_shape;  // x's shape with the last dim 1
  const std::optional<Shape> full_shape;

  Result<Value*> op(const std::string& type, std::vector<Value*> inputs, const std::string& tag, bool row,
                    Attributes attrs = {}) {
    const std::string name = str_cat(node.name(), "/", tag);
    OPFUSE_ASSIGN_OR_RETURN(Node * n, graph.add_node(type, std::move(inputs), {name}, std::move(attrs), name));
    n->output(0)->dtype = DType::kF32;
    n->output(0)->shape = row ? row_shape : full_shape;
    return n->output(0);
  }
  Value* scalar(const std::string& tag, float v) {
    return graph.add_constant(str_cat(node.name(), "/", tag), Tensor::scalar<float>(v));
  }
  Result<Value*> reduce(const std::string& type, Value* x, const std::string& tag) {
    Attributes attrs;
    attrs["keepdims"] = int64_t{1};
    if (type == "ReduceSum") {
      Value* axes = graph.add_constant(str_cat(node.name(), "/", tag, "_axes"),
                                       Tensor::from_vector<int64_t>({1}, std::vector<int64_t>{-1}));
      return op(type, {x, axes}, tag, true, attrs);
    }
    attrs["axes"] = std::vector<int64_t>{-1};
    return op(type, {x}, tag, true, attrs);
  }
};

// The expanded form's result value, or null when the node is not expanded.
using ExpandFn = Result<Value*> (*)(Builder&, const Node&);

Result<Value*> expand_softmax(Builder& b, const Node& n) {
  Value* x = n.input(0);
  OPFUSE_ASSIGN_OR_RETURN(Value * m, b.reduce("ReduceMax", x, "max"));
  OPFUSE_ASSIGN_OR_RETURN(Value * d, b.op("Sub", {x, m}, "sub", false));
  OPFUSE_ASSIGN_OR_RETURN(Value * e, b.op("Exp", {d}, "exp", false));
  OPFUSE_ASSIGN_OR_RETURN(Value * s, b.reduce("ReduceSum", e, "sum"));
  return b.op("Div", {e, s}, "div", false);
}

Result<Value*> expand_log_softmax(Builder& b, const Node& n) {
  Value* x = n.input(0);
  OPFUSE_ASSIGN_OR_RETURN(Value * m, b.reduce("ReduceMax", x, "max"));
  OPFUSE_ASSIGN_OR_RETURN(Value * d, b.op("Sub", {x, m}, "sub", false));
  OPFUSE_ASSIGN_OR_RETURN(Value * e, b.op("Exp", {d}, "exp", false));
  OPFUSE_ASSIGN_OR_RETURN(Value * s, b.reduce("ReduceSum", e, "sum"));
  OPFUSE_ASSIGN_OR_RETURN(Value * l, b.op("Log", {s}, "log", true));
  return b.op("Sub", {d, l}, "out", false);
}

Result<Value*> expand_layer_norm(Builder& b, const Node& n) {
  Value* x = n.input(0);
  const float eps = AttrReader(n).get_float("epsilon");
  OPFUSE_ASSIGN_OR_RETURN(Value * mean, b.reduce("ReduceMean", x, "mean"));
  OPFUSE_ASSIGN_OR_RETURN(Value * d, b.op("Sub", {x, mean}, "centre", false));
  OPFUSE_ASSIGN_OR_RETURN(Value * sq, b.op("Mul", {d, d}, "square", false));
  OPFUSE_ASSIGN_OR_RETURN(Value * var, b.reduce("ReduceMean", sq, "var"));
  OPFUSE_ASSIGN_OR_RETURN(Value * ve, b.op("Add", {var, b.scalar("eps", eps)}, "var_eps", true));
  OPFUSE_ASSIGN_OR_RETURN(Value * sd, b.op("Sqrt", {ve}, "std", true));
  OPFUSE_ASSIGN_OR_RETURN(Value * y, b.op("Div", {d, sd}, "normed", false));
  OPFUSE_ASSIGN_OR_RETURN(Value * ys, b.op("Mul", {y, n.input(1)}, "scaled", false));
  if (n.input(2) == nullptr) return ys;
  return b.op("Add", {ys, n.input(2)}, "shifted", false);
}

struct Expander {
  std::string_view op_type;
  ExpandFn expand;
  // Non-empty: the op keeps its dedicated kernel, for this measured reason (the expander stays,
  // ready for when the generated row kernels catch up).
  std::string_view keep_dedicated;
};

// Measured with tests/kernels/norm_bench_main.cc (docs/benchmarks.md, "Dedicated row kernels vs
// generated"): the dedicated hwy.softmax / hwy.layer_norm kernels beat the generated row-mode
// kernel at every shape tried (BERT [1,12,128,128] softmax 1.6-1.9x, [128,768] LayerNorm 2.7x,
// [4096,4096] 1.6-2.4x, [8,1000] 1.6-4x), and still win with BERT's neighbours fused in (scale +
// mask + softmax 5-14%, residual Add + LayerNorm 10-15%, interleaved runs). LogSoftmax was not measured.
constexpr std::string_view kSoftmaxFaster =
    "kept for its dedicated kernel: hwy.softmax beats the generated kernel at every benchmarked shape, "
    "also with the attention scale and mask fused in (docs/benchmarks.md)";
constexpr std::string_view kLayerNormFaster =
    "kept for its dedicated kernel: hwy.layer_norm beats the generated kernel at every benchmarked shape, "
    "also with the residual Add fused in (docs/benchmarks.md)";

const Expander kExpanders[] = {
    {"Softmax", expand_softmax, kSoftmaxFaster},
    {"LogSoftmax", expand_log_softmax, {}},
    {"LayerNormalization", expand_layer_norm, kLayerNormFaster},
};

// Why `n` is not expanded, or empty.
std::string refusal(const Node& n) {
  const auto dims = known_dims(n.input(0));
  if (!dims || n.input(0)->dtype != DType::kF32 || dims->empty()) return "not f32 with a static shape";
  const int64_t rank = static_cast<int64_t>(dims->size());
  int64_t axis = AttrReader(n).get_int("axis");
  if (axis < 0) axis += rank;
  if (axis != rank - 1) return str_cat("axis ", axis, " is not the last axis");
  // The expansion's values get new names; a graph output must keep its own.
  if (n.output(0)->is_graph_output()) return "its output is a graph output";
  for (size_t i = 1; i < n.outputs().size(); ++i) {
    if (!n.output(i)->uses().empty() || n.output(i)->is_graph_output()) return "its statistics outputs are used";
  }
  for (size_t i = 1; i < n.inputs().size(); ++i) {
    if (n.input(i) != nullptr && n.input(i)->dtype != DType::kF32) return "non-f32 scale or bias";
  }
  return {};
}

}  // namespace

Result<bool> run_expand_to_primitives_pass(Graph& graph, PassContext& context) {
  // Expanded composites only pay off when region fusion puts them back together.
  if (!context.fusion.rule_enabled(kPass) || !context.fusion.rule_enabled("region_fusion")) return false;
  bool changed = false;
  for (Node* n : graph.nodes()) {
    if (!n->domain().empty()) continue;
    const Expander* ex = nullptr;
    for (const Expander& e : kExpanders) {
      if (n->op_type() == e.op_type) ex = &e;
    }
    if (ex == nullptr) continue;
    const std::string pass(kPass);
    if (!context.fusion.node_fusible(*n)) {
      context.decide(refusal(pass, node_label(*n), context.fusion.node_refusal(*n), {n->name()}));
      continue;
    }
    if (std::string why = refusal(*n); !why.empty()) {
      context.decide(refusal(pass, node_label(*n), why));
      continue;
    }
    if (!ex->keep_dedicated.empty()) {
      context.decide(refusal(pass, node_label(*n), std::string(ex->keep_dedicated)));
      continue;
    }
    auto dims = *known_dims(n->input(0));
    std::vector<int64_t> row = dims;
    row.back() = 1;
    Builder b{graph, *n, make_shape(row), make_shape(dims)};
    Value* out = n->output(0);
    const std::string what = str_cat(node_label(*n), " into primitives for region fusion");
    const std::string name = n->name();
    OPFUSE_ASSIGN_OR_RETURN(Value * result, ex->expand(b, *n));
    graph.replace_all_uses(out, result);
    OPFUSE_TRY(graph.remove_node(n));
    context.decide(application(pass, what, {name}, result->producer()->name()));
    changed = true;
  }
  if (changed) {
    graph.remove_dead_values();
    OPFUSE_TRY(graph.topological_sort());
  }
  return changed;
}

}  // namespace opfuse
