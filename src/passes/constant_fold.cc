// Constant folding: a node whose inputs are all constants, or that reads only the shape of an
// input whose shape is fully static (Shape, Size), is evaluated once with its reference kernel
// and becomes a constant: Op(c1, c2) -> c. Chains (Shape -> Gather -> Unsqueeze -> Concat) fold
// in one sweep because nodes are visited in topological order. Nodes whose output would be much
// larger than their inputs (ConstantOfShape, Expand, Tile, Range to > 1M elements) stay, so a
// model file's size does not explode in memory; the refusal is recorded.
#include "ops/op_def.h"
#include "ops/reference.h"
#include "ops/infer_shapes.h"
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace opfuse {
namespace {

constexpr std::string_view kPass = "constant_fold";
// Outputs up to this many elements always fold; larger ones only when no larger than the inputs.
constexpr int64_t kMaxGrowElements = int64_t{1} << 20;

// The inputs the reference kernel would see, or nullopt when the node is not foldable. A
// shape-only input is a tensor with the right dims and no data: the op reads only dims.
std::optional<std::vector<Tensor>> foldable_inputs(const Node& node, int64_t& input_elements) {
  std::vector<Tensor> tensors;
  input_elements = 0;
  const bool shape_only = node.def().traits.reads_shape_only;
  for (size_t i = 0; i < node.inputs().size(); ++i) {
    const Value* in = node.input(i);
    if (in == nullptr) {
      tensors.emplace_back();
    } else if (const Tensor* data = constant_data(in)) {
      tensors.push_back(*data);
      input_elements += data->numel();
    } else if (shape_only && in->dtype != DType::kUndefined && known_dims(in)) {
      tensors.push_back(Tensor::wrap(in->dtype, *known_dims(in), nullptr, nullptr));
    } else {
      return std::nullopt;
    }
  }
  return tensors;
}

// Element count of all outputs from the inferred types; nullopt when some shape is not static
// (then it is worked out again from the constant inputs, as shape inference would; an
// inference error is the node's error, as every input is fixed).
Result<std::optional<int64_t>> output_elements(const Node& node, const std::vector<Tensor>& inputs) {
  int64_t total = 0;
  bool all_known = true;
  for (const Value* out : node.outputs()) {
    auto dims = known_dims(out);
    if (!dims) {
      all_known = false;
      break;
    }
    total += numel_of(*dims);
  }
  if (all_known) return std::optional<int64_t>(total);

  std::vector<ValueType> types;
  std::vector<const Tensor*> constants;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value* in = node.input(i);
    types.push_back(in ? ValueType{in->dtype, in->shape} : ValueType{});
    constants.push_back(in && constant_data(in) ? &inputs[i] : nullptr);
  }
  InferContext ctx(node, std::move(types), std::move(constants));
  if (!node.def().infer) return std::optional<int64_t>();
  OPFUSE_TRY(node.def().infer(ctx));
  total = 0;
  for (const ValueType& t : ctx.outputs()) {
    if (!t.shape || !is_static(*t.shape)) return std::optional<int64_t>();
    total += numel_of(*static_dims(*t.shape));
  }
  return std::optional<int64_t>(total);
}

}  // namespace

Result<bool> run_constant_fold_pass(Graph& graph, PassContext& context) {
  OPFUSE_TRY(graph.topological_sort());
  bool changed = false;
  for (Node* node : graph.nodes()) {
    if (!is_pure(*node) || node->outputs().empty()) continue;
    int64_t input_elements = 0;
    auto inputs = foldable_inputs(*node, input_elements);
    if (!inputs) continue;

    auto counted = output_elements(*node, *inputs);
    if (!counted.is_ok()) return counted.status().with_context(std::string(kPass));
    const std::optional<int64_t> out_elements = *counted;
    if (!out_elements) {
      context.decide(refusal(std::string(kPass), node_label(*node),
                             "output shape unknown before evaluation (cannot bound its size)"));
      continue;
    }
    if (*out_elements > kMaxGrowElements && *out_elements > input_elements) {
      context.decide(refusal(std::string(kPass), node_label(*node),
                             str_cat("output of ", *out_elements, " elements from ", input_elements,
                                     " input elements exceeds the growth limit of ", kMaxGrowElements,
                                     " elements")));
      continue;
    }

    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : *inputs) ptrs.push_back(t.defined() ? &t : nullptr);
    // Every input is fixed, so the node would fail the same way on every run: report it now.
    auto outputs = run_reference(*node, std::move(ptrs));
    if (!outputs.is_ok()) return outputs.status().with_context(std::string(kPass));
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      const Value* out = node->output(i);
      const DType got = (*outputs)[i].dtype();
      if (out->dtype != DType::kUndefined && out->dtype != got) {
        return Status::internal_error(str_cat(kPass, ": ", node->describe(), " output '", out->name(),
                                              "' is typed ", dtype_name(out->dtype),
                                              " but its reference kernel produced ", dtype_name(got)));
      }
    }
    OPFUSE_TRY(replace_with_constants(graph, node, std::move(*outputs)));
    changed = true;
  }
  // A Reshape (or Expand, Tile ...) whose shape input just became constant now has a static
  // output shape, and what reads it may become foldable on the next round.
  if (changed) OPFUSE_TRY(infer_shapes(graph));
  return changed;
}

}  // namespace opfuse
