// opfuse::FusedConv (and FusedConvTranspose): Conv (ConvTranspose) followed by an epilogue of elementwise post-ops (ops/fused.h). Its
// reference kernel is Conv's reference kernel followed by the post-ops applied one by one, so it
// is the oracle the fused oneDNN kernel is tested against.
#include "ops/fused.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "ops/conv_common.h"
#include "ops/nn_common.h"
#include "ops/op_list.h"
#include "ops/reference.h"
#include "ops/registry.h"

namespace opfuse {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The pattern post-ops' expressions.
ScalarExpr sigmoid_mul_expr(const float*) {
  ScalarBuilder b;
  Sx y = b.arg(0);
  return b.finish(y * sigmoid(y));
}
ScalarExpr linear_expr(const float* p) {
  ScalarBuilder b;
  return b.finish(b.arg(0) * static_cast<double>(p[0]) + static_cast<double>(p[1]));
}
ScalarExpr add_expr(const float*) {
  ScalarBuilder b;
  return b.finish(b.arg(0) + b.arg(1));
}

PostOpSpec op_post_op(std::string name, std::string onnx_op, std::vector<std::string> param_attrs = {}) {
  PostOpSpec s;
  s.name = std::move(name);
  s.onnx_op = std::move(onnx_op);
  s.num_params = static_cast<int>(param_attrs.size());
  s.param_attrs = std::move(param_attrs);
  return s;
}

PostOpSpec pattern_post_op(std::string name, int num_params, ScalarExpr (*expr)(const float*)) {
  PostOpSpec s;
  s.name = std::move(name);
  s.num_params = num_params;
  s.pattern_expr = expr;
  return s;
}

// "ThresholdedRelu" -> "thresholded_relu".
std::string snake_case(std::string_view name) {
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (std::isupper(static_cast<unsigned char>(c))) {
      if (i > 0) out += '_';
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out;
}

std::vector<PostOpSpec> make_post_op_specs() {
  std::vector<PostOpSpec> specs = {
      op_post_op("relu", "Relu"),
      op_post_op("leaky_relu", "LeakyRelu", {"alpha"}),
      op_post_op("sigmoid", "Sigmoid"),
      op_post_op("hardswish", "HardSwish"),
      op_post_op("tanh", "Tanh"),
      op_post_op("elu", "Elu", {"alpha"}),
      op_post_op("hardsigmoid", "HardSigmoid", {"alpha", "beta"}),
      // x * Sigmoid(x): a Sigmoid and a Mul that both read the anchor's output (SiLU / Swish).
      pattern_post_op("sigmoid_mul", 0, sigmoid_mul_expr),
      // a * y + b: Mul/Div/Add/Sub by a scalar constant (patterns/epilogue.cc).
      pattern_post_op("linear", 2, linear_expr),
      // y + R: the residual is the anchor's input 3 (same shape and dtype as Y).
      pattern_post_op("add", 0, add_expr),
  };
  specs.back().reads_residual = true;
  // Clip's bounds are its optional inputs 1 and 2; an omitted one clips nothing.
  PostOpSpec clip = op_post_op("clip", "Clip");
  clip.param_inputs = {-kInf, kInf};
  clip.num_params = 2;
  specs.push_back(std::move(clip));
  for (const char* approximate : {"none", "tanh"}) {
    PostOpSpec gelu = op_post_op(approximate == std::string_view("none") ? "gelu_erf" : "gelu_tanh", "Gelu");
    gelu.required_attr = "approximate";
    gelu.required_value = approximate;
    specs.push_back(std::move(gelu));
  }
  // Every other single-input activation with float attributes, under its own name.
  for (const OpDef* def : OpRegistry::global().all()) {
    if (!def->traits.activation || !def->domain.empty() || def->max_inputs != 1) continue;
    if (std::any_of(specs.begin(), specs.end(), [&](const PostOpSpec& s) { return s.onnx_op == def->name; })) continue;
    std::vector<std::string> attrs;
    bool floats_only = true;
    for (const AttrSpec& a : def->attrs) {
      floats_only &= a.type == AttrType::kFloat;
      attrs.push_back(a.name);
    }
    if (floats_only) specs.push_back(op_post_op(snake_case(def->name), def->name, std::move(attrs)));
  }
  return specs;
}

const std::vector<PostOpSpec>& specs() {
  static const std::vector<PostOpSpec> table = make_post_op_specs();
  return table;
}

// The op's scalar expression for a node of `spec.onnx_op` bound to `params`: a one-node graph
// with the params as its attributes and constant inputs, whose input arguments are then
// replaced by the constants.
Result<ScalarExpr> derived_expr(const PostOpSpec& spec, const std::vector<float>& params) {
  Graph g;
  std::vector<Value*> inputs = {g.add_input("y", DType::kF32, Shape{})};
  Attributes attrs;
  size_t p = 0;
  for (const std::string& a : spec.param_attrs) attrs[a] = AttrValue(params[p++]);
  for (size_t i = 0; i < spec.param_inputs.size(); ++i) {
    inputs.push_back(g.add_constant(str_cat("p", i), Tensor::scalar(params[p++])));
  }
  if (!spec.required_attr.empty()) attrs[spec.required_attr] = AttrValue(spec.required_value);
  OPFUSE_ASSIGN_OR_RETURN(Node * node, g.add_node(spec.onnx_op, std::move(inputs), {"out"}, std::move(attrs)));
  if (node->def().scalar == nullptr) {
    return Status::internal_error(str_cat("post-op ", spec.name, ": ", spec.onnx_op, " has no scalar expression"));
  }
  ScalarExpr e = node->def().scalar(ScalarExprContext{AttrReader(*node), *node});
  for (ScalarInstr& in : e.code) {
    if (in.op != ScalarOp::kArg || in.a == 0) continue;
    in.value = params[spec.param_attrs.size() + in.a - 1];
    in.op = ScalarOp::kConst;
    in.a = -1;
  }
  return e;
}

const OpDef& conv_def() {
  static const OpDef def = [] {
    for (OpDef& d : conv_ops()) {
      if (d.name == "Conv") return d;
    }
    return OpDef{};
  }();
  return def;
}

Status infer_fused_conv(InferContext& ctx) {
  OPFUSE_TRY(conv_def().infer(ctx));
  const auto& x = ctx.input_shape(0);
  if (ctx.has_input(kInputScale)) {
    if (!x || x->size() < 3 || !(*x)[1].is_known()) {
      return ctx.error("an input scale S needs X's channel count to be known");
    }
    OPFUSE_TRY(infer_input_scale(ctx, x->size(), (*x)[1].value(), 0));
  }
  return infer_epilogue(ctx);
}

Status fused_conv_kernel(KernelContext& ctx) {
  if (!ctx.has_input(kInputScale)) {
    OPFUSE_TRY(conv_def().reference(ctx));
    return apply_epilogue(ctx);
  }
  // Conv(X * S, ...): the same node on the scaled X, then its output moved into ours.
  OPFUSE_ASSIGN_OR_RETURN(Tensor xs, scale_input_channels(ctx.input(0), ctx.input(kInputScale)));
  KernelContext scaled(ctx.node(), {&xs, &ctx.input(1), ctx.input_or_null(2), ctx.input_or_null(3)});
  OPFUSE_TRY(conv_def().reference(scaled));
  OPFUSE_TRY(apply_epilogue(scaled));
  const Tensor& y = scaled.outputs()[0];
  OPFUSE_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, y.dtype(), y.dims()));
  std::memcpy(out->raw_data(), y.raw_data(), y.nbytes());
  return Status::ok();
}

const OpDef& conv_transpose() {
  static const OpDef def = conv_transpose_def();
  return def;
}

Status infer_fused_conv_transpose(InferContext& ctx) {
  OPFUSE_TRY(conv_transpose().infer(ctx));
  return infer_epilogue(ctx);
}

Status fused_conv_transpose_kernel(KernelContext& ctx) {
  OPFUSE_TRY(conv_transpose().reference(ctx));
  return apply_epilogue(ctx);
}

}  // namespace

bool is_channel_vector(const std::vector<int64_t>& s, size_t rank, int64_t channels) {
  if (s.empty() || s.size() > rank) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const size_t axis = rank - s.size() + i;  // right-aligned against X
    if (s[i] != (axis == 1 ? channels : 1)) return false;
  }
  return rank - s.size() <= 1;  // the channel axis is S's own
}

Status infer_input_scale(InferContext& ctx, size_t x_rank, int64_t channels, int64_t blocked_lanes) {
  if (ctx.input_dtype(kInputScale) != DType::kF32) return ctx.error("the input scale S must be f32");
  const auto& shape = ctx.input_shape(kInputScale);
  if (!shape) return Status::ok();
  const auto s = static_dims(*shape);
  if (!s) return ctx.error("the input scale S needs a static shape");
  const bool blocked = blocked_lanes > 0 && *s == std::vector<int64_t>{1, (channels + blocked_lanes - 1) / blocked_lanes, 1, 1, blocked_lanes};
  if (!blocked && !is_channel_vector(*s, x_rank, channels)) {
    return ctx.error(str_cat("the input scale S ", shape_to_string(*shape), " is not a per-channel vector of ",
                             channels, " channels"));
  }
  return Status::ok();
}

Result<Tensor> scale_input_channels(const Tensor& x, const Tensor& s) {
  if (x.dtype() != DType::kF32 || s.dtype() != DType::kF32 || x.rank() < 2 || s.numel() < x.dim(1)) {
    return Status::user_error(str_cat("input scale: cannot scale ", x.type_string(), " by ", s.type_string()));
  }
  Tensor out = x.clone();
  const int64_t n = x.dim(0), c = x.dim(1), inner = n * c == 0 ? 0 : x.numel() / (n * c);
  float* data = out.data<float>();
  const float* scale = s.data<float>();
  for (int64_t i = 0; i < n * c; ++i) {
    for (int64_t k = 0; k < inner; ++k) data[i * inner + k] *= scale[i % c];
  }
  return out;
}

Status infer_epilogue(InferContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(auto epilogue, read_epilogue(ctx.node()));
  int adds = 0;
  for (const PostOp& op : epilogue) adds += op.spec->reads_residual;
  if (adds != (ctx.has_input(3) ? 1 : 0)) {
    return ctx.error("the epilogue must name 'add' exactly once when the residual input 3 is given, "
                     "and not otherwise");
  }
  if (ctx.has_input(3)) {
    const ValueType& y = ctx.outputs()[0];
    if (ctx.input_dtype(3) != y.dtype) return ctx.error("residual dtype differs from the output's");
    if (y.shape && ctx.input_shape(3) && !(*y.shape == *ctx.input_shape(3))) {
      return ctx.error("residual shape differs from the output's");
    }
  }
  return Status::ok();
}

Status apply_epilogue(KernelContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(auto epilogue, read_epilogue(ctx.node()));
  Tensor& y = ctx.outputs()[0];
  if (epilogue.empty()) return Status::ok();
  if (y.dtype() != DType::kF32) return ctx.error("epilogues are implemented for f32 only");
  OPFUSE_ASSIGN_OR_RETURN(ScalarExpr expr, epilogue_expr(epilogue));
  const Tensor* r = ctx.input_or_null(3);
  if (r != nullptr && (r->dtype() != DType::kF32 || r->dims() != y.dims())) {
    return ctx.error(str_cat("residual must be f32", dims_to_string(y.dims())));
  }
  return evaluate_f32_scalar_expr(expr, {&y, r}, y);
}

Result<ScalarExpr> post_op_expr(const PostOp& op) {
  if (static_cast<int>(op.params.size()) != op.spec->num_params) {
    return Status::internal_error(str_cat("post-op ", op.spec->name, ": ", op.params.size(), " params"));
  }
  if (op.spec->pattern_expr != nullptr) return op.spec->pattern_expr(op.params.data());
  return derived_expr(*op.spec, op.params);
}

Result<ScalarExpr> epilogue_expr(std::span<const PostOp> epilogue) {
  ScalarBuilder b;
  Sx y = b.arg(0);
  std::optional<Sx> residual;
  for (const PostOp& op : epilogue) {
    OPFUSE_ASSIGN_OR_RETURN(ScalarExpr e, post_op_expr(op));
    // Each instruction of e appended, with y for argument 0 and the residual for argument 1.
    std::vector<Sx> ids;
    for (const ScalarInstr& in : e.code) {
      auto operand = [&](int32_t k) { return ids[static_cast<size_t>(k)]; };
      if (in.op == ScalarOp::kArg) {
        if (in.a != 0 && !residual) residual = b.arg(1);
        ids.push_back(in.a == 0 ? y : *residual);
      } else if (in.op == ScalarOp::kConst) {
        ids.push_back(b.constant(in.value));
      } else if (in.op == ScalarOp::kSelect) {
        ids.push_back(b.select(operand(in.a), operand(in.b), operand(in.c)));
      } else if (scalar_op_arity(in.op) == 1) {
        ids.push_back(b.unary(in.op, operand(in.a)));
      } else {
        ids.push_back(b.binary(in.op, operand(in.a), operand(in.b)));
      }
    }
    y = ids.back();
  }
  return b.finish(y);
}

std::span<const PostOpSpec> post_op_specs() { return specs(); }

const PostOpSpec* find_post_op(std::string_view name) {
  for (const PostOpSpec& s : specs()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::optional<std::vector<float>> post_op_params(const PostOpSpec& spec, const Node& node) {
  if (spec.onnx_op.empty() || node.op_type() != spec.onnx_op || !node.domain().empty()) return std::nullopt;
  const AttrReader attrs(node);
  if (!spec.required_attr.empty() && attrs.get_string(spec.required_attr) != spec.required_value) {
    return std::nullopt;
  }
  std::vector<float> out;
  for (const std::string& a : spec.param_attrs) out.push_back(attrs.get_float(a));
  // Constant inputs must be f32 scalars fixed at compile time.
  for (size_t i = 0; i < spec.param_inputs.size(); ++i) {
    const Value* v = node.input(i + 1);
    if (v == nullptr) {
      out.push_back(spec.param_inputs[i]);
      continue;
    }
    const Tensor* t = v->constant();
    if (t == nullptr || v->is_graph_input() || t->dtype() != DType::kF32 || t->numel() != 1) return std::nullopt;
    out.push_back(t->data<float>()[0]);
  }
  return out;
}

std::optional<PostOp> parse_post_op(std::string_view text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t colon = text.find(':', start);
    parts.emplace_back(text.substr(start, colon == std::string_view::npos ? colon : colon - start));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  PostOp op;
  op.spec = find_post_op(parts[0]);
  if (op.spec == nullptr || static_cast<int>(parts.size()) - 1 != op.spec->num_params) {
    return std::nullopt;
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    char* end = nullptr;
    const float v = std::strtof(parts[i].c_str(), &end);
    if (parts[i].empty() || end != parts[i].c_str() + parts[i].size()) return std::nullopt;
    op.params.push_back(v);
  }
  return op;
}

std::string format_post_op(std::string_view name, const std::vector<float>& params) {
  std::string out(name);
  for (float p : params) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), ":%.9g", static_cast<double>(p));
    out += buf;
  }
  return out;
}

Result<std::vector<PostOp>> read_epilogue(const Node& node) {
  std::vector<PostOp> out;
  for (const std::string& text : AttrReader(node).get_strings("epilogue")) {
    auto op = parse_post_op(text);
    if (!op) {
      return Status::user_error(str_cat(node.describe(), ": unknown or malformed post-op '", text,
                                        "' in epilogue"));
    }
    out.push_back(std::move(*op));
  }
  return out;
}

std::vector<OpDef> fused_ops() {
  std::vector<OpDef> ops;
  OpDef d;
  d.name = "FusedConv";
  d.domain = std::string(kFusedDomain);
  d.min_opset = 1;
  d.max_opset = 1;
  d.min_inputs = 2;
  d.max_inputs = 5;
  d.attrs = conv_attr_specs();
  d.attrs.push_back({"epilogue", AttrType::kStrings, AttrValue(std::vector<std::string>{}), false});
  d.kind = FusionKind::kAnchor;
  d.infer = infer_fused_conv;
  d.reference = fused_conv_kernel;
  d.flops = conv_def().flops;
  d.summary = "Conv(X * S, W, [B]) then an epilogue of post-ops (relu, clip, add of residual R ...); S: an optional per-input-channel scale";
  ops.push_back(d);
  d.name = "FusedConvTranspose";
  d.max_inputs = 4;
  d.attrs = conv_transpose().attrs;
  d.attrs.push_back({"epilogue", AttrType::kStrings, AttrValue(std::vector<std::string>{}), false});
  d.infer = infer_fused_conv_transpose;
  d.reference = fused_conv_transpose_kernel;
  d.flops = conv_transpose().flops;
  d.summary = "ConvTranspose(X, W, [B]) then an epilogue of post-ops (as FusedConv)";
  ops.push_back(std::move(d));
  return ops;
}

}  // namespace opfuse
