// Per-channel affine ops after an anchor, folded into its parameters (no post-op needed):
//
//   before                                      after
//     x ─► Conv(W, B) ─► Mul(., s[c]) ─► y        x ─► Conv(W·s[m], B·s[m]) ─► y
//     x ─► Conv(W, B) ─► Add(., t[c]) ─► y        x ─► Conv(W, B + t[m]) ─► y
//     x ─► MatMul(., B) ─► Add(., b[N]) ─► y      x ─► opfuse::FusedMatMul(., B, b) ─► y
//
// Algebra: Conv(x, W, B)·s + t = Conv(x, W·s, B·s + t) per output channel m (Div is · 1/s, Sub
// is + (-t)); MatMul(A, B) + b = FusedMatMul(A, B, b) with b broadcast over the rows.
// The constant must broadcast per output channel without growing the output (Conv: dims of 1
// except the channel axis; MatMul: except the last axis). Only while the anchor has no
// post-ops (scaling after a ReLU is not scaling the weights); scalars after post-ops become a
// `linear` post-op instead (epilogue.cc). Weight folds need constant f32 weights and bias; all
// arithmetic in double, rounded once.
#include <cmath>

#include "ops/fused.h"
#include "ops/op_def.h"
#include "passes/pass_util.h"
#include "patterns/families.h"

namespace opfuse::patterns {
namespace {

bool has_post_ops(const Node& anchor) {
  return anchor.domain() == kFusedDomain && !AttrReader(anchor).get_strings("epilogue").empty();
}

// Whether dims broadcast along `axis` of an output of rank `rank` only (all other dims 1).
bool per_channel_dims(const std::vector<int64_t>& dims, int64_t rank, int64_t axis, int64_t channels) {
  const int64_t r = static_cast<int64_t>(dims.size());
  if (r > rank) return false;
  for (int64_t i = 0; i < r; ++i) {
    const bool ok = i + rank - r == axis ? dims[i] == 1 || dims[i] == channels : dims[i] == 1;
    if (!ok) return false;
  }
  return true;
}

// The constant's values per output channel (length `channels`) when it broadcasts along `axis`
// of an output of rank `rank` only, else nullopt.
std::optional<std::vector<double>> per_channel(const Tensor& c, int64_t rank, int64_t axis, int64_t channels) {
  if (c.dtype() != DType::kF32 || !per_channel_dims(c.dims(), rank, axis, channels)) return std::nullopt;
  const int64_t n = c.numel();
  std::vector<double> out(channels);
  for (int64_t k = 0; k < channels; ++k) out[k] = c.get_double(n == 1 ? 0 : k);
  return out;
}

std::optional<double> uniform(const std::vector<double>& v) {
  for (double x : v) {
    if (x != v.front()) return std::nullopt;
  }
  return v.front();
}

// ---- Conv ------------------------------------------------------------------------------------

std::optional<std::vector<double>> conv_channels(const Match& m) {
  const Tensor* c = constant_operand(m.value("c"));
  const auto y = known_dims(m.value("anchor"));
  if (c == nullptr || !y || y->size() < 3) return std::nullopt;
  return per_channel(*c, static_cast<int64_t>(y->size()), 1, (*y)[1]);
}

Reason check_conv(const Match& m, const PassContext&) {
  const Node& conv = *m.node("anchor");
  if (constant_operand(m.value("c")) == nullptr) return "non-constant scale or shift";
  if (Reason why = same_type(m.root->output(0), m.value("anchor")); !why.empty()) return why;
  if (has_post_ops(conv)) return "anchor already has post-ops";
  const Tensor* w = constant_operand(conv.input(1));
  if (w == nullptr || w->dtype() != DType::kF32) return "non-constant weights";
  if (conv.has_input(2)) {
    const Tensor* b = constant_operand(conv.input(2));
    if (b == nullptr || b->dtype() != DType::kF32) return "non-constant bias";
  }
  const auto channels = conv_channels(m);
  if (!channels) return "constant is not per-channel over the conv's output";
  if (m.root->op_type() == "Div") {
    for (double s : *channels) {
      if (s == 0) return "division by zero";
    }
  }
  return {};
}

Result<Node*> rewrite_conv(Graph& graph, const Match& m) {
  Node& conv = *m.node("anchor");
  const std::vector<double> c = *conv_channels(m);
  const std::string& op = m.root->op_type();
  const int64_t channels = static_cast<int64_t>(c.size());
  std::vector<double> scale(channels, 1.0), shift(channels, 0.0);
  for (int64_t k = 0; k < channels; ++k) {
    if (op == "Mul") scale[k] = c[k];
    if (op == "Div") scale[k] = 1.0 / c[k];
    if (op == "Add") shift[k] = c[k];
    if (op == "Sub") shift[k] = -c[k];
  }
  std::vector<Value*> inputs = conv.inputs();
  inputs.resize(std::max<size_t>(inputs.size(), 3), nullptr);  // room for a bias; keeps an input scale
  if (op == "Mul" || op == "Div") {
    const Tensor& w = *constant_operand(conv.input(1));
    OPFUSE_ASSIGN_OR_RETURN(Tensor w2, Tensor::zeros(DType::kF32, w.dims()));
    // ONNX Conv weights are [M, C/group, k...]: output channel = flat index / per-channel size.
    const int64_t per = w.numel() / channels;
    const float* src = w.data<float>();
    float* dst = w2.data<float>();
    for (int64_t k = 0; k < channels; ++k) {
      for (int64_t i = k * per; i < (k + 1) * per; ++i) dst[i] = static_cast<float>(src[i] * scale[k]);
    }
    inputs[1] = graph.add_constant(conv.input(1)->name() + "_scaled", std::move(w2));
  }
  std::vector<float> bias(channels);
  const Tensor* b = inputs[2] ? constant_operand(inputs[2]) : nullptr;
  for (int64_t k = 0; k < channels; ++k) {
    bias[k] = static_cast<float>((b ? b->get_double(k) : 0.0) * scale[k] + shift[k]);
  }
  inputs[2] = graph.add_constant(conv.name() + "_bias", Tensor::from_vector<float>({channels}, bias));
  return replace_match(graph, m, conv.op_type(), conv.domain(), std::move(inputs), conv.attrs, conv.name());
}

// A constant that is one value is left to the `linear` post-op once the anchor has post-ops.
// A computed per-channel operand matches too, to be refused by the check (users ask why).
bool conv_condition(const Match& m) {
  if (constant_operand(m.value("c")) == nullptr) {
    const auto dims = known_dims(m.value("c"));
    const auto y = known_dims(m.value("anchor"));
    return dims && y && y->size() >= 3 && m.value("c")->dtype == DType::kF32 &&
           per_channel_dims(*dims, static_cast<int64_t>(y->size()), 1, (*y)[1]) &&
           !has_post_ops(*m.node("anchor"));
  }
  const auto c = conv_channels(m);
  return c && (!has_post_ops(*m.node("anchor")) || !uniform(*c));
}

Pattern conv_pattern(std::string_view onnx_op) {
  Pattern p;
  p.name = str_cat("conv_", onnx_op == "Mul" || onnx_op == "Div" ? "scale_" : "shift_", onnx_op);
  p.family = "anchor_affine";
  p.tree = op(onnx_op, {op("Conv|opfuse::FusedConv").as("anchor"), any("c")});
  p.condition = conv_condition;
  p.check = check_conv;
  p.rewrite = rewrite_conv;
  p.benefit = 5;  // before the epilogue's linear and residual patterns on the same Add/Mul
  p.describe = [](const Match& m) {
    return str_cat(node_label(*m.root), " into ", node_label(*m.node("anchor")), " weights");
  };
  return p;
}

// ---- MatMul bias -----------------------------------------------------------------------------

std::optional<std::vector<double>> matmul_bias(const Match& m) {
  const Tensor* c = constant_operand(m.value("c"));
  const auto y = known_dims(m.value("anchor"));
  if (c == nullptr || !y || y->empty()) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(y->size());
  return per_channel(*c, rank, rank - 1, y->back());
}

Pattern matmul_bias_pattern() {
  Pattern p;
  p.name = "matmul_bias";
  p.family = "anchor_affine";
  p.tree = op("Add", {op("MatMul|opfuse::FusedMatMul").as("anchor"), constant("c")});
  p.condition = [](const Match& m) {
    const auto b = matmul_bias(m);
    return b && (!has_post_ops(*m.node("anchor")) || !uniform(*b));
  };
  p.check = [](const Match& m, const PassContext&) -> Reason {
    const Node& anchor = *m.node("anchor");
    if (Reason why = is_f32(m.value("anchor")); !why.empty()) return why;
    if (Reason why = same_type(m.root->output(0), m.value("anchor")); !why.empty()) return why;
    if (has_post_ops(anchor)) return "anchor already has post-ops";
    if (anchor.has_input(2) && constant_operand(anchor.input(2)) == nullptr) return "non-constant bias";
    return {};
  };
  p.rewrite = [](Graph& graph, const Match& m) -> Result<Node*> {
    Node& anchor = *m.node("anchor");
    const std::vector<double> add = *matmul_bias(m);
    const Tensor* old = anchor.has_input(2) ? constant_operand(anchor.input(2)) : nullptr;
    std::vector<float> bias(add.size());
    for (size_t k = 0; k < add.size(); ++k) {
      bias[k] = static_cast<float>(add[k] + (old ? old->get_double(static_cast<int64_t>(k)) : 0.0));
    }
    Value* b = graph.add_constant(anchor.name() + "_bias",
                                  Tensor::from_vector<float>({static_cast<int64_t>(bias.size())}, bias));
    Attributes attrs = anchor.attrs;
    if (!attrs.count("epilogue")) attrs["epilogue"] = std::vector<std::string>{};
    return replace_match(graph, m, "FusedMatMul", std::string(kFusedDomain),
                         {anchor.input(0), anchor.input(1), b}, std::move(attrs), anchor.name());
  };
  p.benefit = 5;
  p.describe = [](const Match& m) {
    return str_cat(node_label(*m.root), " into ", node_label(*m.node("anchor")), " as bias");
  };
  return p;
}

}  // namespace

std::vector<Pattern> anchor_affine_patterns() {
  std::vector<Pattern> out;
  for (std::string_view op : {"Mul", "Div", "Add", "Sub"}) out.push_back(conv_pattern(op));
  out.push_back(matmul_bias_pattern());
  return out;
}

}  // namespace opfuse::patterns
