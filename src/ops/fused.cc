// opfuse::FusedConv (and FusedConvTranspose): Conv (ConvTranspose) followed by an epilogue of elementwise post-ops (ops/fused.h). Its
// reference kernel is Conv's reference kernel followed by the post-ops applied one by one, so it
// is the oracle the fused oneDNN kernel is tested against.
#include "ops/fused.h"

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ops/conv_common.h"
#include "ops/nn_common.h"
#include "ops/op_list.h"

namespace opfuse {
namespace {

float p0(const float* p) { return p[0]; }
float p1(const float* p) { return p[1]; }
float zero(const float*) { return 0.0f; }
float one(const float*) { return 1.0f; }

std::optional<std::vector<float>> no_params(const Node&) { return std::vector<float>{}; }
std::optional<std::vector<float>> pattern_only(const Node&) { return std::nullopt; }
std::optional<std::vector<float>> alpha_param(const Node& node) {
  return std::vector<float>{AttrReader(node).get_float("alpha")};
}
// Clip's bounds are optional inputs; they must be f32 scalars fixed at compile time.
std::optional<std::vector<float>> clip_params(const Node& node) {
  std::vector<float> out = {-FLT_MAX, FLT_MAX};
  for (size_t i = 1; i < 3; ++i) {
    const Value* v = node.input(i);
    if (v == nullptr) continue;
    const Tensor* t = v->constant();
    if (t == nullptr || v->is_graph_input() || t->dtype() != DType::kF32 || t->numel() != 1) {
      return std::nullopt;
    }
    out[i - 1] = t->data<float>()[0];
  }
  return out;
}
std::optional<std::vector<float>> gelu_params(const Node& node) {
  if (AttrReader(node).get_string("approximate") != "none") return std::nullopt;
  return std::vector<float>{};
}
std::optional<std::vector<float>> gelu_tanh_params(const Node& node) {
  if (AttrReader(node).get_string("approximate") != "tanh") return std::nullopt;
  return std::vector<float>{};
}
std::optional<std::vector<float>> hardsigmoid_params(const Node& node) {
  const AttrReader a(node);
  return std::vector<float>{a.get_float("alpha"), a.get_float("beta")};
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// The vocabulary. apply() follows the ONNX definition of the op it absorbs.
const PostOpSpec kPostOps[] = {
    {"relu", "Relu", 0, [](float x, const float*) { return x < 0 ? 0.0f : x; },  // NaN stays NaN
     DnnlPostOp::kEltwiseRelu, zero, zero, no_params},
    {"leaky_relu", "LeakyRelu", 1, [](float x, const float* p) { return x >= 0 ? x : p[0] * x; },
     DnnlPostOp::kEltwiseRelu, p0, zero, alpha_param},
    {"clip", "Clip", 2, [](float x, const float* p) { return std::min(std::max(x, p[0]), p[1]); },
     DnnlPostOp::kEltwiseClip, p0, p1, clip_params},
    {"sigmoid", "Sigmoid", 0, [](float x, const float*) { return sigmoid(x); },
     DnnlPostOp::kEltwiseLogistic, zero, zero, no_params},
    // x * Sigmoid(x): a Sigmoid and a Mul that both read the anchor's output (SiLU / Swish).
    {"sigmoid_mul", "", 0, [](float x, const float*) { return x * sigmoid(x); },
     DnnlPostOp::kEltwiseSwish, one, zero, pattern_only},
    {"hardswish", "HardSwish", 0,
     [](float x, const float*) { return x * std::max(0.0f, std::min(1.0f, x / 6.0f + 0.5f)); },
     DnnlPostOp::kEltwiseHardswish, zero, zero, no_params},
    {"tanh", "Tanh", 0, [](float x, const float*) { return std::tanh(x); },
     DnnlPostOp::kEltwiseTanh, zero, zero, no_params},
    {"elu", "Elu", 1, [](float x, const float* p) { return x < 0 ? p[0] * (std::exp(x) - 1.0f) : x; },
     DnnlPostOp::kEltwiseElu, p0, zero, alpha_param},
    {"gelu_erf", "Gelu", 0,
     [](float x, const float*) { return 0.5f * x * (1.0f + std::erf(x / std::sqrt(2.0f))); },
     DnnlPostOp::kEltwiseGeluErf, zero, zero, gelu_params},
    {"gelu_tanh", "Gelu",
     0, [](float x, const float*) {
       const float k = 0.7978845608028654f;  // sqrt(2 / pi)
       return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
     },
     DnnlPostOp::kEltwiseGeluTanh, zero, zero, gelu_tanh_params},
    {"hardsigmoid", "HardSigmoid", 2,
     [](float x, const float* p) {
       const float y = p[0] * x + p[1];
       return y < 0 ? 0.0f : y > 1 ? 1.0f : y;  // NaN stays NaN
     },
     DnnlPostOp::kEltwiseHardsigmoid, p0, p1, hardsigmoid_params},
    // a * y + b: Mul/Div/Add/Sub by a scalar constant (patterns/epilogue.cc).
    {"linear", "", 2, [](float x, const float* p) { return p[0] * x + p[1]; },
     DnnlPostOp::kEltwiseLinear, p0, p1, pattern_only},
    // y + R: the residual is the FusedConv's input 3 (same shape and dtype as Y).
    {"add", "", 0, nullptr, DnnlPostOp::kBinaryAdd, zero, zero, pattern_only},
};

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
  for (const PostOp& op : epilogue) adds += op.spec->dnnl == DnnlPostOp::kBinaryAdd;
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
  float* data = y.data<float>();
  const int64_t n = y.numel();
  for (const PostOp& op : epilogue) {
    if (op.spec->apply == nullptr) {  // add
      const Tensor* r = ctx.input_or_null(3);
      if (r == nullptr || r->dtype() != DType::kF32 || r->dims() != y.dims()) {
        return ctx.error(str_cat("residual must be f32", dims_to_string(y.dims())));
      }
      const float* rd = r->data<float>();
      for (int64_t i = 0; i < n; ++i) data[i] += rd[i];
      continue;
    }
    const float* p = op.params.data();
    for (int64_t i = 0; i < n; ++i) data[i] = op.spec->apply(data[i], p);
  }
  return Status::ok();
}

std::span<const PostOpSpec> post_op_specs() { return kPostOps; }

const PostOpSpec* find_post_op(std::string_view name) {
  for (const PostOpSpec& s : kPostOps) {
    if (s.name == name) return &s;
  }
  return nullptr;
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
