// A QuantizeLinear -> DequantizeLinear pair with the same per-tensor constant scale and zero
// point, computed as float ops. Static quantization's QDQ form (onnxruntime's quantize_static
// default, and most exporters' quantized models) puts such a pair on every activation a
// quantized op reads, and DequantizeLinear on the constant weights (which constant_fold turns
// into float weights). The pair rounds x to the quantization grid; as float ops
//
//     q = Clip(Round(x / s) + z, lo, hi)                         (QuantizeLinear, NaN still NaN)
//     y = (Shrink(q - lo) + (lo - z)) * s                       (NaN to the lowest, then DequantizeLinear)
//
// Shrink with lambd = bias = 0 is x for every x but 0 and NaN, which it makes 0 (ONNX: "otherwise
// 0"), so Shrink(q - lo) + lo is q with NaN turned into the lowest step, as QuantizeLinear's
// saturating conversion does, and the sum is q - z (integers below 2^9: exact; the steps are
// passes/quantize_steps.h's, shared with integer_products_in_fp32). That is exactly
// what the two reference kernels compute (the same division, rounding half to even, saturation
// and single-rounding dequantization), but in float ops only: region fusion makes it one
// generated kernel, and at O3 it stays in the blocked layout between convs, where the reference
// QuantizeLinear ran scalar on the plain layout (ResNet-50 in QDQ form: 53% of its run). (The
// NaN step was first Where(IsNaN(x / s), lo, q): its bool value kept two kernels and their
// reorders out of the f32 regions, 25 ms of a ResNet-50's 90.)
// The QuantizeLinear stays when something else reads its integers.
#include <optional>

#include "ops/op_def.h"
#include "passes/pass_util.h"
#include "passes/passes.h"
#include "passes/quantize_steps.h"

namespace opfuse {
namespace {

constexpr std::string_view kPass = "quantize_pairs_in_fp32";

bool is_op(const Node* node, std::string_view op) {
  return node != nullptr && node->domain().empty() && node->op_type() == op;
}

// Why DequantizeLinear `dq`, which reads a QuantizeLinear, is not rewritten, or "": that
// quantizes f32, and both have the same constant per-tensor scale and u8/i8 zero point.
std::string refusal_reason(const Node& dq) {
  const Node* q = dq.input(0)->producer();
  if (q->input(0) == nullptr || q->input(0)->dtype != DType::kF32) return "the quantized values are not f32";
  // The integers' dtype is the output's (a zero point's, or opset 21's output_dtype, else u8).
  const DType qtype = q->output(0)->dtype;
  if (qtype != DType::kU8 && qtype != DType::kI8) return "the quantized values are not u8/i8";
  const auto p = constant_quantize_params(*q, qtype), dp = constant_quantize_params(dq, qtype);
  if (!p || !dp) return "the scales and zero points are not constants of one value";
  if (p->scale != dp->scale) return "the scales are not one equal constant";
  if (p->zero != dp->zero) return "the zero points are not one equal constant";
  return "";
}

}  // namespace

Result<bool> run_quantize_pairs_in_fp32_pass(Graph& graph, PassContext& context) {
  if (!context.fusion.rule_enabled(kPass)) return false;
  bool changed = false;
  for (Node* dq : graph.nodes()) {
    // A DequantizeLinear of constants, or of integers from elsewhere, is not this rule's.
    const Node* q = is_op(dq, "DequantizeLinear") && dq->input(0) != nullptr ? dq->input(0)->producer() : nullptr;
    if (!is_op(q, "QuantizeLinear")) continue;
    const std::string what = str_cat("DequantizeLinear '", dq->name(), "' of a QuantizeLinear as float ops");
    if (const std::string reason = refusal_reason(*dq); !reason.empty()) {
      context.decide(refusal(std::string(kPass), what, reason, {dq->name()}));
      continue;
    }
    Value* x = q->input(0);
    const QuantizeParams p = *constant_quantize_params(*q, q->output(0)->dtype);
    const std::string base = dq->name();
    OPFUSE_ASSIGN_OR_RETURN(Value * r, quantized_less_low(graph, x, p, base));
    const auto op = [&](const char* type, Value* in, float v) -> Result<Value*> {
      Value* c = graph.add_constant(graph.unique_value_name(str_cat(base, "_", type, "_operand")), Tensor::scalar<float>(v));
      OPFUSE_ASSIGN_OR_RETURN(Node * n, graph.add_node(type, {in, c}, {graph.unique_value_name(str_cat(base, "_", type))}));
      n->output(0)->dtype = DType::kF32;
      n->output(0)->shape = x->shape;
      return n->output(0);
    };
    OPFUSE_ASSIGN_OR_RETURN(r, op("Add", r, p.low() - p.zero));  // q - z
    OPFUSE_ASSIGN_OR_RETURN(Value * y, op("Mul", r, p.scale));
    // y takes over the DequantizeLinear's readers and name (a graph output keeps its name).
    Value* old = dq->output(0);
    const std::string name = old->name();
    OPFUSE_TRY(graph.rename_value(old, graph.unique_value_name(name + "_reference")));
    graph.replace_all_uses(old, y);
    OPFUSE_TRY(graph.rename_value(y, name));
    context.decide(application(std::string(kPass), what, {q->name(), dq->name()}));
    changed = true;
  }
  if (changed) OPFUSE_TRY(graph.topological_sort());
  return changed;
}

}  // namespace opfuse
