// MatMulInteger with constant weights, computed as a float32 MatMul. ONNX Runtime's dynamic
// quantizer (quantize_dynamic, and the "*_quantized.onnx" transformers made with it) writes each
// weight product as
//
//   before                                                  after
//     xq, s, z = DynamicQuantizeLinear(x)                      xq, s, z = DynamicQuantizeLinear(x)
//     y = MatMulInteger(xq, Wq, z, Wz)        (int32)          xf = Cast(xq, to=float) - Cast(z, to=float)
//     yf = Cast(y, to=float)                                   yf = MatMul(xf, W)  W = Wq - Wz in float32,
//     out = Mul(yf, s * Ws)                                    out = Mul(yf, s * Ws)      packed once by the kernel
//
// The int32 sums are only ever read through Casts to float, so they need not exist. Without this
// pass MatMulInteger runs on the reference loops; with it the product runs on the float32 GEMM
// kernels of the target (cpu.gemm with weights packed once, or oneDNN) and fuses like any MatMul.
// Not an int8 kernel: as fast as the float32 model, not faster (below VNNI, oneDNN's u8 x s8
// multiply-adds saturate, and an exact 16-bit product would gain at most 1.46x on a Zen 3,
// docs/benchmarks.md).
//
// Exact while every partial sum stays below 2^24 in magnitude: the operands are integers below
// 2^8 (products below 2^17), and float32 adds integers exactly up to there. Beyond, the sum is off
// by its float rounding (relative 6e-8 per addition), as the Cast of a larger int32 to float would
// round it too. `--disable integer_matmul_in_fp32` keeps the integer reference kernel.
#include "ops/op_def.h"
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace opfuse {
namespace {

constexpr std::string_view kPass = "integer_matmul_in_fp32";
constexpr int64_t kOnnxFloat = 1;

bool is_int8(DType t) { return t == DType::kU8 || t == DType::kI8; }

bool is_cast_to_float(const Node& node) {
  if (!node.domain().empty() || node.op_type() != "Cast") return false;
  const auto it = node.attrs.find("to");
  return it != node.attrs.end() && std::holds_alternative<int64_t>(it->second) &&
         std::get<int64_t>(it->second) == kOnnxFloat;
}

// Why `node` is not rewritten, or "" when it is: constant 2-d weights, a per-tensor zero point of
// A, a per-tensor or per-column one of B, and int32 sums read only by Casts to float.
std::string refusal_reason(const Node& node) {
  const Value* a = node.input(0);
  const Tensor* w = constant_data(node.input(1));
  if (a == nullptr || !is_int8(a->dtype)) return "A is not u8/i8";
  if (w == nullptr || w->rank() != 2 || !is_int8(w->dtype())) return "B is not constant u8/i8 weights of rank 2";
  if (const Value* az = node.input(2); az != nullptr) {
    const auto dims = az->shape ? static_dims(*az->shape) : std::nullopt;
    if (!dims || numel_of(*dims) != 1) return "A's zero point is not one value (per-row zero points stay integer)";
  }
  if (const Value* wz = node.input(3); wz != nullptr) {
    const Tensor* t = constant_data(wz);
    if (t == nullptr || (t->numel() != 1 && (t->rank() > 2 || t->numel() != w->dim(1)))) {
      return "B's zero point is not a constant per-tensor or per-column one";
    }
  }
  const Value* y = node.output(0);
  if (y->is_graph_output()) return "the int32 sums are a graph output";
  for (const Use& use : y->uses()) {
    if (!is_cast_to_float(*use.node)) return str_cat("the int32 sums are read by ", node_label(*use.node));
  }
  return "";
}

// W - W_zero in float32: [K, N], the zero point per tensor or per column.
Result<Tensor> shifted_weights(const Tensor& w, const Tensor* w_zero) {
  const int64_t k = w.dim(0), n = w.dim(1);
  OPFUSE_ASSIGN_OR_RETURN(Tensor out, Tensor::uninitialized(DType::kF32, {k, n}, "integer_matmul_in_fp32 weights"));
  float* to = out.data<float>();
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t zero = w_zero == nullptr ? 0 : w_zero->get_int(w_zero->numel() == 1 ? 0 : j);
      to[i * n + j] = static_cast<float>(w.get_int(i * n + j) - zero);
    }
  }
  return out;
}

Result<Value*> cast_to_float(Graph& graph, Value* v) {
  OPFUSE_ASSIGN_OR_RETURN(Node * cast, graph.add_node("Cast", {v}, {graph.unique_value_name(v->name() + "_f32")},
                                                      {{"to", AttrValue(kOnnxFloat)}}));
  cast->output(0)->dtype = DType::kF32;
  cast->output(0)->shape = v->shape;
  return cast->output(0);
}

}  // namespace

Result<bool> run_integer_matmul_in_fp32_pass(Graph& graph, PassContext& context) {
  if (!context.fusion.rule_enabled(kPass)) return false;
  bool changed = false;
  for (Node* node : graph.nodes()) {
    if (!node->domain().empty() || node->op_type() != "MatMulInteger") continue;
    const std::string what = str_cat("MatMulInteger '", node->name(), "' as a float32 MatMul");
    if (const std::string reason = refusal_reason(*node); !reason.empty()) {
      context.decide(refusal(std::string(kPass), what, reason, {node->name()}));
      continue;
    }
    OPFUSE_ASSIGN_OR_RETURN(Tensor w, shifted_weights(*constant_data(node->input(1)), constant_data(node->input(3))));
    Value* weights = graph.add_constant(graph.unique_value_name(node->input(1)->name() + "_f32"), std::move(w));
    OPFUSE_ASSIGN_OR_RETURN(Value * a, cast_to_float(graph, node->input(0)));
    if (Value* az = node->input(2); az != nullptr) {
      OPFUSE_ASSIGN_OR_RETURN(Value * zero, cast_to_float(graph, az));
      OPFUSE_ASSIGN_OR_RETURN(Node * sub, graph.add_node("Sub", {a, zero}, {graph.unique_value_name(a->name() + "_centred")}));
      sub->output(0)->dtype = DType::kF32;
      sub->output(0)->shape = a->shape;
      a = sub->output(0);
    }
    Value* y = node->output(0);
    OPFUSE_ASSIGN_OR_RETURN(Node * matmul, graph.add_node("MatMul", {a, weights}, {graph.unique_value_name(y->name() + "_f32")},
                                                          {}, node->name() + "_f32"));
    matmul->output(0)->dtype = DType::kF32;
    matmul->output(0)->shape = y->shape;
    // The Casts now cast float32 to float32, which simplify drops; the MatMulInteger dies in dce.
    for (const Use& use : std::vector<Use>(y->uses())) graph.set_input(use.node, static_cast<size_t>(use.input_index), matmul->output(0));
    context.decide(application(std::string(kPass), what, {node->name()}, matmul->name()));
    changed = true;
  }
  if (changed) OPFUSE_TRY(graph.topological_sort());
  return changed;
}

}  // namespace opfuse
