// The built-in operator families. Each family file returns its records; adding an op means
// adding its record to its family's list (and its test).
#pragma once

#include <vector>

#include "ops/op_def.h"

namespace opfuse {

std::vector<OpDef> elementwise_ops();  // ops/elementwise.cc: unary, binary, activations, Where, Cast
std::vector<OpDef> nn_ops();           // ops/nn.cc: Conv, ConvTranspose, pools, BatchNorm, MatMul, Gemm
std::vector<OpDef> reduction_ops();    // ops/reduction.cc: Reduce*, Softmax, LayerNormalization
std::vector<OpDef> tensor_ops();       // ops/tensor.cc: Reshape, Transpose, Concat, Slice, Gather, Pad ...
std::vector<OpDef> resize_ops();
// ops/quantize_common.cc: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
// ConvInteger, QLinearMatMul, QLinearConv
std::vector<OpDef> quantization_ops();
std::vector<OpDef> control_flow_ops();  // ops/control_flow.cc: If, Loop, Scan (subgraphs)
std::vector<OpDef> rnn_ops();          // ops/rnn.cc: LSTM, GRU, RNN
std::vector<OpDef> linalg_ops();  // ops/linalg.cc: Det, Einsum
std::vector<OpDef> loss_ops();  // ops/loss.cc: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
std::vector<OpDef> fused_region_ops();  // ops/fused_region.cc: opfuse::FusedRegion (region fusion)
std::vector<OpDef> fused_matmul_ops();  // ops/fused_matmul.cc: opfuse::FusedMatMul, FusedGemm
std::vector<OpDef> fused_attention_ops();  // ops/fused_attention.cc: opfuse::FusedAttention
std::vector<OpDef> skip_layer_norm_ops();  // ops/skip_layer_norm.cc: opfuse::SkipLayerNormalization
std::vector<OpDef> channel_gather_ops();  // ops/channel_gather.cc: opfuse::ChannelGather (channel shuffles)
std::vector<OpDef> layout_ops();       // ops/layout_ops.cc: opfuse::ToBlocked, FromBlocked, BlockedConv (O3)
std::vector<OpDef> fused_ops();        // ops/fused.cc: opfuse::FusedConv (anchors with epilogues)       // ops/resize.cc: Resize (nearest, linear, cubic)

// Every built-in record, in family order.
std::vector<OpDef> builtin_ops();

}  // namespace opfuse
