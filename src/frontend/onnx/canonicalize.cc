#include "frontend/onnx/canonicalize.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string_view>

#include "frontend/onnx/opsets.h"
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

// ---- forms of other opsets ----------------------------------------------------------------
// Each rewrite below turns a node of an opset before 11 or after 17 into the form the op
// records implement (the draft keeps its opset; add_canonical_node then reads it at the
// record's opset). A form with no counterpart is an error naming the node.

Status form_error(const NodeDraft& n, const std::string& what) {
  return Status::user_error(str_cat("node '", n.name, "': ", n.op_type, " at opset ", n.opset, " ", what));
}

// Removes attribute `name` and returns it as T (nullopt when absent); an error for another type.
template <typename T>
Result<std::optional<T>> take(NodeDraft& n, const std::string& name) {
  auto it = n.attrs.find(name);
  if (it == n.attrs.end()) return std::optional<T>();
  const T* v = std::get_if<T>(&it->second);
  if (v == nullptr) return form_error(n, str_cat("has attribute '", name, "' of the wrong type"));
  std::optional<T> out = *v;
  n.attrs.erase(it);
  return out;
}

Value* constant(CanonicalizeContext& ctx, const NodeDraft& n, const std::string& what, Tensor t) {
  return ctx.graph.add_constant(ctx.fresh_name(str_cat(n.name, "_", what)), std::move(t));
}
Value* ints_constant(CanonicalizeContext& ctx, const NodeDraft& n, const std::string& what,
                     const std::vector<int64_t>& v) {
  return constant(ctx, n, what, Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v));
}

// A constant i64 input's values, or nullopt when it is computed at run time.
std::optional<std::vector<int64_t>> constant_ints(const Value* v) {
  const Tensor* t = v ? v->constant() : nullptr;
  if (t == nullptr || v->is_graph_input() || t->dtype() != DType::kI64) return std::nullopt;
  const int64_t* d = t->data<int64_t>();
  return std::vector<int64_t>(d, d + t->numel());
}

// Whether string attribute `name` is set to `value`.
bool has_string(const NodeDraft& n, const std::string& name, std::string_view value) {
  auto it = n.attrs.find(name);
  const std::string* v = it == n.attrs.end() ? nullptr : std::get_if<std::string>(&it->second);
  return v != nullptr && *v == value;
}

void set_input(NodeDraft& n, size_t index, Value* v) {
  n.inputs.resize(std::max(n.inputs.size(), index + 1), nullptr);
  n.inputs[index] = v;
}

// BatchNormalization-6..8: `spatial` (1, the only form later opsets keep), `is_test` and
// `consumed_inputs` go; the training outputs must be unused.
Status batchnorm_spatial(NodeDraft& n, CanonicalizeContext&) {
  OPFUSE_ASSIGN_OR_RETURN(auto spatial, take<int64_t>(n, "spatial"));
  if (spatial.value_or(1) != 1) return form_error(n, "with spatial = 0 is not supported (per-element statistics)");
  n.attrs.erase("is_test");
  n.attrs.erase("consumed_inputs");
  for (size_t i = 1; i < n.outputs.size(); ++i) {
    if (!n.outputs[i].empty()) return form_error(n, "uses its training outputs, which inference does not compute");
  }
  n.outputs.resize(1);
  return Status::ok();
}

// Clip-6: the `min` and `max` attributes (defaults: the lowest and the highest float) become
// inputs 1 and 2.
Status clip_attributes(NodeDraft& n, CanonicalizeContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(auto lo, take<float>(n, "min"));
  OPFUSE_ASSIGN_OR_RETURN(auto hi, take<float>(n, "max"));
  set_input(n, 1, constant(ctx, n, "min", Tensor::scalar<float>(lo.value_or(std::numeric_limits<float>::lowest()))));
  set_input(n, 2, constant(ctx, n, "max", Tensor::scalar<float>(hi.value_or(std::numeric_limits<float>::max()))));
  return Status::ok();
}

// Pad-2: the `pads` and `value` attributes become inputs 1 and 2 (`mode` stays).
Status pad_attributes(NodeDraft& n, CanonicalizeContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(auto pads, take<std::vector<int64_t>>(n, "pads"));
  OPFUSE_ASSIGN_OR_RETURN(auto value, take<float>(n, "value"));
  if (!pads) return form_error(n, "has no 'pads' attribute");
  set_input(n, 1, ints_constant(ctx, n, "pads", *pads));
  set_input(n, 2, constant(ctx, n, "value", Tensor::scalar<float>(value.value_or(0.0f))));
  return Status::ok();
}

// Slice-1: the `starts`, `ends` and `axes` attributes become inputs 1-3.
Status slice_attributes(NodeDraft& n, CanonicalizeContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(auto starts, take<std::vector<int64_t>>(n, "starts"));
  OPFUSE_ASSIGN_OR_RETURN(auto ends, take<std::vector<int64_t>>(n, "ends"));
  OPFUSE_ASSIGN_OR_RETURN(auto axes, take<std::vector<int64_t>>(n, "axes"));
  if (!starts || !ends) return form_error(n, "needs 'starts' and 'ends' attributes");
  set_input(n, 1, ints_constant(ctx, n, "starts", *starts));
  set_input(n, 2, ints_constant(ctx, n, "ends", *ends));
  if (axes) set_input(n, 3, ints_constant(ctx, n, "axes", *axes));
  return Status::ok();
}

// Upsample-7 (`scales` attribute) and -9 (scales input): Resize with the asymmetric transform
// and, for nearest, rounding down (Upsample repeats each element `scale` times).
Status upsample(NodeDraft& n, CanonicalizeContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(auto mode, take<std::string>(n, "mode"));
  std::string m = mode.value_or("nearest");
  if (m == "bilinear") m = "linear";  // Upsample-7's name for it
  if (m != "nearest" && m != "linear") return form_error(n, str_cat("has mode '", m, "'"));
  Value* scales = n.inputs.size() > 1 ? n.inputs[1] : nullptr;
  if (n.opset < 9) {
    OPFUSE_ASSIGN_OR_RETURN(auto s, take<std::vector<float>>(n, "scales"));
    if (!s) return form_error(n, "has no 'scales' attribute");
    scales = constant(ctx, n, "scales", Tensor::from_vector<float>({static_cast<int64_t>(s->size())}, *s));
  }
  if (scales == nullptr) return form_error(n, "has no scales");
  n.op_type = "Resize";
  n.inputs = {n.inputs.empty() ? nullptr : n.inputs[0], nullptr, scales};
  n.attrs["mode"] = m;
  n.attrs["coordinate_transformation_mode"] = std::string("asymmetric");
  n.attrs["nearest_mode"] = std::string("floor");
  return Status::ok();
}

// Resize-10 (X, scales): the asymmetric transform; nearest rounds down when upsampling and up
// when downsampling, as ONNX Runtime reads opset 10, so the scales must be constants that do
// not mix the two.
Status resize10(NodeDraft& n, CanonicalizeContext&) {
  Value* scales = n.inputs.size() > 1 ? n.inputs[1] : nullptr;
  n.inputs = {n.inputs.empty() ? nullptr : n.inputs[0], nullptr, scales};
  n.attrs["coordinate_transformation_mode"] = std::string("asymmetric");
  if (!n.attrs.count("mode") || has_string(n, "mode", "nearest")) {
    const Tensor* t = scales ? scales->constant() : nullptr;
    if (t == nullptr || t->dtype() != DType::kF32) return form_error(n, "in nearest mode needs constant f32 scales");
    const float* s = t->data<float>();
    const bool up = std::all_of(s, s + t->numel(), [](float v) { return v >= 1.0f; });
    const bool down = std::all_of(s, s + t->numel(), [](float v) { return v <= 1.0f; });
    if (!up && !down) return form_error(n, "in nearest mode both upsamples and downsamples, which opfuse does not read");
    n.attrs["nearest_mode"] = std::string(up ? "floor" : "ceil");
  }
  return Status::ok();
}

// Reduce*-18 (all but ReduceSum, whose axes became an input at 13): a constant axes input
// becomes the `axes` attribute; with no axes and noop_with_empty_axes the node is Identity.
Status reduce_axes_input(NodeDraft& n, CanonicalizeContext&) {
  OPFUSE_ASSIGN_OR_RETURN(auto noop, take<int64_t>(n, "noop_with_empty_axes"));
  const Value* axes_in = n.inputs.size() > 1 ? n.inputs[1] : nullptr;
  std::vector<int64_t> axes;
  if (axes_in != nullptr) {
    auto values = constant_ints(axes_in);
    if (!values) return form_error(n, "has axes computed at run time, which opfuse does not read");
    axes = *values;
  }
  n.inputs.resize(1);
  if (axes.empty() && noop.value_or(0) != 0) {
    n.op_type = "Identity";
    n.attrs.clear();
  } else if (!axes.empty()) {
    n.attrs["axes"] = axes;
  }
  return Status::ok();
}

// Split-18: `num_outputs` gives equal parts but a smaller last one; the parts go in the split
// input when they are not all equal (equal parts are what Split-13 makes without one).
Status split_num_outputs(NodeDraft& n, CanonicalizeContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(auto num, take<int64_t>(n, "num_outputs"));
  if (!num) return Status::ok();
  if (n.inputs.size() > 1 && n.inputs[1] != nullptr) return form_error(n, "has both num_outputs and a split input");
  if (*num < 1 || static_cast<size_t>(*num) != n.outputs.size()) {
    return form_error(n, str_cat("has num_outputs = ", *num, " but ", n.outputs.size(), " outputs"));
  }
  Value* x = n.inputs.empty() ? nullptr : n.inputs[0];
  if (x == nullptr) return form_error(n, "has no input");
  OPFUSE_ASSIGN_OR_RETURN(std::optional<int64_t> rank, rank_of(x, ctx));
  int64_t axis = 0;
  if (auto it = n.attrs.find("axis"); it != n.attrs.end() && std::holds_alternative<int64_t>(it->second)) {
    axis = std::get<int64_t>(it->second);
  }
  if (!rank || axis < -*rank || axis >= *rank) return form_error(n, "splits an axis of unknown size");
  const Dim& d = (*x->shape)[static_cast<size_t>(axis < 0 ? axis + *rank : axis)];
  if (!d.is_known()) return form_error(n, "splits an axis of unknown size");
  const int64_t size = d.value(), part = (size + *num - 1) / *num;
  if (size % *num == 0) return Status::ok();
  std::vector<int64_t> parts(static_cast<size_t>(*num), part);
  parts.back() = size - part * (*num - 1);
  if (parts.back() < 0) return form_error(n, str_cat("cannot split ", size, " into ", *num, " parts"));
  set_input(n, 1, ints_constant(ctx, n, "split", parts));
  return Status::ok();
}

// Resize-18/19: antialias, axes and keep_aspect_ratio_policy only at their defaults;
// half_pixel_symmetric (19) is refused.
Status resize_new_attributes(NodeDraft& n, CanonicalizeContext&) {
  OPFUSE_ASSIGN_OR_RETURN(auto antialias, take<int64_t>(n, "antialias"));
  OPFUSE_ASSIGN_OR_RETURN(auto axes, take<std::vector<int64_t>>(n, "axes"));
  OPFUSE_ASSIGN_OR_RETURN(auto policy, take<std::string>(n, "keep_aspect_ratio_policy"));
  if (antialias.value_or(0) != 0) return form_error(n, "with antialias is not supported");
  if (axes) return form_error(n, "with an axes attribute is not supported");
  if (policy.value_or("stretch") != "stretch") return form_error(n, str_cat("with keep_aspect_ratio_policy '", *policy, "' is not supported"));
  if (has_string(n, "coordinate_transformation_mode", "half_pixel_symmetric")) {
    return form_error(n, "with half_pixel_symmetric is not supported");
  }
  return Status::ok();
}

// Pad-18/19: no axes input; the wrap mode (19) is refused.
Status pad_axes(NodeDraft& n, CanonicalizeContext&) {
  if (n.inputs.size() > 3 && n.inputs[3] != nullptr) return form_error(n, "with an axes input is not supported");
  if (has_string(n, "mode", "wrap")) {
    return form_error(n, "with mode 'wrap' is not supported");
  }
  return Status::ok();
}

// AveragePool-19: dilations of 1 only.
Status average_pool_dilations(NodeDraft& n, CanonicalizeContext&) {
  OPFUSE_ASSIGN_OR_RETURN(auto dilations, take<std::vector<int64_t>>(n, "dilations"));
  if (dilations && std::any_of(dilations->begin(), dilations->end(), [](int64_t d) { return d != 1; })) {
    return form_error(n, "with dilations is not supported");
  }
  return Status::ok();
}

// Scatter-9/10 (deprecated at 11) is ScatterElements under its old name: same inputs and axis,
// no reduction (which ScatterElements defaults to none).
Status scatter_renamed(NodeDraft& n, CanonicalizeContext&) {
  n.op_type = "ScatterElements";
  return Status::ok();
}

// Cast-19/21: `saturate` concerns float8 targets only, which opfuse does not have.
Status cast_saturate(NodeDraft& n, CanonicalizeContext&) {
  n.attrs.erase("saturate");
  return Status::ok();
}

struct VersionRewrite {
  std::string_view op;
  int64_t first, last;  // the opsets whose form it converts
  Status (*rewrite)(NodeDraft&, CanonicalizeContext&);
};
// clang-format off
constexpr VersionRewrite kVersionRewrites[] = {
    {"BatchNormalization", 6, 8, batchnorm_spatial},
    {"Clip", 6, 10, clip_attributes},
    {"Pad", 2, 10, pad_attributes},
    {"Resize", 10, 10, resize10},
    {"Scatter", 9, 10, scatter_renamed},
    {"Slice", 1, 9, slice_attributes},
    {"Upsample", 7, 9, upsample},
    {"AveragePool", 19, kMaxImportedOpset, average_pool_dilations},
    {"Cast", 19, kMaxImportedOpset, cast_saturate},
    {"Pad", 18, kMaxImportedOpset, pad_axes},
    {"ReduceL1", 18, kMaxImportedOpset, reduce_axes_input},
    {"ReduceL2", 18, kMaxImportedOpset, reduce_axes_input},
    {"ReduceLogSum", 18, kMaxImportedOpset, reduce_axes_input},
    {"ReduceLogSumExp", 18, kMaxImportedOpset, reduce_axes_input},
    {"ReduceMax", 18, kMaxImportedOpset, reduce_axes_input},
    {"ReduceMean", 18, kMaxImportedOpset, reduce_axes_input},
    {"ReduceMin", 18, kMaxImportedOpset, reduce_axes_input},
    {"ReduceProd", 18, kMaxImportedOpset, reduce_axes_input},
    {"ReduceSumSquare", 18, kMaxImportedOpset, reduce_axes_input},
    {"Resize", 18, kMaxImportedOpset, resize_new_attributes},
    {"Split", 18, kMaxImportedOpset, split_num_outputs},
};
// clang-format on

const VersionRewrite* find_version_rewrite(std::string_view op, int64_t opset) {
  for (const VersionRewrite& r : kVersionRewrites) {
    if (r.op == op && opset >= r.first && opset <= r.last) return &r;
  }
  return nullptr;
}

}  // namespace

bool has_version_rewrite(const std::string& op_type, int64_t opset) {
  return find_version_rewrite(op_type, opset) != nullptr;
}

Status add_canonical_node(NodeDraft node, CanonicalizeContext& ctx) {
  if (!node.domain.empty()) return ctx.add_node(std::move(node)).status();
  if (node.opset < kMinOnnxOpset || node.opset > kMaxOnnxOpset) {
    auto record = record_opset(node.op_type, node.opset);
    if (!record.is_ok()) return Status::user_error(str_cat("node '", node.name, "': ", record.status().message()));
    if (const VersionRewrite* r = find_version_rewrite(node.op_type, node.opset)) OPFUSE_TRY(r->rewrite(node, ctx));
    node.opset = *record;
  }
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
