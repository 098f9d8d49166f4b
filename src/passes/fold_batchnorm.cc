// Folds an inference BatchNormalization into the op before it. BN is y = x * a + b per channel
// with a = scale / sqrt(var + eps), b = B - mean * a, so for a linear anchor
//   BN(Conv(x, W, c)) -> Conv(x, W * a[out_channel], c * a + b)
// and likewise ConvTranspose (W is [C_in, C_out/group, ...]: output channel g*C_out/group + j),
// Gemm (B's rows when transB, else its columns; C becomes beta*C*a + b with beta = 1) and
// MatMul with a constant 2-D B (B's columns, then Add(., b)). All math in double.
// A Conv's or ConvTranspose's bias written as an Add of a per-channel constant between it and
// the BN folds along: BN(Conv(x, W, c) + d) -> Conv(x, W * a, (c + d) * a + b).
// Only exact folds: the anchor's output feeds only the BN (or the bias Add, which feeds only the
// BN) and is not a graph output, the BN and anchor parameters are f32 constants. Every fold and
// every refusal is recorded.
// A BN with constant parameters that no anchor can take (DenseNet's BN on a Concat of earlier
// layers, a BN after a shared conv) becomes Mul(x, a) -> Add(., b) with [C, 1, ...] constants:
// the reference BN kernel is replaced by ordinary broadcast ops, which region fusion merges with
// the activation after them and the layout pass keeps blocked between convs.
#include <cmath>

#include "ops/op_def.h"
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace opfuse {
namespace {

constexpr std::string_view kPass = "fold_batchnorm";

struct Affine {
  std::vector<double> a, b;  // y = x * a[c] + b[c]
};

// Why a fold cannot happen; empty when it can.
using Reason = std::string;

bool is_f32_constant(const Value* v) {
  const Tensor* t = constant_data(v);
  return t && t->dtype() == DType::kF32;
}

Reason bn_affine(const Node& bn, Affine& out) {
  for (size_t i = 1; i < 5; ++i) {
    if (constant_data(bn.input(i)) == nullptr) return "non-constant BN parameters";
  }
  const int64_t c = constant_data(bn.input(1))->numel();
  for (size_t i = 1; i < 5; ++i) {
    const Tensor* t = constant_data(bn.input(i));
    if (t->dtype() != DType::kF32 || t->rank() != 1 || t->numel() != c) {
      return "BN parameters are not f32 vectors of one length";
    }
  }
  const double eps = AttrReader(bn).get_float("epsilon");
  const float* scale = constant_data(bn.input(1))->data<float>();
  const float* shift = constant_data(bn.input(2))->data<float>();
  const float* mean = constant_data(bn.input(3))->data<float>();
  const float* var = constant_data(bn.input(4))->data<float>();
  out.a.resize(c);
  out.b.resize(c);
  for (int64_t i = 0; i < c; ++i) {
    out.a[i] = static_cast<double>(scale[i]) / std::sqrt(static_cast<double>(var[i]) + eps);
    out.b[i] = static_cast<double>(shift[i]) - static_cast<double>(mean[i]) * out.a[i];
  }
  return {};
}

Tensor f32_vector(const std::vector<double>& v) {
  std::vector<float> f(v.begin(), v.end());
  return Tensor::from_vector<float>({static_cast<int64_t>(f.size())}, f);
}

// W * a along `channel_of(flat index)`, rounded once to f32.
template <typename ChannelFn>
Tensor scale_weights(const Tensor& w, const Affine& bn, ChannelFn channel_of) {
  Tensor out = Tensor::zeros(DType::kF32, w.dims()).value();
  const float* src = w.data<float>();
  float* dst = out.data<float>();
  for (int64_t i = 0; i < w.numel(); ++i) {
    dst[i] = static_cast<float>(static_cast<double>(src[i]) * bn.a[channel_of(i)]);
  }
  return out;
}

// The new per-channel bias (c + d) * a + b (c absent: 0; d: a bias Add's constant, or empty).
Tensor folded_bias(const Value* bias, const std::vector<double>& d, const Affine& bn, Reason& why) {
  std::vector<double> out = bn.b;
  for (size_t i = 0; i < d.size(); ++i) out[i] += d[i] * bn.a[i];
  if (bias != nullptr) {
    const Tensor* c = constant_data(bias);
    if (c == nullptr || c->dtype() != DType::kF32) {
      why = "non-constant anchor bias";
      return {};
    }
    if (c->rank() != 1 || c->numel() != static_cast<int64_t>(bn.a.size())) {
      why = "anchor bias is not one value per channel";
      return {};
    }
    for (size_t i = 0; i < out.size(); ++i) out[i] += static_cast<double>(c->data<float>()[i]) * bn.a[i];
  }
  return f32_vector(out);
}

struct Plan {
  Tensor weight;       // replaces the anchor's input 1
  Tensor bias;         // the anchor's new bias input, or (MatMul) the Add's constant
  int bias_input = 2;  // where the bias goes on the anchor; -1: a new Add after it
};

// The per-channel constant of `add` when it adds one to a Conv's or ConvTranspose's output
// (Paddle's and TensorFlow's exports write a conv's bias so: ConvTranspose -> Add(., b[C,1,1]) ->
// BN -> Relu in PP-OCR's detector head), else nullopt; `conv` gets the conv.
std::optional<std::vector<double>> conv_bias_add(const Node& add, Node*& conv) {
  if (!add.domain().empty() || add.op_type() != "Add" || add.inputs().size() != 2) return std::nullopt;
  for (size_t i = 0; i < 2; ++i) {
    Node* p = add.input(i)->producer();
    const Tensor* c = constant_data(add.input(1 - i));
    if (p == nullptr || !p->domain().empty() || (p->op_type() != "Conv" && p->op_type() != "ConvTranspose") ||
        c == nullptr || c->dtype() != DType::kF32) {
      continue;
    }
    const auto y = known_dims(add.input(i));
    if (!y || y->size() < 3 || known_dims(add.output(0)) != y) continue;
    // Every dim of c is 1 but the channel axis (1), right-aligned against Y.
    const int64_t lead = static_cast<int64_t>(y->size()) - c->rank();
    bool per_channel = lead >= 0;
    for (int64_t k = 0; per_channel && k < c->rank(); ++k) {
      per_channel = c->dim(k) == 1 || (k + lead == 1 && c->dim(k) == (*y)[1]);
    }
    if (!per_channel) continue;
    std::vector<double> d((*y)[1]);
    for (size_t k = 0; k < d.size(); ++k) d[k] = c->get_double(c->numel() == 1 ? 0 : static_cast<int64_t>(k));
    conv = p;
    return d;
  }
  return std::nullopt;
}

Reason plan_conv(const Node& conv, const std::vector<double>& shift, const Affine& bn, bool transposed, Plan& plan) {
  if (!is_f32_constant(conv.input(1))) return "non-constant weights";
  const Tensor& w = *constant_data(conv.input(1));
  const int64_t channels = static_cast<int64_t>(bn.a.size());
  if (w.rank() < 3 || w.numel() == 0) return "weights are not a non-empty [M, C, k...] tensor";
  const int64_t inner = w.numel() / (w.dim(0) * w.dim(1));
  if (!transposed) {
    if (w.dim(0) != channels) return "weights' output channels differ from the BN's";
    plan.weight = scale_weights(w, bn, [&](int64_t i) { return i / (w.dim(1) * inner); });
  } else {
    const int64_t group = AttrReader(conv).get_int("group");
    const int64_t per_group = w.dim(1);  // output channels per group
    if (group <= 0 || w.dim(0) % group != 0 || group * per_group != channels) {
      return "weights' output channels differ from the BN's";
    }
    const int64_t in_per_group = w.dim(0) / group;
    plan.weight = scale_weights(w, bn, [&](int64_t i) {
      const int64_t in_channel = i / (per_group * inner), j = (i / inner) % per_group;
      return (in_channel / in_per_group) * per_group + j;
    });
  }
  Reason why;
  plan.bias = folded_bias(conv.input(2), shift, bn, why);
  return why;
}

Reason plan_gemm(Node& gemm, const Affine& bn, Plan& plan) {
  if (!is_f32_constant(gemm.input(1))) return "non-constant weights";
  const Tensor& w = *constant_data(gemm.input(1));
  const int64_t n = static_cast<int64_t>(bn.a.size());
  const bool trans_b = AttrReader(gemm).get_int("transB") != 0;
  if (w.rank() != 2 || w.numel() == 0 || w.dim(trans_b ? 0 : 1) != n) return "weights' output columns differ from the BN's";
  const int64_t cols = w.dim(1);
  plan.weight = scale_weights(w, bn, [&](int64_t i) { return trans_b ? i / cols : i % cols; });
  std::vector<double> bias = bn.b;
  if (const Value* c = gemm.input(2)) {
    const Tensor* t = constant_data(c);
    if (t == nullptr || t->dtype() != DType::kF32) return "non-constant anchor bias";
    const bool per_column = t->numel() == n && (t->rank() == 1 || (t->rank() == 2 && t->dim(0) == 1));
    if (t->numel() != 1 && !per_column) return "Gemm bias C is not one value per column";
    const double beta = AttrReader(gemm).get_float("beta");
    for (int64_t j = 0; j < n; ++j) {
      bias[j] += beta * static_cast<double>(t->data<float>()[t->numel() == 1 ? 0 : j]) * bn.a[j];
    }
  }
  plan.bias = f32_vector(bias);
  return {};
}

Reason plan_matmul(const Node& matmul, const Affine& bn, Plan& plan) {
  if (!is_f32_constant(matmul.input(1))) return "non-constant weights";
  const Tensor& w = *constant_data(matmul.input(1));
  const int64_t n = static_cast<int64_t>(bn.a.size());
  if (w.rank() != 2 || w.dim(1) != n) return "MatMul B is not a 2-D [K, channels] matrix";
  // BN's channel axis is 1; it is B's column axis only for a 2-D product.
  const Value* out = matmul.output(0);
  if (!out->shape || out->shape->size() != 2) return "MatMul output is not 2-D";
  plan.weight = scale_weights(w, bn, [&](int64_t i) { return i % n; });
  plan.bias = f32_vector(bn.b);
  plan.bias_input = -1;
  return {};
}

// `bias_add`: the Add of a per-channel constant `shift` between a conv and the BN, or null.
Reason plan_fold(Node& anchor, const Node* bias_add, const std::vector<double>& shift, const Node& bn, Plan& plan) {
  if (bn.input(0)->dtype != DType::kF32) return "dtype is not f32";
  Affine affine;
  if (Reason why = bn_affine(bn, affine); !why.empty()) return why;
  for (const Node* n : {static_cast<const Node*>(&anchor), bias_add}) {
    if (n == nullptr) continue;
    const Value* mid = n->output(0);
    if (mid->is_graph_output()) return "graph output";
    if (mid->uses().size() != 1) return "shared intermediate";
  }
  if (bn.output(0)->is_graph_output()) return "BN output is a graph output (its name must stay)";
  if (!shift.empty() && shift.size() != affine.a.size()) return "the bias Add's channels differ from the BN's";
  const std::string& op = anchor.op_type();
  if (op == "Conv") return plan_conv(anchor, shift, affine, false, plan);
  if (op == "ConvTranspose") return plan_conv(anchor, shift, affine, true, plan);
  if (op == "Gemm") return plan_gemm(anchor, affine, plan);
  return plan_matmul(anchor, affine, plan);
}

Status apply(Graph& graph, Node& anchor, Node& bn, Plan plan) {
  Value* weight = anchor.input(1);
  graph.set_input(&anchor, 1, graph.add_constant(weight->name() + "_folded", std::move(plan.weight)));
  Value* result = anchor.output(0);
  if (plan.bias_input >= 0) {
    const Value* old = anchor.input(plan.bias_input);
    const std::string name = old ? old->name() + "_folded" : anchor.name() + "_bias";
    graph.set_input(&anchor, plan.bias_input, graph.add_constant(name, std::move(plan.bias)));
    if (anchor.op_type() == "Gemm") anchor.attrs["beta"] = 1.0f;
  } else {
    Value* bias = graph.add_constant(anchor.name() + "_bias", std::move(plan.bias));
    OPFUSE_ASSIGN_OR_RETURN(Node * add, graph.add_node("Add", {result, bias}, {""}, {}, bn.name() + "_bias"));
    add->output(0)->dtype = bn.output(0)->dtype;
    add->output(0)->shape = bn.output(0)->shape;
    result = add->output(0);
  }
  graph.replace_all_uses(bn.output(0), result);
  OPFUSE_TRY(graph.remove_node(&bn));
  return Status::ok();
}

// Rewrites `bn` as Mul(x, a) -> Add(., b), a and b shaped [C, 1, ...] to broadcast along axis 1
// of x. The Add's output keeps the BN output's name (it may be a graph output). Returns the Add.
Result<Node*> lower_to_affine(Graph& graph, Node& bn, const Affine& affine) {
  Value* x = bn.input(0);
  std::vector<int64_t> dims(x->shape->size() - 1, 1);
  dims[0] = static_cast<int64_t>(affine.a.size());
  auto constant = [&](const std::vector<double>& v, const char* suffix) {
    std::vector<float> f(v.begin(), v.end());
    return graph.add_constant(bn.name() + suffix, Tensor::from_vector<float>(dims, f));
  };
  Value* a = constant(affine.a, "_scale");
  Value* b = constant(affine.b, "_shift");
  OPFUSE_ASSIGN_OR_RETURN(Node * mul, graph.add_node("Mul", {x, a}, {""}, {}, bn.name() + "_mul"));
  OPFUSE_ASSIGN_OR_RETURN(Node * add, graph.add_node("Add", {mul->output(0), b}, {""}, {}, bn.name() + "_add"));
  for (Node* node : {mul, add}) {
    node->output(0)->dtype = bn.output(0)->dtype;
    node->output(0)->shape = bn.output(0)->shape;
  }
  const std::string name = bn.output(0)->name();
  OPFUSE_TRY(graph.rename_value(bn.output(0), graph.unique_value_name(name + "_bn")));
  graph.replace_all_uses(bn.output(0), add->output(0));
  OPFUSE_TRY(graph.remove_node(&bn));
  OPFUSE_TRY(graph.rename_value(add->output(0), name));
  return add;
}

// Why `bn` cannot become a per-channel Mul+Add (empty when it can); fills `affine`.
Reason plan_affine(const Node& bn, Affine& affine) {
  const Value* x = bn.input(0);
  if (x->dtype != DType::kF32) return "dtype is not f32";
  if (!x->shape || x->shape->size() < 2) return "input rank is unknown or below 2";
  if (Reason why = bn_affine(bn, affine); !why.empty()) return why;
  const Dim& channels = (*x->shape)[1];
  if (!channels.is_known() || channels.value() != static_cast<int64_t>(affine.a.size())) {
    return "input channels differ from the BN parameters'";
  }
  return {};
}

bool is_anchor(const Node* node) {
  if (node == nullptr || !node->domain().empty()) return false;
  const std::string& op = node->op_type();
  return op == "Conv" || op == "ConvTranspose" || op == "Gemm" || op == "MatMul";
}

}  // namespace

Result<bool> run_fold_batchnorm_pass(Graph& graph, PassContext& context) {
  bool changed = false;
  if (!context.fusion.rule_enabled(kPass)) return false;
  std::vector<Node*> bns;
  for (Node* node : graph.nodes()) {
    if (node->domain().empty() && node->op_type() == "BatchNormalization") bns.push_back(node);
  }
  const std::string pass(kPass);
  for (Node* bn : bns) {
    Node* anchor = bn->input(0) ? bn->input(0)->producer() : nullptr;
    // A conv's bias written as an Add between it and the BN folds along (the Add goes dead).
    Node* bias_add = nullptr;
    std::vector<double> shift;
    if (Node* conv = nullptr; anchor != nullptr) {
      if (auto d = conv_bias_add(*anchor, conv)) {
        bias_add = anchor;
        anchor = conv;
        shift = std::move(*d);
      }
    }
    std::string what = anchor ? str_cat(node_label(*bn), " into ", node_label(*anchor)) : node_label(*bn);
    if (bias_add) what += str_cat(" with its bias ", node_label(*bias_add));
    PassDecision decision{pass, what, false, {}, pass, {bn->name()}, {}, 0};
    if (bias_add) decision.members.push_back(bias_add->name());
    if (anchor) decision.members.push_back(anchor->name());
    auto refuse = [&](std::string reason) {
      decision.reason = std::move(reason);
      context.decide(decision);
    };
    bool extra_outputs = false;
    for (size_t i = 1; i < bn->outputs().size(); ++i) extra_outputs |= bn->output(i) != nullptr;
    if (AttrReader(*bn).get_int("training_mode") != 0 || extra_outputs) {
      refuse("training mode");
      continue;
    }
    if (!context.fusion.node_fusible(*bn)) {
      refuse(context.fusion.node_refusal(*bn));
      continue;
    }
    Reason why;
    Plan plan;
    if (!is_anchor(anchor)) {
      why = "input is not produced by Conv, ConvTranspose, Gemm or MatMul";
    } else if (!context.fusion.node_fusible(*anchor)) {
      why = context.fusion.node_refusal(*anchor);
    } else if (bias_add && !context.fusion.node_fusible(*bias_add)) {
      why = context.fusion.node_refusal(*bias_add);
    } else {
      why = plan_fold(*anchor, bias_add, shift, *bn, plan);
    }
    if (why.empty()) {
      // The BN's pass over memory disappears: its input is no longer read, its output no longer
      // written (the anchor writes the result directly).
      decision.bytes_saved = value_bytes(bn->input(0)) + value_bytes(bn->output(0));
      if (bias_add) decision.bytes_saved += value_bytes(bias_add->input(0)) + value_bytes(bias_add->output(0));
      decision.applied = true;
      decision.result = anchor->name();
      OPFUSE_TRY(apply(graph, *anchor, *bn, std::move(plan)));
      context.decide(std::move(decision));
      changed = true;
      continue;
    }
    refuse(why);
    PassDecision lowering{pass, str_cat(node_label(*bn), " as per-channel Mul+Add"), false, {}, pass, {bn->name()}, {}, 0};
    Affine affine;
    if (Reason cannot = plan_affine(*bn, affine); !cannot.empty()) {
      lowering.reason = std::move(cannot);
      context.decide(std::move(lowering));
      continue;
    }
    OPFUSE_ASSIGN_OR_RETURN(Node * add, lower_to_affine(graph, *bn, affine));
    lowering.applied = true;
    lowering.result = add->name();
    context.decide(std::move(lowering));
    changed = true;
  }
  // A MatMul fold appends its Add at the end of the node list.
  if (changed) OPFUSE_TRY(graph.topological_sort());
  return changed;
}

}  // namespace opfuse
