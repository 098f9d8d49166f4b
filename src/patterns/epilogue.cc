// Epilogue fusion: an anchor (Conv incl. depthwise, ConvTranspose, MatMul, Gemm,
// opfuse::FusedMatMulInteger) absorbs the elementwise op
// after it into an ordered post-op list (ops/fused.h), so the anchor's kernel applies it while
// the output is still in cache instead of a separate pass over memory per op.
//
//   before                                   after
//     x    W  B                                x   W  B   r
//     |    |  |                                |   |  |   |
//     Conv ----> c                             opfuse::FusedConv {epilogue = ["add", "relu"]}
//                |      r                                 |
//               Add <---+                                 y
//                |
//               Relu -> y
//
// Algebra: Fused(x, W, B, r){[p1 .. pk]} = pk(...p1(Anchor(x, W, B))...), each p elementwise:
// one ONNX activation (Relu, LeakyRelu, Clip/Relu6, Sigmoid, Tanh, HardSigmoid, HardSwish, Elu,
// Gelu erf/tanh, and every other activation op record: Selu, Celu, Softplus ...), x * Sigmoid(x) (SiLU), x * HardSigmoid(x) and x * Relu6(x + 3) / 6 (HardSwish), a * y + b (Mul/Div/Add/Sub by a scalar constant),
// a one-sided clip (Max/Min with a scalar constant) or
// "add": + r, with r of exactly the output's shape and dtype, at most one per anchor. Since every
// p reads only the element it writes, applying them inside the kernel computes the same values.
// Each pattern absorbs one op; the driver repeats them, so a whole chain ends in one node.
// Guards (each refusal recorded): the anchor's output is used only by the absorbed op(s) and is
// not a graph output (standard guards), f32, the absorbed op keeps the anchor's shape, the
// residual does not depend on the anchor. The fused node keeps the anchor's name and the
// absorbed op's output name.
#include <cmath>
#include <limits>
#include <vector>

#include "ops/fused.h"
#include "passes/pass_util.h"
#include "patterns/epilogue.h"
#include "patterns/families.h"

namespace opfuse::patterns {
namespace {

struct AnchorSpec {
  std::string_view onnx_op;   // "Conv"; "" for an anchor that is born fused
  std::string_view fused_op;  // "FusedConv" (domain "opfuse")
};
constexpr AnchorSpec kAnchors[] = {{"Conv", "FusedConv"},
                                   {"ConvTranspose", "FusedConvTranspose"},
                                   {"MatMul", "FusedMatMul"},
                                   {"Gemm", "FusedGemm"},
                                   // integer_products_in_fp32 writes these (ops/integer_matmul.cc,
                                   // ops/integer_conv.cc)
                                   {"", "FusedMatMulInteger"},
                                   {"", "QuantizedConv"}};

const AnchorSpec* anchor_spec(const Node& node) {
  for (const AnchorSpec& a : kAnchors) {
    if (node.domain().empty() ? !a.onnx_op.empty() && node.op_type() == a.onnx_op
                              : node.domain() == kFusedDomain && node.op_type() == a.fused_op) {
      return &a;
    }
  }
  return nullptr;
}

std::string describe_absorb(const Match& m, std::string_view as) {
  return str_cat(node_label(*m.root), " into ", node_label(*m.node("anchor")), " as ", as);
}

// The checks every absorption shares.
Reason common_check(const Match& m) {
  const Value* c = m.value("anchor");
  if (Reason why = is_f32(c); !why.empty()) return why;
  if (Reason why = same_type(m.root->output(0), c); !why.empty()) return why;
  return {};
}

Pattern absorb_pattern(std::string name, PatternNode tree,
                       std::function<Result<std::string>(const Match&)> post_op_of) {
  Pattern p;
  p.name = std::move(name);
  p.family = "epilogue";
  p.tree = std::move(tree);
  p.check = [post_op_of](const Match& m, const PassContext&) -> Reason {
    if (Reason why = common_check(m); !why.empty()) return why;
    auto op = post_op_of(m);
    return op.is_ok() ? Reason{} : op.status().message();
  };
  p.rewrite = [post_op_of](Graph& g, const Match& m) -> Result<Node*> {
    OPFUSE_ASSIGN_OR_RETURN(std::string op, post_op_of(m));
    return absorb_into_anchor(g, m, op, nullptr);
  };
  p.describe = [post_op_of](const Match& m) {
    auto op = post_op_of(m);
    return describe_absorb(m, op.is_ok() ? *op : "?");
  };
  return p;
}

// One pattern per post-op that absorbs a single ONNX op (Relu, Clip, Gelu ...).
Pattern activation_pattern(const PostOpSpec* spec) {
  Pattern p = absorb_pattern(
      str_cat("epilogue_", spec->name), op_head(spec->onnx_op, {anchor_tree()}),
      [spec](const Match& m) -> Result<std::string> {
        auto params = post_op_params(*spec, *m.root);
        if (!params) {
          return Status::user_error(str_cat(m.root->op_type(),
                                            " parameters are not compile-time constants the post-op supports"));
        }
        return format_post_op(spec->name, *params);
      });
  // Gelu is two post-ops (erf, tanh): each pattern takes the nodes only it can represent, and a
  // node neither accepts is refused by both.
  p.condition = [spec](const Match& m) {
    if (post_op_params(*spec, *m.root)) return true;
    for (const PostOpSpec& other : post_op_specs()) {
      if (&other != spec && other.onnx_op == spec->onnx_op && post_op_params(other, *m.root)) return false;
    }
    return true;
  };
  return p;
}

// x * Sigmoid(x) with x the anchor's output (both uses inside the match).
Pattern silu_pattern() {
  return absorb_pattern("epilogue_silu", op("Mul", {anchor_tree(), op("Sigmoid", {any("anchor")})}),
                        [](const Match&) -> Result<std::string> { return std::string("sigmoid_mul"); });
}

// x * HardSigmoid(x) with HardSigmoid's default alpha = 1/6, beta = 0.5 is HardSwish (how
// PyTorch exports nn.Hardswish before opset 14: MobileNetV3).
Pattern hardswish_mul_pattern() {
  Pattern p = absorb_pattern(
      "epilogue_hardswish_mul", op("Mul", {anchor_tree(), op("HardSigmoid", {any("anchor")}).as("hs")}),
      [](const Match&) -> Result<std::string> { return std::string("hardswish"); });
  p.condition = [](const Match& m) {
    const AttrReader a(*m.node("hs"));
    return std::abs(a.get_float("alpha") - 1.0f / 6.0f) <= 1e-6f && std::abs(a.get_float("beta") - 0.5f) <= 1e-6f;
  };
  return p;
}

// x * Relu6(x + 3) / 6 is HardSwish written out (Paddle2ONNX's hardswish: PP-OCR's and
// PP-LCNet's convs, 18 to 33 of them per model). The /6 divides or multiplies by 1/6, last or
// on the clip. Without this the four ops ran as a fused region of their own after each conv.
// NaN, the infinities and -Inf (0 * -Inf = NaN in both) give what HardSwish gives.
Pattern hardswish_relu6_pattern() {
  const auto relu6 = [] {
    return op("Clip", {op("Add", {any("anchor"), scalar(3.0)}), scalar(0.0), scalar(6.0)});
  };
  const double sixth = 1.0 / 6.0;
  Pattern p = absorb_pattern("epilogue_hardswish_relu6",
                             one_of({op("Div", {op("Mul", {anchor_tree(), relu6()}), scalar(6.0)}),
                                     op("Mul", {op("Mul", {anchor_tree(), relu6()}), scalar(sixth)}),
                                     op("Mul", {anchor_tree(), op("Div", {relu6(), scalar(6.0)})}),
                                     op("Mul", {anchor_tree(), op("Mul", {relu6(), scalar(sixth)})})}),
                             [](const Match&) -> Result<std::string> { return std::string("hardswish"); });
  p.benefit = 10;  // before the single-op rules rooted at Mul and Div
  return p;
}

// a * y + b from Mul / Div / Add / Sub of the anchor's output by a scalar constant.
Pattern linear_pattern(std::string_view onnx_op) {
  const std::string op_name(onnx_op);
  return absorb_pattern(
      str_cat("epilogue_linear_", onnx_op), op(onnx_op, {anchor_tree(), any_scalar("s")}),
      [op_name](const Match& m) -> Result<std::string> {
        const float s = static_cast<float>(m.scalar("s"));
        float a = 1.0f, b = 0.0f;
        if (op_name == "Mul") a = s;
        if (op_name == "Div") a = 1.0f / s;
        if (op_name == "Add") b = s;
        if (op_name == "Sub") b = -s;
        return format_post_op("linear", {a, b});
      });
}

// Max / Min of the anchor's output and a scalar constant: a one-sided clip (TensorFlow exports
// write a lower bound as tf.math.maximum: the Keras speech-embedding CNN's 19 convs). Both keep
// NaN, as Max and Min do; clip's other bound is infinite, as for a Clip without it.
Pattern bound_pattern(std::string_view onnx_op) {
  const bool lower = onnx_op == "Max";
  return absorb_pattern(str_cat("epilogue_", lower ? "max" : "min"), op(onnx_op, {anchor_tree(), any_scalar("s")}),
                        [lower](const Match& m) -> Result<std::string> {
                          const float s = static_cast<float>(m.scalar("s"));
                          if (std::isnan(s)) return Status::user_error("the bound is NaN");
                          const float inf = std::numeric_limits<float>::infinity();
                          return format_post_op("clip", lower ? std::vector<float>{s, inf} : std::vector<float>{-inf, s});
                        });
}

// y + r for a tensor r of y's shape: the residual becomes input 3.
Pattern residual_pattern() {
  Pattern p;
  p.name = "epilogue_add";
  p.family = "epilogue";
  p.tree = op("Add", {anchor_tree(), any("r")});
  p.check = [](const Match& m, const PassContext&) -> Reason {
    const Node* anchor = m.node("anchor");
    const Value* r = m.value("r");
    if (r == m.value("anchor")) return "Add of the anchor's output to itself";
    if (anchor->has_input(3)) return "anchor already has a residual";
    if (Reason why = is_f32(m.value("anchor")); !why.empty()) return why;
    if (!same_type(r, m.value("anchor")).empty() || !same_type(m.root->output(0), r).empty()) {
      return "residual shape differs";
    }
    if (depends_on(r, anchor)) return "residual is computed from the anchor";
    return {};
  };
  p.rewrite = [](Graph& g, const Match& m) { return absorb_into_anchor(g, m, "add", m.value("r")); };
  p.describe = [](const Match& m) { return describe_absorb(m, "add"); };
  return p;
}

}  // namespace

PatternNode anchor_tree() {
  std::string types;
  for (const AnchorSpec& a : kAnchors) {
    if (!a.onnx_op.empty()) types += str_cat(types.empty() ? "" : "|", a.onnx_op);
    types += str_cat("|", kFusedDomain, "::", a.fused_op);
  }
  return op(types).as("anchor");
}

Result<Node*> absorb_into_anchor(Graph& graph, const Match& m, const std::string& post_op, Value* residual) {
  Node* anchor = m.node("anchor");
  const AnchorSpec* spec = anchor_spec(*anchor);
  if (spec == nullptr) return Status::internal_error(str_cat(anchor->describe(), " is not an anchor"));
  std::vector<Value*> inputs = anchor->inputs();
  inputs.resize(std::max<size_t>(inputs.size(), 4), nullptr);  // room for the residual; keeps an input scale
  Attributes attrs = anchor->attrs;
  std::vector<std::string> epilogue;
  if (anchor->domain() == kFusedDomain) epilogue = AttrReader(*anchor).get_strings("epilogue");
  epilogue.push_back(post_op);
  if (residual) inputs[3] = residual;
  while (!inputs.empty() && inputs.back() == nullptr) inputs.pop_back();  // no "_" for no bias
  attrs["epilogue"] = epilogue;
  return replace_match(graph, m, std::string(spec->fused_op), std::string(kFusedDomain),
                       std::move(inputs), std::move(attrs), anchor->name());
}

std::vector<Pattern> epilogue_patterns() {
  std::vector<Pattern> out;
  for (const PostOpSpec& spec : post_op_specs()) {
    if (!spec.onnx_op.empty()) out.push_back(activation_pattern(&spec));
  }
  out.push_back(silu_pattern());
  out.push_back(hardswish_mul_pattern());
  out.push_back(hardswish_relu6_pattern());
  for (std::string_view op : {"Mul", "Div", "Add", "Sub"}) out.push_back(linear_pattern(op));
  for (std::string_view op : {"Max", "Min"}) out.push_back(bound_pattern(op));
  out.push_back(residual_pattern());
  return out;
}

}  // namespace opfuse::patterns
