// Integer products off the integer reference loops: MatMulInteger of constant weights with
// its dequantization as one opfuse::FusedMatMulInteger (an exact integer kernel that returns
// the dequantized floats), ConvInteger with its quantizer as one opfuse::QuantizedConv
// (likewise; any target from AVX2) or, below VNNI, a float32 Conv, QLinearMatMul as the first anchor
// and QLinearConv as float ops (their section below). ONNX Runtime's dynamic quantizer
// (quantize_dynamic, and the "*_quantized.onnx" models made with it) writes each weight product as
//
//   xq, s, z = DynamicQuantizeLinear(x)
//   y = MatMulInteger(xq, Wq, z, Wz)        (int32)
//   yf = Cast(y, to=float)
//   out = Add(Mul(yf, Mul(s, Ws)), bias)
//
// whose int32 sums are only ever read through Casts to float. Without this pass MatMulInteger
// runs on the reference loops, and ConvInteger below VNNI on onednn.conv_integer's f32 route,
// which converts x to f32 and the sums back to int32 around every convolution.
//
// MatMulInteger, when the Cast's only reader is that dequantization (x_scale one value, w_scale
// a constant per tensor or per column), becomes
//
//   out = opfuse::FusedMatMulInteger(xq, Wq, bias, -, s, z, Ws, Wz)
//
// (the bias when the Mul's only reader adds a constant [N]): the same float steps in the same
// order, so bit for bit the graph it replaces, on cpu.gemm_i16's exact 16-bit multiply-adds
// (kernels/cpu/integer_gemm_kernel.cc: BERT-base quantized runs at about 0.7x its float32
// twin's time on a Zen 3, docs/benchmarks.md). The activation and residual after it fuse as
// epilogues. (The rule keeps its name, under which users switch it off: the sums are integers
// now, the dequantization float32.)
//
// ConvInteger (below VNNI; with VNNI oneDNN's exact int8 convolution is faster than float32 and
// keeps it) with that dequantization, of one group, on an AVX2 or AVX-512 target, whose x and
// x_zero a DynamicQuantizeLinear made, becomes with it one
//
//   out = opfuse::QuantizedConv(x, Wq, bias, -, Ws, Wz)      (x: the quantizer's float input)
//
// taking the bias Add (ops/integer_conv.cc): bit for bit the graph it replaces, on cpu.conv_i16's
// exact 16-bit multiply-adds (kernels/cpu/quantized_conv_kernel.cc), which quantizes x as it
// copies it (the quantized IS-Net at about 0.8x its float32 twin's time on a Zen 3,
// docs/benchmarks.md). Any other such ConvInteger becomes a float32 Conv of the dequantized x,
// Cast(xq) - Cast(z) times s, by (Wq - Wz) * Ws folded once, whose output the Mul's readers
// read; the bias and activation after it fuse as in a float model. Within float rounding of eager
// mode, no longer exact: the sums add dequantized products.
//
// Without that Mul, MatMulInteger becomes the same anchor with scales of 1 (still exact), read by
// the Casts, now float32 to float32; ConvInteger a float32 Conv of Cast(xq) - Cast(z) by Wq - Wz,
// exact while every partial sum stays below 2^24 in magnitude (the operands are integers below
// 2^8, products below 2^17, and float32 adds integers exactly up to there; beyond, the sum is off
// by its float rounding, relative 6e-8 per addition, as the Cast of a larger int32 would round it).
// A MatMulInteger of two computed operands (attention's products when a quantizer quantizes them
// too) becomes a float32 MatMul of Cast(a) - Cast(a_zero) by Cast(b) - Cast(b_zero), exact on the
// same terms. `--disable integer_products_in_fp32` keeps the integer kernels.
#include <cmath>
#include <map>
#include <optional>

#include "ops/fused.h"
#include "ops/op_def.h"
#include "passes/pass_util.h"
#include "passes/passes.h"
#include "passes/quantize_steps.h"

namespace opfuse {
namespace {

constexpr std::string_view kPass = "integer_products_in_fp32";
constexpr int64_t kOnnxFloat = 1;

bool is_int8(DType t) { return t == DType::kU8 || t == DType::kI8; }

bool is_cast_to_float(const Node& node) {
  if (!node.domain().empty() || node.op_type() != "Cast") return false;
  const auto it = node.attrs.find("to");
  return it != node.attrs.end() && std::holds_alternative<int64_t>(it->second) &&
         std::get<int64_t>(it->second) == kOnnxFloat;
}

bool is_onnx_op(const Node* node, std::string_view op) {
  return node != nullptr && node->domain().empty() && node->op_type() == op;
}

bool is_conv(const Node& node) { return node.op_type() == "ConvInteger" || node.op_type() == "QLinearConv"; }

// Output channels of the weights: a MatMul's columns, a Conv's first dim.
int64_t channels_of(const Node& node, const Tensor& w) { return is_conv(node) ? w.dim(0) : w.dim(1); }

// Why `node` is not rewritten, or "" when it is: constant weights (2-d, or a Conv's) with a
// per-tensor or per-channel zero point, or for MatMulInteger a computed B with a per-tensor or
// per-column one; a per-tensor zero point of x; int32 sums read only by Casts to float.
std::string refusal_reason(const Node& node) {
  const bool conv = is_conv(node);
  const Value* a = node.input(0);
  const Tensor* w = constant_data(node.input(1));
  if (a == nullptr || !is_int8(a->dtype)) return "x is not u8/i8";
  if (const Value* az = node.input(2); az != nullptr) {
    const auto dims = az->shape ? static_dims(*az->shape) : std::nullopt;
    if (!dims || numel_of(*dims) != 1) return "x's zero point is not one value (per-row zero points stay integer)";
  }
  if (!conv && w == nullptr) {
    // Both operands computed (attention's products, quantized on the fly): a float MatMul of the
    // integers, with B's zero point per tensor or per column.
    const Value* b = node.input(1);
    const auto b_dims = b != nullptr && b->shape ? static_dims(*b->shape) : std::nullopt;
    if (!b_dims || b_dims->size() < 2 || !is_int8(b->dtype)) return "B is not u8/i8 of a known shape";
    if (const Value* bz = node.input(3); bz != nullptr) {
      const auto dims = bz->shape ? static_dims(*bz->shape) : std::nullopt;
      if (!dims || (numel_of(*dims) != 1 && *dims != std::vector<int64_t>{b_dims->back()})) {
        return "B's zero point is not one value or one per column";
      }
    }
  } else if (w == nullptr || !is_int8(w->dtype()) || (conv ? w->rank() < 3 : w->rank() != 2) || w->numel() == 0) {
    return conv ? "the weights are not constant non-empty u8/i8" : "B is not non-empty u8/i8 weights of rank 2";
  }
  if (const Value* wz = node.input(3); wz != nullptr && w != nullptr) {
    const Tensor* t = constant_data(wz);
    if (t == nullptr || (t->numel() != 1 && (t->rank() > 2 || t->numel() != channels_of(node, *w)))) {
      return "the weights' zero point is not a constant per-tensor or per-channel one";
    }
  }
  const Value* y = node.output(0);
  if (y->is_graph_output()) return "the int32 sums are a graph output";
  for (const Use& use : y->uses()) {
    if (!is_cast_to_float(*use.node)) return str_cat("the int32 sums are read by ", node_label(*use.node));
  }
  return "";
}

// onnxruntime's dequantization of the sums (see the file comment), when `node`'s are read by it.
struct Dequantization {
  Node* mul = nullptr;              // Mul(Cast(sums), Mul(x_scale, w_scale)): its readers read the product
  Value* x_scale = nullptr;         // one value
  Value* w_scale_value = nullptr;
  const Tensor* w_scale = nullptr;  // its data: f32, one value, or one per column of a MatMul's weights
};

std::optional<Dequantization> dequantization_of(const Node& node, int64_t channels) {
  const auto is_mul = [](const Node* p) { return p != nullptr && p->domain().empty() && p->op_type() == "Mul"; };
  const Value* y = node.output(0);
  if (y->uses().size() != 1) return std::nullopt;
  const Value* cast = y->uses()[0].node->output(0);
  if (cast->is_graph_output() || cast->uses().size() != 1) return std::nullopt;
  const Use& use = cast->uses()[0];
  Node* mul = use.node;
  if (!is_mul(mul) || mul->output(0)->is_graph_output()) return std::nullopt;
  const Value* scales = mul->input(1 - static_cast<size_t>(use.input_index));
  const Node* product = scales != nullptr ? scales->producer() : nullptr;
  if (!is_mul(product)) return std::nullopt;
  for (size_t i : {0u, 1u}) {
    Value* x_scale = product->input(i);
    const Tensor* w_scale = constant_data(product->input(1 - i));
    if (x_scale == nullptr) continue;
    const auto x_dims = x_scale->shape ? static_dims(*x_scale->shape) : std::nullopt;
    if (x_scale->dtype == DType::kF32 && x_dims && numel_of(*x_dims) == 1 && x_dims->size() <= 1 &&
        w_scale != nullptr && w_scale->dtype() == DType::kF32 && w_scale->rank() <= 1 &&
        (w_scale->numel() == 1 || (!is_conv(node) && w_scale->numel() == channels))) {
      return Dequantization{mul, x_scale, product->input(1 - i), w_scale};
    }
  }
  return std::nullopt;
}

// (W - W_zero) * W_scale in float32, W's dims; zero point and scale per tensor or per output
// channel (no scale: 1).
Result<Tensor> float_weights(const Node& node, const Tensor& w, const Tensor* w_zero, const Tensor* w_scale) {
  OPFUSE_ASSIGN_OR_RETURN(Tensor out, Tensor::uninitialized(DType::kF32, w.dims(), "integer_products_in_fp32 weights"));
  const int64_t channels = channels_of(node, w), per_channel = w.numel() / channels;
  const bool conv = is_conv(node);
  float* to = out.data<float>();
  for (int64_t i = 0; i < w.numel(); ++i) {
    const int64_t c = conv ? i / per_channel : i % channels;
    const int64_t zero = w_zero == nullptr ? 0 : w_zero->get_int(w_zero->numel() == 1 ? 0 : c);
    const float scale = w_scale == nullptr ? 1.0f : w_scale->data<float>()[w_scale->numel() == 1 ? 0 : c];
    to[i] = static_cast<float>(w.get_int(i) - zero) * scale;
  }
  return out;
}

// A new node of one output, named after `base`, with the output's dtype and shape set.
Result<Value*> add_op(Graph& graph, const std::string& type, std::vector<Value*> inputs, const std::string& base,
                      const std::optional<Shape>& shape, DType dtype = DType::kF32, Attributes attrs = {},
                      const std::string& node_name = "", const std::string& domain = "") {
  OPFUSE_ASSIGN_OR_RETURN(Node * n, graph.add_node(type, std::move(inputs), {graph.unique_value_name(base + "_" + type)},
                                                   std::move(attrs), node_name, domain));
  n->output(0)->dtype = dtype;
  n->output(0)->shape = shape;
  return n->output(0);
}

Result<Value*> cast_to_float(Graph& graph, Value* v) {
  return add_op(graph, "Cast", {v}, v->name(), v->shape, DType::kF32, {{"to", AttrValue(kOnnxFloat)}});
}

Value* add_scalar(Graph& graph, const std::string& name, float v) {
  return graph.add_constant(graph.unique_value_name(name), Tensor::scalar<float>(v));
}

// `product` (f32) read where the integer sums `y` were: by the readers of the dequantizing Mul when
// there is one (it, the Cast and the integer node die in dce), else by the Casts, which now cast
// float32 to float32 and which simplify drops (a graph output keeps its name that way).
void read_product_instead(Graph& graph, Value* y, const std::optional<Dequantization>& dq, Value* product) {
  if (dq) {
    graph.replace_all_uses(dq->mul->output(0), product);
    return;
  }
  for (const Use& use : std::vector<Use>(y->uses())) graph.set_input(use.node, static_cast<size_t>(use.input_index), product);
}

// MatMulInteger `node` of a computed B (refusal_reason passed) as MatMul(Cast(x) - Cast(x_zero),
// Cast(B) - Cast(B_zero)) read by the Casts, which now cast float32 to float32: the operands are
// integers below 2^9 in magnitude and their products below 2^17, so the float sums are the
// integer ones while partial sums stay below 2^24 (K up to 258 at the extremes; attention's
// head dimension and sequence lengths of that order), beyond which they round as the Cast of
// the int32 sum would. A dequantizing Mul after it stays and multiplies the same value.
Status rewrite_as_float_matmul(Graph& graph, Node* node) {
  const auto integers = [&](Value* v, Value* zero) -> Result<Value*> {
    OPFUSE_ASSIGN_OR_RETURN(Value * f, cast_to_float(graph, v));
    if (zero == nullptr) return f;
    OPFUSE_ASSIGN_OR_RETURN(Value * z, cast_to_float(graph, zero));
    return add_op(graph, "Sub", {f, z}, f->name(), f->shape);
  };
  OPFUSE_ASSIGN_OR_RETURN(Value * a, integers(node->input(0), node->input(2)));
  OPFUSE_ASSIGN_OR_RETURN(Value * b, integers(node->input(1), node->input(3)));
  Value* y = node->output(0);
  OPFUSE_ASSIGN_OR_RETURN(Value * product, add_op(graph, "MatMul", {a, b}, y->name(), y->shape, DType::kF32, {},
                                                  node->name() + "_f32"));
  read_product_instead(graph, y, std::nullopt, product);
  return Status::ok();
}

// ConvInteger `node` (refusal_reason passed) as a float Conv; `dq`: the dequantization its
// scales fold out of.
Status rewrite_as_float_conv(Graph& graph, Node* node, const std::optional<Dequantization>& dq) {
  OPFUSE_ASSIGN_OR_RETURN(Tensor w, float_weights(*node, *constant_data(node->input(1)), constant_data(node->input(3)),
                                                  dq ? dq->w_scale : nullptr));
  Value* weights = graph.add_constant(graph.unique_value_name(node->input(1)->name() + "_f32"), std::move(w));
  OPFUSE_ASSIGN_OR_RETURN(Value * a, cast_to_float(graph, node->input(0)));
  if (Value* az = node->input(2); az != nullptr) {
    OPFUSE_ASSIGN_OR_RETURN(Value * zero, cast_to_float(graph, az));
    OPFUSE_ASSIGN_OR_RETURN(a, add_op(graph, "Sub", {a, zero}, a->name(), a->shape));
  }
  if (dq) {
    OPFUSE_ASSIGN_OR_RETURN(a, add_op(graph, "Mul", {a, dq->x_scale}, a->name(), a->shape));
  }
  Value* y = node->output(0);
  // The Conv keeps ConvInteger's attributes (pads, strides, dilations, group, kernel_shape, auto_pad).
  OPFUSE_ASSIGN_OR_RETURN(Value * product, add_op(graph, "Conv", {a, weights}, y->name(), y->shape, DType::kF32,
                                                  node->attrs, node->name() + "_f32"));
  read_product_instead(graph, y, dq, product);
  return Status::ok();
}

// The constant [N] f32 bias added to `product` [..., N] by its only reader, an Add whose result is
// not a graph output; null when there is none.
Node* bias_add_of(const Value* product, int64_t n) {
  if (product->uses().size() != 1) return nullptr;
  const Use& use = product->uses()[0];
  Node* add = use.node;
  if (!add->domain().empty() || add->op_type() != "Add" || add->output(0)->is_graph_output()) return nullptr;
  const Tensor* bias = constant_data(add->input(1 - static_cast<size_t>(use.input_index)));
  if (bias == nullptr || bias->dtype() != DType::kF32 || bias->rank() != 1 || bias->dim(0) != n) return nullptr;
  const Value* y = add->output(0);
  if (!y->shape || !product->shape || !(*y->shape == *product->shape)) return nullptr;
  return add;
}

// MatMulInteger `node` (refusal_reason passed) as one opfuse::FusedMatMulInteger
// (ops/integer_matmul.cc) on an exact integer kernel (kernels/cpu/integer_gemm_kernel.cc). With
// onnxruntime's dequantization `dq` it takes the scales, and the bias Add after it: the same
// float steps in the same order, so bit for bit; the activation and residual after it fuse as
// epilogues. Without, its scales are 1, so it returns what the Casts made of the sums.
Status rewrite_as_integer_anchor(Graph& graph, Node* node, const std::optional<Dequantization>& dq) {
  Value* y = node->output(0);
  Value* one = dq ? nullptr : add_scalar(graph, node->name() + "_unit_scale", 1.0f);
  std::vector<Value*> inputs = {node->input(0), node->input(1), nullptr, nullptr, dq ? dq->x_scale : one,
                                node->input(2), dq ? dq->w_scale_value : one, node->input(3)};
  Value* out = dq ? dq->mul->output(0) : y;
  if (Node* add = dq ? bias_add_of(out, constant_data(node->input(1))->dim(1)) : nullptr) {
    const Use& use = out->uses()[0];
    inputs[2] = add->input(1 - static_cast<size_t>(use.input_index));
    out = add->output(0);
  }
  while (inputs.back() == nullptr) inputs.pop_back();
  OPFUSE_ASSIGN_OR_RETURN(Value * product, add_op(graph, "FusedMatMulInteger", std::move(inputs), out->name(),
                                                  out->shape, DType::kF32, {}, node->name() + "_fused",
                                                  std::string(kFusedDomain)));
  if (dq) {
    graph.replace_all_uses(out, product);  // the Mul, the Add, the Cast and the product die in dce
  } else {
    read_product_instead(graph, y, std::nullopt, product);
  }
  return Status::ok();
}

// Why `conv` does not become an opfuse::QuantizedConv on cpu.conv_i16, or "": it runs one group,
// from AVX2 (below, no kernel), VNNI or not. Measured on an AMD EPYC Zen 5 (avx512_core_bf16 with
// VNNI, 2 threads, O3): the quantized IS-Net (dynamic ConvIntegers) ran 602 ms per run on it
// against 839 ms with oneDNN's int8 brgconv behind a separate quantizer, casts and
// dequantization; ResNet-50 in the QDQ form (tools/zoo/quantize_qdq.py) 29.6-29.9 ms with its
// float convs against 18.6-22.4 ms on this kernel, capped at avx512_core (no VNNI).
std::string quantized_conv_refusal(const Node& conv, const Target& target) {
  if (AttrReader(conv).get_int("group") != 1) return "a grouped conv (cpu.conv_i16 runs one group)";
  if (target.isa < IsaTier::kAvx2) return "below AVX2 there is no cpu.conv_i16";
  return "";
}

// The DynamicQuantizeLinear that made ConvInteger `node`'s x and x zero point, and whose scale
// its dequantization `dq` multiplies by, when it is a 2-d conv quantized_conv_refusal accepts;
// null otherwise.
Node* dynamic_quantization_of(const Node& node, const std::optional<Dequantization>& dq, const Target& target) {
  if (!dq || !quantized_conv_refusal(node, target).empty() || constant_data(node.input(1))->rank() != 4) {
    return nullptr;
  }
  Node* q = node.input(0)->producer();
  if (q == nullptr || !q->domain().empty() || q->op_type() != "DynamicQuantizeLinear" || q->outputs().size() != 3) return nullptr;
  const bool same = node.input(0) == q->output(0) && node.input(2) == q->output(2) && dq->x_scale == q->output(1);
  return same && q->input(0) != nullptr && q->input(0)->dtype == DType::kF32 ? q : nullptr;
}

// The constant per-channel f32 bias ([M], [M, 1, 1] or [1, M, 1, 1]) added to a conv's `product`
// [N, M, H, W] by its only reader, an Add whose result is not a graph output, as [M]; nullopt when
// there is none. onnxruntime's quantizer reshapes a conv's bias to [1, M, 1, 1], and this pass
// runs before constant folding: a Reshape of a constant counts as that constant (same order).
struct ConvBias {
  Node* add = nullptr;
  Value* bias = nullptr;
};
std::optional<ConvBias> conv_bias_of(Graph& graph, const Value* product, int64_t m) {
  if (product->uses().size() != 1) return std::nullopt;
  const Use& use = product->uses()[0];
  Node* add = use.node;
  if (!add->domain().empty() || add->op_type() != "Add" || add->output(0)->is_graph_output()) return std::nullopt;
  Value* bias = add->input(1 - static_cast<size_t>(use.input_index));
  const Tensor* b = constant_data(bias);
  if (b == nullptr && is_onnx_op(bias->producer(), "Reshape")) b = constant_data(bias->producer()->input(0));
  const auto dims = bias->shape ? static_dims(*bias->shape) : std::nullopt;
  if (b == nullptr || b->dtype() != DType::kF32 || b->numel() != m || !dims || dims->size() > 4) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(dims->size());
  for (int64_t i = 0; i < rank; ++i) {
    if ((*dims)[i] != 1 && !((*dims)[i] == m && rank - i == (rank == 1 ? 1 : 3))) return std::nullopt;
  }
  const Value* y = add->output(0);
  if (!y->shape || !product->shape || !(*y->shape == *product->shape)) return std::nullopt;
  auto flat = b->reshaped({m});
  if (!flat.is_ok()) return std::nullopt;
  return ConvBias{add, graph.add_constant(graph.unique_value_name(bias->name() + "_channels"), std::move(*flat))};
}

// ConvInteger `node` (refusal_reason passed) of DynamicQuantizeLinear `q`'s x, with onnxruntime's
// dequantization `dq` and the bias Add after it, as one opfuse::QuantizedConv of q's float
// input (ops/integer_conv.cc): the same steps in the same order, so bit for bit that graph, with
// x quantized inside the kernel (no u8 tensor, and in the blocked layout at O3). The activation
// and residual after it fuse as epilogues.
Status rewrite_as_dynamic_quantized_conv(Graph& graph, Node* node, Node* q, const Dequantization& dq) {
  const int64_t m = constant_data(node->input(1))->dim(0);
  std::vector<Value*> inputs = {q->input(0), node->input(1), nullptr, nullptr, dq.w_scale_value, node->input(3)};
  Value* out = dq.mul->output(0);
  if (const auto bias = conv_bias_of(graph, out, m)) {
    inputs[2] = bias->bias;
    out = bias->add->output(0);
  }
  while (inputs.back() == nullptr) inputs.pop_back();
  // Conv's attributes (pads, strides, dilations, group, kernel_shape, auto_pad) are ConvInteger's.
  OPFUSE_ASSIGN_OR_RETURN(Value * product, add_op(graph, "QuantizedConv", std::move(inputs), out->name(),
                                                  out->shape, DType::kF32, node->attrs, node->name() + "_fused",
                                                  std::string(kFusedDomain)));
  graph.replace_all_uses(out, product);  // the Add, Mul, Cast, ConvInteger (and the quantizer, if unread) die in dce
  return Status::ok();
}

// ---- QLinearConv / QLinearMatMul (static quantization's operator form) -----------------------
//
// y = saturate(round((x - x_zero) (*) (W - W_zero) * x_scale * W_scale / y_scale) + y_zero)
// (QLinearConv adds its int32 bias to the sums). QLinearMatMul becomes opfuse::FusedMatMulInteger
// with the reference's multiplier x_scale * W_scale / y_scale as its per-column scale, then
// QuantizeLinear's steps (Round, Add, Clip, Cast): bit for bit the reference. QLinearConv
// becomes the dequantized x (Cast, Sub, Mul), a float Conv of the dequantized constant weights
// and bias, a Div by y_scale and the same steps: the float sums may put a value that the
// reference rounds at a half step one quantization step away.
constexpr int kQX = 0, kQXScale = 1, kQXZero = 2, kQW = 3, kQWScale = 4, kQWZero = 5, kQYScale = 6, kQYZero = 7,
              kQBias = 8;

bool is_qlinear(const Node& node) { return node.op_type() == "QLinearConv" || node.op_type() == "QLinearMatMul"; }

// Why a QLinear node is not rewritten, or "": constant weights and one-value constant scales and
// zero points (the weights' may be per output channel), a constant bias.
std::string qlinear_refusal_reason(const Node& node) {
  const bool conv = node.op_type() == "QLinearConv";
  const Tensor* w = constant_data(node.input(kQW));
  if (node.input(kQX) == nullptr || !is_int8(node.input(kQX)->dtype)) return "x is not u8/i8";
  if (!is_int8(node.output(0)->dtype)) return "y is not u8/i8";
  if (w == nullptr || !is_int8(w->dtype()) || (conv ? w->rank() < 3 : w->rank() != 2) || w->numel() == 0) {
    return "the weights are not constant non-empty u8/i8 (of rank 2 for a MatMul)";
  }
  const int64_t channels = conv ? w->dim(0) : w->dim(1);
  for (int i : {kQXScale, kQXZero, kQYScale, kQYZero}) {
    const Tensor* t = constant_data(node.input(static_cast<size_t>(i)));
    if (t == nullptr || t->numel() != 1) return str_cat("input ", i, " is not a constant of one value");
  }
  for (int i : {kQWScale, kQWZero}) {
    const Tensor* t = constant_data(node.input(static_cast<size_t>(i)));
    if (t == nullptr || (t->numel() != 1 && t->numel() != channels)) {
      return str_cat("input ", i, " is not a constant per tensor or per output channel");
    }
  }
  if (conv && node.input(kQBias) != nullptr) {
    const Tensor* b = constant_data(node.input(kQBias));
    if (b == nullptr || b->numel() != channels) return "the bias is not a constant of one value per output channel";
  }
  // Float steps of a NaN or infinite multiplier would not saturate as the reference does.
  for (int i : {kQXScale, kQWScale, kQYScale}) {
    const Tensor* t = constant_data(node.input(static_cast<size_t>(i)));
    for (int64_t j = 0; j < t->numel(); ++j) {
      const double v = t->get_double(j);
      if (!std::isfinite(v) || (i == kQYScale && v == 0)) return str_cat("input ", i, " has a scale that is not finite (or a zero y_scale)");
    }
  }
  return "";
}

// A QLinearConv's output before QuantizeLinear's rounding: the float Conv of the dequantized x
// and weights (and bias), divided by y_scale.
Result<Value*> qlinear_conv_as_float(Graph& graph, Node* node, float x_scale, float x_zero, float y_scale) {
  OPFUSE_ASSIGN_OR_RETURN(Tensor w_scale, constant_data(node->input(kQWScale))->cast(DType::kF32));
  OPFUSE_ASSIGN_OR_RETURN(Tensor w, float_weights(*node, *constant_data(node->input(kQW)),
                                                  constant_data(node->input(kQWZero)), &w_scale));
  const std::string base = node->name();
  Value* x = node->input(kQX);
  OPFUSE_ASSIGN_OR_RETURN(Value * xf, cast_to_float(graph, x));
  OPFUSE_ASSIGN_OR_RETURN(xf, add_op(graph, "Sub", {xf, add_scalar(graph, base + "_x_zero", x_zero)}, base, x->shape));
  OPFUSE_ASSIGN_OR_RETURN(xf, add_op(graph, "Mul", {xf, add_scalar(graph, base + "_x_scale", x_scale)}, base, x->shape));
  std::vector<Value*> inputs = {xf, graph.add_constant(graph.unique_value_name(base + "_weights"), std::move(w))};
  if (node->input(kQBias) != nullptr) {
    const Tensor& b = *constant_data(node->input(kQBias));
    std::vector<float> bias(static_cast<size_t>(b.numel()));
    for (int64_t m = 0; m < b.numel(); ++m) {
      bias[m] = static_cast<float>(b.get_int(m)) * x_scale * w_scale.data<float>()[w_scale.numel() == 1 ? 0 : m];
    }
    inputs.push_back(graph.add_constant(graph.unique_value_name(base + "_bias"), Tensor::from_vector<float>({b.numel()}, bias)));
  }
  const Value* y = node->output(0);
  OPFUSE_ASSIGN_OR_RETURN(Value * q, add_op(graph, "Conv", inputs, base, y->shape, DType::kF32, node->attrs));
  return add_op(graph, "Div", {q, add_scalar(graph, base + "_y_scale", y_scale)}, base, y->shape);
}

// The same of a QLinearMatMul, exactly as the reference: opfuse::FusedMatMulInteger's exact sums
// times the reference's f32 multiplier x_scale * w_scale / y_scale per column (its a_scale 1).
Result<Value*> qlinear_matmul_as_integer_anchor(Graph& graph, Node* node, float x_scale, float y_scale) {
  const Tensor& w_scale = *constant_data(node->input(kQWScale));
  const int64_t n = constant_data(node->input(kQW))->dim(1);
  std::vector<float> multiplier(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    const float ws = static_cast<float>(w_scale.get_double(w_scale.numel() == 1 ? 0 : j));
    multiplier[j] = x_scale * ws / y_scale;
  }
  const std::string base = node->name();
  std::vector<Value*> inputs = {node->input(kQX), node->input(kQW), nullptr, nullptr,
                                add_scalar(graph, base + "_unit_scale", 1.0f), node->input(kQXZero),
                                graph.add_constant(graph.unique_value_name(base + "_multiplier"),
                                                   Tensor::from_vector<float>({n}, multiplier)),
                                node->input(kQWZero)};
  return add_op(graph, "FusedMatMulInteger", std::move(inputs), base, node->output(0)->shape, DType::kF32, {},
                base + "_fused", std::string(kFusedDomain));
}

Status rewrite_qlinear(Graph& graph, Node* node) {
  const bool conv = node->op_type() == "QLinearConv";
  const auto scalar = [&](int i) { return static_cast<float>(constant_data(node->input(static_cast<size_t>(i)))->get_double(0)); };
  const float x_scale = scalar(kQXScale), x_zero = scalar(kQXZero), y_scale = scalar(kQYScale), y_zero = scalar(kQYZero);
  Value* y = node->output(0);
  const std::string base = node->name();
  Value* q = nullptr;
  if (conv) {
    OPFUSE_ASSIGN_OR_RETURN(q, qlinear_conv_as_float(graph, node, x_scale, x_zero, y_scale));
  } else {
    OPFUSE_ASSIGN_OR_RETURN(q, qlinear_matmul_as_integer_anchor(graph, node, x_scale, y_scale));
  }
  // QuantizeLinear's steps (no NaN can reach them: the scales are finite constants).
  const bool u8 = y->dtype == DType::kU8;
  OPFUSE_ASSIGN_OR_RETURN(q, add_op(graph, "Round", {q}, base, y->shape));
  OPFUSE_ASSIGN_OR_RETURN(q, add_op(graph, "Add", {q, add_scalar(graph, base + "_y_zero", y_zero)}, base, y->shape));
  OPFUSE_ASSIGN_OR_RETURN(q, add_op(graph, "Clip", {q, add_scalar(graph, base + "_low", u8 ? 0.0f : -128.0f),
                                                    add_scalar(graph, base + "_high", u8 ? 255.0f : 127.0f)},
                                    base, y->shape));
  OPFUSE_ASSIGN_OR_RETURN(q, add_op(graph, "Cast", {q}, base, y->shape, y->dtype, {{"to", AttrValue(int64_t{u8 ? 2 : 3})}}));
  // The Cast takes over y's readers and name (a graph output keeps its name); the node dies in dce.
  const std::string name = y->name();
  OPFUSE_TRY(graph.rename_value(y, graph.unique_value_name(name + "_integer")));
  graph.replace_all_uses(y, q);
  return graph.rename_value(q, name);
}

// ---- QDQ MatMul and Conv (static quantization's QDQ form) -----------------------------------------
//
// MatMul(DequantizeLinear(QuantizeLinear(x, s, z), s, z), DequantizeLinear(Wq, ws, wz)) with one
// constant scale and zero point for the pair and constant 2-d weights (their scale and zero point
// per tensor or per column) becomes
//
//   xq = Cast(QuantizeLinear's steps as float ops)      (passes/quantize_steps.h: NaN to the lowest step)
//   y = opfuse::FusedMatMulInteger(xq, Wq, [bias], -, s, z, ws, wz)
//
// taking the constant bias Add after it, on cpu.gemm_i16. The reference dequantizes both operands
// in f32 and multiplies those; the anchor multiplies the exact integer sums by s * ws: within float
// rounding of it. The pair stays for the pair's other readers (quantize_pairs_in_fp32 takes it).
// A Conv of one group in the same form (weights [M, C, kh, kw] per tensor or per output channel)
// becomes opfuse::QuantizedConv(x, Wq, bias, -, ws, wz, s, z), which quantizes x itself, on
// cpu.conv_i16 where quantized_conv_refusal accepts the target.

// A MatMul's operands in the QDQ form (the refusal reasons below say what each must be).
struct QdqOperands {
  Node* q = nullptr;  // the pair's QuantizeLinear
  QuantizeParams x;
  Node* w = nullptr;  // the weights' DequantizeLinear
};

// The operands when `matmul` (or a Conv) reads a QuantizeLinear -> DequantizeLinear pair and
// dequantized weights, nullopt when it does not; `reason` says why such a node is not rewritten
// ("" if it is).
std::optional<QdqOperands> qdq_operands(const Node& matmul, std::string& reason) {
  reason.clear();
  const bool conv = matmul.op_type() == "Conv";
  const Node* dq = matmul.input(0) != nullptr ? matmul.input(0)->producer() : nullptr;
  Node* w = matmul.input(1) != nullptr ? matmul.input(1)->producer() : nullptr;
  if (!is_onnx_op(dq, "DequantizeLinear") || !is_onnx_op(w, "DequantizeLinear") || dq->input(0) == nullptr) return std::nullopt;
  Node* q = dq->input(0)->producer();
  if (!is_onnx_op(q, "QuantizeLinear")) return std::nullopt;
  QdqOperands out{q, {}, w};
  const DType qtype = q->output(0)->dtype;
  const auto xp = constant_quantize_params(*q, qtype), dxp = constant_quantize_params(*dq, qtype);
  if (q->input(0) == nullptr || q->input(0)->dtype != DType::kF32 || !xp || !dxp || xp->scale != dxp->scale ||
      xp->zero != dxp->zero) {
    reason = "x's QuantizeLinear -> DequantizeLinear pair has not one equal constant scale and zero point";
    return out;
  }
  out.x = *xp;
  const Tensor* wq = constant_data(w->input(0));
  if (wq == nullptr || !is_int8(wq->dtype()) || wq->rank() != (conv ? 4 : 2) || wq->numel() == 0) {
    reason = conv ? "the weights are not constant non-empty u8/i8 of a 2-d conv" : "the weights are not constant non-empty u8/i8 of rank 2";
    return out;
  }
  // Output channels: a MatMul's columns (axis 1), a Conv's first axis.
  const int64_t n = wq->dim(conv ? 0 : 1);
  const AttrReader attrs(*w);
  const int64_t axis = attrs.has("axis") ? attrs.get_int("axis") : 1;
  const bool per_channel_axis = conv ? axis == 0 || axis == -4 : axis == 1 || axis == -1;
  const Tensor* ws = constant_data(w->input(1));
  const Tensor* wz = w->input(2) != nullptr ? constant_data(w->input(2)) : nullptr;
  const auto per_channel_or_one = [&](const Tensor* t) {
    return t != nullptr && (t->numel() == 1 || (t->rank() == 1 && t->numel() == n && per_channel_axis));
  };
  if (!per_channel_or_one(ws) || ws->dtype() != DType::kF32 || (w->input(2) != nullptr && (!per_channel_or_one(wz) || wz->dtype() != wq->dtype())) ||
      (attrs.has("block_size") && attrs.get_int("block_size") != 0)) {
    reason = conv ? "the weights' scale and zero point are not constants per tensor or per output channel"
                  : "the weights' scale and zero point are not constants per tensor or per column";
    return out;
  }
  for (int64_t j = 0; j < ws->numel(); ++j) {
    if (!std::isfinite(ws->get_double(j))) {
      reason = "the weights' scale is not finite";
      return out;
    }
  }
  return out;
}

// `to` takes over `from`'s readers and name (a graph output keeps its name).
Status take_over(Graph& graph, Value* from, Value* to) {
  const std::string name = from->name();
  OPFUSE_TRY(graph.rename_value(from, graph.unique_value_name(name + "_replaced")));
  graph.replace_all_uses(from, to);
  return graph.rename_value(to, name);
}

// The QDQ MatMul `matmul` (qdq_operands passed) as the integer anchor; `quantized` caches each
// QuantizeLinear's integers as float ops, so products of one x (attention's Q, K, V) share them.
Status rewrite_qdq_matmul(Graph& graph, Node* matmul, const QdqOperands& ops, std::map<const Node*, Value*>& quantized) {
  Value*& xq = quantized[ops.q];
  if (xq == nullptr) {
    Value* x = ops.q->input(0);
    const std::string base = ops.q->name();
    OPFUSE_ASSIGN_OR_RETURN(Value * r, quantized_less_low(graph, x, ops.x, base));
    OPFUSE_ASSIGN_OR_RETURN(r, add_op(graph, "Add", {r, add_scalar(graph, base + "_low", ops.x.low())}, base, x->shape));
    OPFUSE_ASSIGN_OR_RETURN(xq, add_op(graph, "Cast", {r}, base, x->shape, ops.x.type,
                                       {{"to", AttrValue(int64_t{ops.x.type == DType::kU8 ? 2 : 3})}}));
  }
  Value* out = matmul->output(0);
  std::vector<Value*> inputs = {xq, ops.w->input(0), nullptr, nullptr, ops.q->input(1), ops.q->input(2),
                                ops.w->input(1), ops.w->input(2)};
  if (Node* add = bias_add_of(out, constant_data(ops.w->input(0))->dim(1))) {
    inputs[2] = add->input(1 - static_cast<size_t>(out->uses()[0].input_index));
    out = add->output(0);
  }
  while (inputs.back() == nullptr) inputs.pop_back();
  OPFUSE_ASSIGN_OR_RETURN(Value * product, add_op(graph, "FusedMatMulInteger", std::move(inputs), out->name(), out->shape,
                                                  DType::kF32, {}, matmul->name() + "_fused", std::string(kFusedDomain)));
  return take_over(graph, out, product);
}

// The QDQ Conv `conv` (qdq_operands passed) as one opfuse::QuantizedConv of the pair's float input
// with the pair's constant scale and zero point, taking the Conv's bias (constant by the time
// kernels are made: a DequantizeLinear of an int32 bias folds), on cpu.conv_i16. Within float
// rounding of the reference, which convolves the dequantized operands in float.
Status rewrite_qdq_conv(Graph& graph, Node* conv, const QdqOperands& ops) {
  std::vector<Value*> inputs = {ops.q->input(0), ops.w->input(0), conv->input(2), nullptr, ops.w->input(1),
                                ops.w->input(2), ops.q->input(1), ops.q->input(2)};
  while (inputs.back() == nullptr) inputs.pop_back();
  Value* out = conv->output(0);
  OPFUSE_ASSIGN_OR_RETURN(Value * product, add_op(graph, "QuantizedConv", std::move(inputs), out->name(), out->shape,
                                                  DType::kF32, conv->attrs, conv->name() + "_fused", std::string(kFusedDomain)));
  return take_over(graph, out, product);
}

}  // namespace

Result<bool> run_integer_products_in_fp32_pass(Graph& graph, PassContext& context) {
  if (!context.fusion.rule_enabled(kPass)) return false;
  bool changed = false;
  std::map<const Node*, Value*> quantized;  // QDQ MatMuls' x as integers, per QuantizeLinear
  for (Node* node : graph.nodes()) {
    if (!node->domain().empty()) continue;
    if (is_qlinear(*node)) {
      const std::string what = str_cat(node->op_type(), " '", node->name(),
                                       node->op_type() == "QLinearConv" ? "' as float32 ops" : "' as opfuse::FusedMatMulInteger");
      if (const std::string reason = qlinear_refusal_reason(*node); !reason.empty()) {
        context.decide(refusal(std::string(kPass), what, reason, {node->name()}));
        continue;
      }
      OPFUSE_TRY(rewrite_qlinear(graph, node));
      context.decide(application(std::string(kPass), what, {node->name()}));
      changed = true;
      continue;
    }
    if (node->op_type() == "Conv") {
      std::string reason;
      const std::optional<QdqOperands> ops = qdq_operands(*node, reason);
      if (!ops) continue;
      const std::string what = str_cat("Conv '", node->name(), "' of QDQ operands as opfuse::QuantizedConv");
      if (reason.empty()) reason = quantized_conv_refusal(*node, context.target);
      if (!reason.empty()) {
        context.decide(refusal(std::string(kPass), what, reason, {node->name()}));
        continue;
      }
      OPFUSE_TRY(rewrite_qdq_conv(graph, node, *ops));
      context.decide(application(std::string(kPass), what, {node->name()}, node->name() + "_fused"));
      changed = true;
      continue;
    }
    if (node->op_type() == "MatMul") {
      std::string reason;
      const std::optional<QdqOperands> ops = qdq_operands(*node, reason);
      if (!ops) continue;
      const std::string what = str_cat("MatMul '", node->name(), "' of QDQ operands as opfuse::FusedMatMulInteger");
      if (!reason.empty()) {
        context.decide(refusal(std::string(kPass), what, reason, {node->name()}));
        continue;
      }
      OPFUSE_TRY(rewrite_qdq_matmul(graph, node, *ops, quantized));
      context.decide(application(std::string(kPass), what, {node->name()}, node->name() + "_fused"));
      changed = true;
      continue;
    }
    if (node->op_type() != "MatMulInteger" && node->op_type() != "ConvInteger") continue;
    const bool conv = is_conv(*node);
    const std::string what = str_cat(node->op_type(), " '", node->name(), conv ? "' as a float32 Conv" : "' as opfuse::FusedMatMulInteger");
    if (const std::string reason = refusal_reason(*node); !reason.empty()) {
      context.decide(refusal(std::string(kPass), what, reason, {node->name()}));
      continue;
    }
    if (constant_data(node->input(1)) == nullptr) {
      OPFUSE_TRY(rewrite_as_float_matmul(graph, node));
      context.decide(application(std::string(kPass), str_cat("MatMulInteger '", node->name(), "' of computed operands as a float32 MatMul"),
                                 {node->name()}, node->name() + "_f32"));
      changed = true;
      continue;
    }
    const std::optional<Dequantization> dq = dequantization_of(*node, channels_of(*node, *constant_data(node->input(1))));
    if (Node* q = conv ? dynamic_quantization_of(*node, dq, context.target) : nullptr) {
      OPFUSE_TRY(rewrite_as_dynamic_quantized_conv(graph, node, q, *dq));
      context.decide(application(std::string(kPass), str_cat("ConvInteger '", node->name(), "' with its quantizer and dequantization as opfuse::QuantizedConv"),
                                 {node->name()}, node->name() + "_fused"));
      changed = true;
      continue;
    }
    if (conv && context.target.isa >= IsaTier::kAvx512CoreVnni) {
      context.decide(refusal(std::string(kPass), what,
                             "the target has VNNI: onednn.conv_integer's exact int8 convolution is faster there",
                             {node->name()}));
      continue;
    }
    if (conv) {
      OPFUSE_TRY(rewrite_as_float_conv(graph, node, dq));
    } else {
      OPFUSE_TRY(rewrite_as_integer_anchor(graph, node, dq));
    }
    context.decide(application(std::string(kPass), str_cat(what, dq ? (conv ? ", scales folded into its operands" : ", with its dequantization") : ""),
                               {node->name()}, node->name() + (conv ? "_f32" : "_fused")));
    changed = true;
  }
  if (changed) OPFUSE_TRY(graph.topological_sort());
  return changed;
}

}  // namespace opfuse
