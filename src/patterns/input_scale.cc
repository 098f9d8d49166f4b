// A per-channel Mul feeding a conv (squeeze-excitation: MobileNetV3, EfficientNet) becomes the
// conv's input scale S: the scale moves from the activation to the weights.
//
//   before                                          after
//     x ──┬──► GlobalAveragePool ─► ... ─► s          x ──┬──► GlobalAveragePool ─► ... ─► s
//         │                                │              │                                │
//         └──────────────► Mul(x, s) ◄─────┘              └──► opfuse::FusedConv(x, W, B, R, S = s)
//                              │
//                         Conv(W, B) ─► y
//
// Algebra: Conv(x · s, W)[o] = Σ_c Σ_k W[o,c,k] · s[c] · x[c,·] = Conv(x, W · s)[o], with s
// applied to W along its input-channel axis; zero padding commutes (0 · s = 0).
// Why: the Mul reads and writes the whole activation and nothing can fuse it, since s is
// computed from a global reduction of x; rescaling the weights each run reads and writes only
// the weights, which the conv then reads hot from cache. So the rule fuses when the conv's
// weights are smaller than x (memory traffic drops), and refuses otherwise (late, narrow layers
// where the weights outgrow the activation). A constant s is folded into the weights once, at
// compile time.
// Conditions: s is a per-channel vector of x's channels (ops/fused.h, kInputScale), the Mul
// keeps x's shape, the conv's weights are constant f32, and it has no input scale yet.
#include "ops/fused.h"
#include "passes/pass_util.h"
#include "patterns/families.h"

namespace opfuse::patterns {
namespace {

int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

bool fits(const Match& m) {
  const Node& conv = *m.root;
  const auto x = known_dims(m.value("x"));
  const auto s = known_dims(m.value("s"));
  if (!x || !s || x->size() < 3 || conv.has_input(kInputScale)) return false;
  return is_channel_vector(*s, x->size(), (*x)[1]) && known_dims(m.node("mul")->output(0)) == x;
}

Reason check_input_scale(const Match& m, const PassContext&) {
  const Node& conv = *m.root;
  const Tensor* w = constant_operand(conv.input(1));
  if (w == nullptr || w->dtype() != DType::kF32) return "weights are not a constant";
  if (Reason why = is_f32(m.value("x")); !why.empty()) return why;
  if (Reason why = is_f32(m.value("s")); !why.empty()) return why;
  if (constant_operand(m.value("s")) == nullptr) {
    const int64_t weights = w->numel(), activation = numel(*known_dims(m.value("x")));
    if (weights >= activation) {
      return str_cat("rescaling the weights (", weights, " floats) per run would move more than the Mul on x (",
                     activation, " floats)");
    }
  }
  return {};
}

// W with each element multiplied by s[its input channel].
Result<Tensor> scaled_weights(const Tensor& w, const Tensor& s, int64_t group) {
  Tensor out = w.clone();
  const int64_t m = w.dim(0), per_group = w.dim(1), taps = w.numel() / (m * per_group);
  const std::vector<float> scale = s.to_float_vector();
  float* data = out.data<float>();
  for (int64_t o = 0; o < m; ++o) {
    for (int64_t j = 0; j < per_group; ++j) {
      const float f = scale[static_cast<size_t>((o / (m / group)) * per_group + j)];
      for (int64_t k = 0; k < taps; ++k) data[(o * per_group + j) * taps + k] *= f;
    }
  }
  return out;
}

Result<Node*> rewrite_input_scale(Graph& graph, const Match& m) {
  const Node& conv = *m.root;
  std::vector<Value*> inputs = conv.inputs();
  inputs[0] = m.value("x");
  if (const Tensor* s = constant_operand(m.value("s"))) {
    const int64_t group = AttrReader(conv).get_int("group");
    OPFUSE_ASSIGN_OR_RETURN(Tensor w, scaled_weights(*constant_operand(conv.input(1)), *s, group));
    inputs[1] = graph.add_constant(conv.input(1)->name() + "_scaled", std::move(w));
    return replace_match(graph, m, conv.op_type(), conv.domain(), std::move(inputs), conv.attrs, conv.name());
  }
  inputs.resize(kInputScale + 1, nullptr);
  inputs[kInputScale] = m.value("s");
  return replace_match(graph, m, "FusedConv", std::string(kFusedDomain), std::move(inputs), conv.attrs,
                       conv.name());
}

}  // namespace

std::vector<Pattern> input_scale_patterns() {
  Pattern p;
  p.name = "conv_input_scale";
  p.family = "input_scale";
  p.tree = op_head("Conv|opfuse::FusedConv", {op("Mul", {any("x"), any("s")}).as("mul")});
  p.condition = fits;
  p.check = check_input_scale;
  p.rewrite = rewrite_input_scale;
  p.describe = [](const Match& m) {
    return str_cat(node_label(*m.node("mul")), " into ", node_label(*m.root), " as its input scale");
  };
  return {p};
}

}  // namespace opfuse::patterns
