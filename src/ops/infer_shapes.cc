#include "ops/infer_shapes.h"

#include "ops/op_def.h"

namespace opfuse {
namespace {

// Combines what inference found with what the model declared: a known dim beats a symbol,
// a symbol beats unknown. Disagreeing known dims are an error.
Result<std::optional<Shape>> merge_shapes(const std::optional<Shape>& inferred,
                                          const std::optional<Shape>& declared,
                                          const Value& value) {
  if (!inferred) return declared;
  if (!declared) return inferred;
  if (inferred->size() != declared->size()) {
    return Status::user_error(str_cat("value '", value.name(), "': inferred shape ",
                                      shape_to_string(*inferred), " has a different rank from the declared ",
                                      shape_to_string(*declared)));
  }
  Shape merged = *inferred;
  for (size_t i = 0; i < merged.size(); ++i) {
    const Dim& d = (*declared)[i];
    if (merged[i].is_known() && d.is_known() && merged[i] != d) {
      return Status::user_error(str_cat("value '", value.name(), "': inferred shape ",
                                        shape_to_string(*inferred), " contradicts the declared ",
                                        shape_to_string(*declared)));
    }
    if (!merged[i].is_known() && (d.is_known() || d.is_symbolic())) merged[i] = d;
  }
  return std::optional<Shape>(std::move(merged));
}

}  // namespace

Status infer_shapes(Graph& graph) {
  OPFUSE_TRY(graph.topological_sort());
  for (Node* node : graph.nodes()) {
    std::vector<ValueType> inputs;
    std::vector<const Tensor*> constants;
    for (Value* in : node->inputs()) {
      inputs.push_back(in ? ValueType{in->dtype, in->shape} : ValueType{});
      constants.push_back(in ? in->constant() : nullptr);
    }
    InferContext ctx(*node, std::move(inputs), std::move(constants));
    OPFUSE_TRY(node->def().infer(ctx));
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      Value* out = node->output(i);
      const ValueType& t = ctx.outputs()[i];
      if (t.dtype != DType::kUndefined) {
        if (out->dtype != DType::kUndefined && out->dtype != t.dtype) {
          return Status::user_error(str_cat(node->describe(), ": output '", out->name(),
                                            "' is declared ", dtype_name(out->dtype),
                                            " but the op produces ", dtype_name(t.dtype)));
        }
        out->dtype = t.dtype;
      }
      OPFUSE_ASSIGN_OR_RETURN(out->shape, merge_shapes(t.shape, out->shape, *out));
    }
  }
  return Status::ok();
}

Result<Graph> bind_input_shapes(const Graph& model, const std::vector<Shape>& input_shapes) {
  if (input_shapes.size() != model.inputs().size()) {
    return Status::internal_error(str_cat("binding ", input_shapes.size(), " shapes to a graph of ",
                                          model.inputs().size(), " inputs"));
  }
  Graph graph = model.clone();
  for (size_t i = 0; i < input_shapes.size(); ++i) graph.inputs()[i]->shape = input_shapes[i];
  for (Value* v : graph.values()) {
    if (v->producer() != nullptr && !v->is_graph_output()) v->shape.reset();
  }
  OPFUSE_TRY(infer_shapes(graph));
  return graph;
}

}  // namespace opfuse
