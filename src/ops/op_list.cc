#include "ops/op_list.h"

#include <cmath>
#include <set>
#include <string>

#include "ops/fused.h"
#include "ops/fused_region.h"

namespace opfuse {

namespace {

// OpTraits::finite_preserving, for these ops (ONNX names; the opfuse ones are fusions of them).
// Sigmoid, Tanh, Elu, Gelu, Softmax are bounded exponentials; BatchNormalization and the
// LayerNorms divide by sqrt(var + eps), eps > 0.
const std::set<std::string, std::less<>> kFinitePreserving = {
    "Conv", "ConvTranspose", "MatMul", "Gemm", "Add", "Sub", "Mul", "Neg", "Abs", "Max", "Min",
    "Relu", "LeakyRelu", "PRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Elu",
    "Gelu", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Concat", "Reshape",
    "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Resize", "Slice", "Split", "Pad",
    "BatchNormalization", "Softmax", "LayerNormalization", "Gather", "Expand", "Tile", "Shape",
    // bounded (atan) or logarithmic (asinh) growth; Shrink is shifts and selects
    "Atan", "Asinh", "Shrink",
    // DynamicQuantizeLinear's scale is the range over 255, finite unless the range itself
    // overflows (values beyond +-1.7e38: the same limit as a Conv's sums, runtime/non_finite.h)
    "DynamicQuantizeLinear",
    // opfuse domain
    "FusedConv", "FusedConvTranspose", "FusedMatMul", "FusedGemm", "BlockedConv", "BlockedConvDepthwise", "ToBlocked",
    "FromBlocked", "Reblock", "SkipLayerNormalization", "ChannelGather", "FusedMatMulInteger",
    "QuantizedConv"};

bool all_finite_values(const Tensor& t) {
  if (!is_float(t.dtype())) return true;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (!std::isfinite(t.get_double(i))) return false;
  }
  return true;
}

// A region whose members all preserve finiteness and whose constants are finite: the BN-as-
// Mul+Add + Relu regions between a DenseNet's convs, so the convs reading them may keep relu in
// oneDNN's kernel.
bool region_is_finite_preserving(const Node& node) {
  auto body = fused_region_body(node);
  if (!body.is_ok()) return false;
  for (const Value* v : (*body)->values()) {
    if (v->is_constant() && !all_finite_values(*v->constant())) return false;
  }
  for (const Node* member : (*body)->nodes()) {
    if (!is_finite_preserving(*member)) return false;
  }
  return true;
}

}  // namespace

bool is_finite_preserving(const Node& node) {
  if (node.def().traits.finite_preserving) return true;
  if (node.domain() == kFusedDomain && node.op_type() == kFusedRegionOp) return region_is_finite_preserving(node);
  if (!node.domain().empty() || node.op_type() != "Div" || node.inputs().size() != 2) return false;
  const Value* divisor = node.input(1);
  const Tensor* t = divisor != nullptr && divisor->is_constant() ? divisor->constant() : nullptr;
  if (t == nullptr || !is_float(t->dtype())) return false;
  for (int64_t i = 0; i < t->numel(); ++i) {
    const double v = t->get_double(i);
    if (!std::isfinite(v) || std::abs(v) < 1) return false;
  }
  return true;
}

std::vector<OpDef> builtin_ops() {
  std::vector<OpDef> all;
  for (auto family : {elementwise_ops, nn_ops, reduction_ops, tensor_ops, resize_ops, quantization_ops, control_flow_ops, rnn_ops, loss_ops, linalg_ops, fused_ops,
                      fused_region_ops, fused_matmul_ops,
                      fused_attention_ops, skip_layer_norm_ops,
                      layout_ops, channel_gather_ops}) {
    for (OpDef& def : family()) all.push_back(std::move(def));
  }
  for (OpDef& def : all) def.traits.finite_preserving = kFinitePreserving.count(def.name) > 0;
  return all;
}

}  // namespace opfuse
