// QuantizeLinear's arithmetic as float32 ops (passes/quantize_steps.h).
#include "passes/quantize_steps.h"

#include "passes/pass_util.h"

namespace opfuse {
namespace {

std::optional<double> constant_scalar(const Node& node, size_t i, DType dtype) {
  const Tensor* t = constant_data(node.input(i));
  if (t == nullptr || t->numel() != 1 || t->dtype() != dtype) return std::nullopt;
  return t->get_double(0);
}

}  // namespace

std::optional<QuantizeParams> constant_quantize_params(const Node& node, DType type) {
  if (type != DType::kU8 && type != DType::kI8) return std::nullopt;
  const auto scale = constant_scalar(node, 1, DType::kF32);
  const auto zero = node.input(2) == nullptr ? std::optional<double>(0.0) : constant_scalar(node, 2, type);
  if (!scale || !zero) return std::nullopt;
  return QuantizeParams{static_cast<float>(*scale), static_cast<float>(*zero), type};
}

Result<Value*> quantized_less_low(Graph& graph, Value* x, const QuantizeParams& p, const std::string& base) {
  const auto constant = [&](const char* what, float v) {
    return graph.add_constant(graph.unique_value_name(str_cat(base, "_", what)), Tensor::scalar<float>(v));
  };
  const auto op = [&](const char* type, std::vector<Value*> inputs, Attributes attrs = {}) -> Result<Value*> {
    OPFUSE_ASSIGN_OR_RETURN(Node * n, graph.add_node(type, std::move(inputs), {graph.unique_value_name(str_cat(base, "_", type))},
                                                     std::move(attrs)));
    n->output(0)->dtype = DType::kF32;
    n->output(0)->shape = x->shape;
    return n->output(0);
  };
  Value* lo = constant("low", p.low());
  OPFUSE_ASSIGN_OR_RETURN(Value * r, op("Div", {x, constant("scale", p.scale)}));
  OPFUSE_ASSIGN_OR_RETURN(r, op("Round", {r}));
  OPFUSE_ASSIGN_OR_RETURN(r, op("Add", {r, constant("zero", p.zero)}));
  OPFUSE_ASSIGN_OR_RETURN(r, op("Clip", {r, lo, constant("high", p.high())}));
  OPFUSE_ASSIGN_OR_RETURN(r, op("Sub", {r, lo}));
  return op("Shrink", {r}, {{"lambd", AttrValue(0.0f)}, {"bias", AttrValue(0.0f)}});
}

}  // namespace opfuse
