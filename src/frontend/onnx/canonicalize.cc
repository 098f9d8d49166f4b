#include "frontend/onnx/canonicalize.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include "ops/infer_shapes.h"

namespace opfuse::onnx_import {
namespace {

// An attribute that became an input at opset `input_since`: ints become a 1-D i64 tensor, a
// float a scalar f32 tensor.
struct AttrToInput {
  std::string_view op;
  int64_t input_since;
  std::string_view attr;
  size_t input_index;
};
constexpr AttrToInput kAttrToInput[] = {
    {"Squeeze", 13, "axes", 1},    // Squeeze-11: axes attribute; Squeeze-13: axes input
    {"Unsqueeze", 13, "axes", 1},  // likewise
    {"Split", 13, "split", 1},     // Split-11: split attribute; Split-13: split input
    {"ReduceSum", 13, "axes", 1},  // the other Reduce* ops keep the attribute until opset 18
    {"Dropout", 12, "ratio", 1},   // Dropout-10: ratio attribute; Dropout-12: ratio input
};

// Ops whose `axis` meant "flatten to 2-D at axis, then act on the second dim" before opset 13
// (default axis 1) and means "act on this one axis" since (default -1).
constexpr int64_t kCoerced2DUntil = 12;
constexpr std::string_view kCoerced2D[] = {"Softmax", "LogSoftmax", "Hardmax"};

// Inputs where an empty constant tensor means "not given": Resize-11 requires roi and scales
// and passes empty tensors when unused; Resize-13 lets them be omitted, which is what the op
// record sees as absent.
struct EmptyMeansOmitted {
  std::string_view op;
  size_t first, last;  // input index range
};
constexpr EmptyMeansOmitted kEmptyMeansOmitted[] = {{"Resize", 1, 2}};

Status move_attr_to_input(NodeDraft& node, const AttrToInput& rule, CanonicalizeContext& ctx) {
  auto it = node.attrs.find(std::string(rule.attr));
  if (it == node.attrs.end()) return Status::ok();  // absent stays absent (e.g. squeeze all)
  Tensor t;
  if (const auto* ints = std::get_if<std::vector<int64_t>>(&it->second)) {
    t = Tensor::from_vector<int64_t>({static_cast<int64_t>(ints->size())}, *ints);
  } else if (const auto* f = std::get_if<float>(&it->second)) {
    t = Tensor::scalar<float>(*f);
  } else {
    return Status::user_error(str_cat("node '", node.name, "': attribute '", rule.attr, "' of ",
                                      node.op_type, " has type ",
                                      attr_type_name(attr_type_of(it->second))));
  }
  if (node.inputs.size() > rule.input_index && node.inputs[rule.input_index] != nullptr) {
    return Status::user_error(str_cat("node '", node.name, "': ", node.op_type, " at opset ",
                                      node.opset, " has both a '", rule.attr,
                                      "' attribute and input ", rule.input_index));
  }
  Value* constant =
      ctx.graph.add_constant(ctx.fresh_name(str_cat(node.name, "_", rule.attr)), std::move(t));
  node.inputs.resize(std::max(node.inputs.size(), rule.input_index + 1), nullptr);
  node.inputs[rule.input_index] = constant;
  node.attrs.erase(it);
  return Status::ok();
}

// The rank of `v`, running shape inference over the graph built so far if nobody knows it yet.
Result<std::optional<int64_t>> rank_of(Value* v, CanonicalizeContext& ctx) {
  if (!v->shape) OPFUSE_TRY(infer_shapes(ctx.graph));
  if (!v->shape) return std::optional<int64_t>();
  return std::optional<int64_t>(static_cast<int64_t>(v->shape->size()));
}

// Softmax-12(x, axis) == Reshape(Softmax-13(Flatten(x, axis), axis=-1), Shape(x)). When `axis`
// already is the last dim the two opsets agree and the node is kept with the axis made explicit.
Status add_coerced_2d(NodeDraft node, CanonicalizeContext& ctx) {
  int64_t axis = 1;  // the pre-13 default
  if (auto it = node.attrs.find("axis"); it != node.attrs.end()) {
    if (!std::holds_alternative<int64_t>(it->second)) {
      return Status::user_error(
          str_cat("node '", node.name, "': attribute 'axis' of ", node.op_type, " must be an int"));
    }
    axis = std::get<int64_t>(it->second);
  }
  node.attrs["axis"] = axis;
  if (node.inputs.empty() || node.inputs[0] == nullptr || node.outputs.size() != 1) {
    return ctx.add_node(std::move(node)).status();  // malformed; add_node reports the arity
  }
  Value* x = node.inputs[0];
  OPFUSE_ASSIGN_OR_RETURN(std::optional<int64_t> rank, rank_of(x, ctx));
  const bool last_axis = axis == -1 || (rank && axis == *rank - 1);
  if (last_axis) return ctx.add_node(std::move(node)).status();

  auto helper = [&](std::string op, std::vector<Value*> inputs, Attributes attrs,
                    std::string output) -> Result<Value*> {
    NodeDraft d{op,
                "",
                ctx.fresh_name(str_cat(node.name, "_", op)),
                node.opset,
                std::move(inputs),
                {std::move(output)},
                std::move(attrs)};
    OPFUSE_ASSIGN_OR_RETURN(Node * n, ctx.add_node(std::move(d)));
    return n->output(0);
  };
  const std::string base = node.outputs[0];
  // A static input shape goes in as a constant so that shape inference still sees the dims.
  Value* shape = nullptr;
  if (auto dims = x->shape ? static_dims(*x->shape) : std::nullopt) {
    shape = ctx.graph.add_constant(
        ctx.fresh_name(base + "_shape"),
        Tensor::from_vector<int64_t>({static_cast<int64_t>(dims->size())}, *dims));
  } else {
    OPFUSE_ASSIGN_OR_RETURN(shape, helper("Shape", {x}, {}, ctx.fresh_name(base + "_shape")));
  }
  OPFUSE_ASSIGN_OR_RETURN(Value * flat,
                          helper("Flatten", {x}, {{"axis", axis}}, ctx.fresh_name(base + "_2d")));
  NodeDraft core = node;
  core.inputs = {flat};
  core.outputs = {ctx.fresh_name(base + "_2d_out")};
  core.attrs["axis"] = int64_t{-1};
  OPFUSE_ASSIGN_OR_RETURN(Node * core_node, ctx.add_node(std::move(core)));
  return helper("Reshape", {core_node->output(0), shape}, {}, base).status();
}

}  // namespace

Status add_canonical_node(NodeDraft node, CanonicalizeContext& ctx) {
  if (!node.domain.empty()) return ctx.add_node(std::move(node)).status();
  for (const AttrToInput& rule : kAttrToInput) {
    if (node.op_type == rule.op && node.opset < rule.input_since) {
      OPFUSE_TRY(move_attr_to_input(node, rule, ctx));
    }
  }
  for (const EmptyMeansOmitted& rule : kEmptyMeansOmitted) {
    if (node.op_type != rule.op) continue;
    for (size_t i = rule.first; i <= rule.last && i < node.inputs.size(); ++i) {
      const Value* in = node.inputs[i];
      if (in && in->constant() && in->constant()->numel() == 0) node.inputs[i] = nullptr;
    }
  }
  if (node.opset <= kCoerced2DUntil && std::find(std::begin(kCoerced2D), std::end(kCoerced2D),
                                                 node.op_type) != std::end(kCoerced2D)) {
    return add_coerced_2d(std::move(node), ctx);
  }
  return ctx.add_node(std::move(node)).status();
}

}  // namespace opfuse::onnx_import
