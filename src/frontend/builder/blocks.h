// Building blocks users expect (the seeds' Cells: Conv2dBnAct, DenseBnAct ...), each a few
// registry ops made through ModelBuilder, named under a scope.
#pragma once

#include <string>

#include "frontend/builder/model_builder.h"

namespace opfuse {

enum class Activation { kNone, kRelu, kRelu6, kHardSwish, kSilu, kGelu, kSigmoid, kTanh };
Var activate(ModelBuilder& b, Var x, Activation act);

// Conv (no bias: the BN shift is its bias) -> BatchNormalization -> activation.
Var conv2d_bn_act(ModelBuilder& b, const std::string& name, Var x, int64_t out_channels,
                  int64_t kernel, const ConvOptions& o = {.bias = false},
                  Activation act = Activation::kRelu);

// Linear -> BatchNormalization (over features of a [N, F] input) -> activation.
Var dense_bn_act(ModelBuilder& b, const std::string& name, Var x, int64_t out_features,
                 Activation act = Activation::kRelu);

// ResNet v1.5 bottleneck: 1x1 reduce, 3x3 (stride, dilation), 1x1 expand (x4), projection
// shortcut when the shape changes, residual Add, ReLU.
Var bottleneck_block(ModelBuilder& b, const std::string& name, Var x, int64_t width,
                     int64_t stride = 1, int64_t dilation = 1);

// ResNet basic block: two 3x3 convs, residual Add, ReLU.
Var basic_block(ModelBuilder& b, const std::string& name, Var x, int64_t channels, int64_t stride = 1);

// MobileNet depthwise-separable block: depthwise 3x3 conv+BN+act, pointwise 1x1 conv+BN+act.
Var depthwise_separable_block(ModelBuilder& b, const std::string& name, Var x,
                              int64_t out_channels, int64_t stride = 1, int64_t dilation = 1,
                              Activation act = Activation::kRelu6);

// MobileNetV2 inverted residual: 1x1 expand (x expand_ratio) + BN + ReLU6, depthwise 3x3
// (stride, dilation) + BN + ReLU6, 1x1 project + BN, residual Add when shapes allow.
Var inverted_residual_block(ModelBuilder& b, const std::string& name, Var x, int64_t out_channels,
                            int64_t expand_ratio, int64_t stride = 1, int64_t dilation = 1);

// Multi-head self-attention on x [batch, seq, d_model] (static dims):
// softmax(Q K^T / sqrt(d_head)) V per head, then the output projection.
Var multi_head_attention(ModelBuilder& b, const std::string& name, Var x, int64_t num_heads);

// Post-norm transformer encoder layer (BERT): x + MHA -> LayerNorm -> x + FFN(GELU) -> LayerNorm.
Var transformer_encoder_layer(ModelBuilder& b, const std::string& name, Var x, int64_t num_heads,
                              int64_t ffn_dim);

}  // namespace opfuse
