// Compute a float16 model in float32. CPUs below AVX512-FP16 have no float16 arithmetic: a float16
// export run as written converts every operand to float32 and rounds every result back, op by
// op, on reference kernels. Instead the float16 weights are widened once, here, and everything
// between the model's inputs and outputs runs on the float32 kernels (and fuses like a float32
// model); only the graph's float16 inputs and outputs keep their declared dtype, through one Cast
// each at the boundary.
//
//   before                                          after
//     x: f32 -> Cast(to=f16) -> Conv(W: f16) -> y      x: f32 -> Cast(to=f32) -> Conv(W: f32) -> y
//     y -> Relu -> Cast(to=f32) -> out: f32            y -> Relu -> Cast(to=f32) -> out: f32
//                                                    (simplify then drops the Casts to the same dtype)
//
// Not exact: intermediate results keep float32 precision instead of being rounded to float16 after
// every op, so they differ from eager mode within float16 accuracy (and a value beyond float16's
// range stays finite where float16 would overflow to Inf). `--disable fp16_in_fp32` keeps float16
// semantics op by op. Graphs with subgraphs (If, Loop, Scan) are left as they are: their bodies
// are typed per use and would need the same rewrite.
#include <unordered_set>

#include "ops/op_def.h"
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace opfuse {
namespace {

constexpr std::string_view kPass = "fp16_in_fp32";
constexpr int64_t kOnnxFloat = 1, kOnnxFloat16 = 10;

bool has_subgraph(const Node& node) {
  for (const auto& [name, value] : node.attrs) {
    if (std::holds_alternative<GraphAttr>(value)) return true;
  }
  return false;
}

// A float16 tensor attribute (ConstantOfShape's value) or dtype attribute (Cast's `to`,
// EyeLike's and the Random ops' `dtype`) made float32. Returns whether one changed.
Result<bool> widen_attributes(Node& node) {
  bool changed = false;
  for (auto& [name, value] : node.attrs) {
    if (auto* t = std::get_if<Tensor>(&value); t != nullptr && t->dtype() == DType::kF16) {
      OPFUSE_ASSIGN_OR_RETURN(Tensor wide, t->cast(DType::kF32));
      value = std::move(wide);
      changed = true;
    } else if (auto* code = std::get_if<int64_t>(&value);
               code != nullptr && *code == kOnnxFloat16 && (name == "to" || name == "dtype")) {
      *code = kOnnxFloat;
      changed = true;
    }
  }
  return changed;
}

}  // namespace

Result<bool> run_fp16_in_fp32_pass(Graph& graph, PassContext& context) {
  if (!context.fusion.rule_enabled(kPass)) return false;
  size_t halves = 0;
  for (Value* v : graph.values()) halves += v->dtype == DType::kF16;
  if (halves == 0) return false;
  for (Node* node : graph.nodes()) {
    if (has_subgraph(*node)) {
      context.decide(refusal(std::string(kPass), "float16 values computed in float32",
                             str_cat(node_label(*node), " has a subgraph; float16 stays float16"), {node->name()}));
      return false;
    }
  }

  int64_t widened_weights = 0;
  std::unordered_set<const Node*> boundary_casts;
  for (Value* v : graph.values()) {
    if (v->dtype != DType::kF16 || v->constant() == nullptr) continue;
    OPFUSE_ASSIGN_OR_RETURN(Tensor wide, v->constant()->cast(DType::kF32));
    graph.set_constant(v, std::move(wide));
    ++widened_weights;
  }
  // Inputs: a Cast to float32 in front of every reader.
  for (Value* in : std::vector<Value*>(graph.inputs())) {
    if (in->dtype != DType::kF16 || in->uses().empty()) continue;
    OPFUSE_ASSIGN_OR_RETURN(Node * cast, graph.add_node("Cast", {in}, {in->name() + "_f32"},
                                                        {{"to", AttrValue(kOnnxFloat)}}));
    cast->output(0)->dtype = DType::kF32;
    cast->output(0)->shape = in->shape;
    for (const Use& use : std::vector<Use>(in->uses())) {
      if (use.node != cast) graph.set_input(use.node, static_cast<size_t>(use.input_index), cast->output(0));
    }
    boundary_casts.insert(cast);
  }
  // Outputs: computed in float32 under a new name, then one Cast back to the declared float16
  // under the output's own name.
  for (Value* out : std::vector<Value*>(graph.outputs())) {
    if (out->dtype != DType::kF16 || out->producer() == nullptr) continue;
    const std::string name = out->name();
    OPFUSE_TRY(graph.rename_value(out, graph.unique_value_name(name + "_f32")));
    OPFUSE_ASSIGN_OR_RETURN(Node * cast, graph.add_node("Cast", {out}, {graph.unique_value_name(name + "_f16")},
                                                        {{"to", AttrValue(kOnnxFloat16)}}));
    cast->output(0)->dtype = DType::kF16;
    cast->output(0)->shape = out->shape;
    graph.replace_all_uses(out, cast->output(0));
    graph.set_input(cast, 0, out);  // replace_all_uses moved the Cast's own input too
    OPFUSE_TRY(graph.rename_value(cast->output(0), name));
    boundary_casts.insert(cast);
  }
  int64_t retyped_attrs = 0;
  for (Node* node : graph.nodes()) {
    if (boundary_casts.count(node)) continue;
    OPFUSE_ASSIGN_OR_RETURN(bool changed, widen_attributes(*node));
    retyped_attrs += changed;
    for (Value* out : node->outputs()) {
      if (out != nullptr && out->dtype == DType::kF16 && !out->is_graph_output()) out->dtype = DType::kF32;
    }
  }
  OPFUSE_TRY(graph.topological_sort());
  context.decide(application(std::string(kPass),
                             str_cat(halves, " float16 values computed in float32: ", widened_weights,
                                     " weights widened once, ", retyped_attrs, " Casts/attributes retyped, ",
                                     boundary_casts.size(), " Casts at the graph's float16 inputs and outputs")));
  return true;
}

}  // namespace opfuse
