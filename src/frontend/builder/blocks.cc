#include "frontend/builder/blocks.h"

#include <cmath>

namespace opfuse {

Var activate(ModelBuilder& b, Var x, Activation act) {
  switch (act) {
    case Activation::kNone: return x;
    case Activation::kRelu: return b.relu(x);
    case Activation::kRelu6: return b.relu6(x);
    case Activation::kHardSwish: return b.hard_swish(x);
    case Activation::kSilu: return b.silu(x);
    case Activation::kGelu: return b.gelu(x);
    case Activation::kSigmoid: return b.sigmoid(x);
    case Activation::kTanh: return b.tanh(x);
  }
  return x;
}

Var conv2d_bn_act(ModelBuilder& b, const std::string& name, Var x, int64_t out_channels,
                  int64_t kernel, const ConvOptions& o, Activation act) {
  ModelBuilder::Scope scope(b, name);
  return activate(b, b.batch_norm(b.conv2d(x, out_channels, kernel, o)), act);
}

Var dense_bn_act(ModelBuilder& b, const std::string& name, Var x, int64_t out_features, Activation act) {
  ModelBuilder::Scope scope(b, name);
  return activate(b, b.batch_norm(b.linear(x, out_features, /*bias=*/false)), act);
}

Var bottleneck_block(ModelBuilder& b, const std::string& name, Var x, int64_t width, int64_t stride,
                     int64_t dilation) {
  ModelBuilder::Scope scope(b, name);
  const int64_t out_channels = width * 4;
  Var h = conv2d_bn_act(b, "conv1", x, width, 1, {.bias = false});
  h = conv2d_bn_act(b, "conv2", h, width, 3, {.stride = stride, .dilation = dilation, .bias = false});
  h = conv2d_bn_act(b, "conv3", h, out_channels, 1, {.bias = false}, Activation::kNone);
  Var shortcut = x;
  if (stride != 1 || x.dim(1) != out_channels) {
    shortcut = conv2d_bn_act(b, "downsample", x, out_channels, 1, {.stride = stride, .bias = false},
                             Activation::kNone);
  }
  return b.relu(h + shortcut);
}

Var basic_block(ModelBuilder& b, const std::string& name, Var x, int64_t channels, int64_t stride) {
  ModelBuilder::Scope scope(b, name);
  Var h = conv2d_bn_act(b, "conv1", x, channels, 3, {.stride = stride, .bias = false});
  h = conv2d_bn_act(b, "conv2", h, channels, 3, {.bias = false}, Activation::kNone);
  Var shortcut = x;
  if (stride != 1 || x.dim(1) != channels) {
    shortcut = conv2d_bn_act(b, "downsample", x, channels, 1, {.stride = stride, .bias = false},
                             Activation::kNone);
  }
  return b.relu(h + shortcut);
}

Var depthwise_separable_block(ModelBuilder& b, const std::string& name, Var x, int64_t out_channels,
                              int64_t stride, int64_t dilation, Activation act) {
  ModelBuilder::Scope scope(b, name);
  const int64_t c = x.dim(1);
  Var h = conv2d_bn_act(b, "depthwise", x, c, 3,
                        {.stride = stride, .dilation = dilation, .group = c, .bias = false}, act);
  return conv2d_bn_act(b, "pointwise", h, out_channels, 1, {.bias = false}, act);
}

Var inverted_residual_block(ModelBuilder& b, const std::string& name, Var x, int64_t out_channels,
                            int64_t expand_ratio, int64_t stride, int64_t dilation) {
  ModelBuilder::Scope scope(b, name);
  const int64_t in_channels = x.dim(1);
  const int64_t hidden = in_channels * expand_ratio;
  Var h = x;
  if (expand_ratio != 1) {
    h = conv2d_bn_act(b, "expand", h, hidden, 1, {.bias = false}, Activation::kRelu6);
  }
  h = conv2d_bn_act(b, "depthwise", h, hidden, 3,
                    {.stride = stride, .dilation = dilation, .group = hidden, .bias = false},
                    Activation::kRelu6);
  h = conv2d_bn_act(b, "project", h, out_channels, 1, {.bias = false}, Activation::kNone);
  if (stride == 1 && in_channels == out_channels) h = h + x;
  return h;
}

Var multi_head_attention(ModelBuilder& b, const std::string& name, Var x, int64_t num_heads) {
  ModelBuilder::Scope scope(b, name);
  const int64_t batch = x.dim(0), seq = x.dim(1), d_model = x.dim(2);
  if (x.rank() != 3 || batch <= 0 || seq <= 0 || d_model <= 0) {
    return b.fail(Status::user_error(str_cat(b.scoped("attention"), ": input '", x.name(),
                                             "' must be [batch, seq, d_model] with known dims")));
  }
  if (num_heads <= 0 || d_model % num_heads != 0) {
    return b.fail(Status::user_error(str_cat(b.scoped("attention"), ": ", num_heads,
                                             " heads do not divide d_model ", d_model)));
  }
  const int64_t d_head = d_model / num_heads;
  // [b, s, d] -> [b, s, h, dh] -> [b, h, s, dh]
  auto heads = [&](const std::string& which) {
    ModelBuilder::Scope s(b, which);
    Var y = b.linear(x, d_model);
    return b.transpose(b.reshape(y, {batch, seq, num_heads, d_head}), {0, 2, 1, 3});
  };
  Var q = heads("query"), k = heads("key"), v = heads("value");
  Var scores = b.matmul(q, b.transpose(k, {0, 1, 3, 2})) / std::sqrt(static_cast<double>(d_head));
  Var context = b.matmul(b.softmax(scores, -1), v);
  context = b.reshape(b.transpose(context, {0, 2, 1, 3}), {batch, seq, d_model});
  ModelBuilder::Scope out(b, "output");
  return b.linear(context, d_model);
}

Var transformer_encoder_layer(ModelBuilder& b, const std::string& name, Var x, int64_t num_heads,
                              int64_t ffn_dim) {
  ModelBuilder::Scope scope(b, name);
  Var h;
  {
    ModelBuilder::Scope s(b, "attention");
    h = b.layer_norm(x + multi_head_attention(b, "self", x, num_heads));
  }
  ModelBuilder::Scope s(b, "ffn");
  Var f;
  {
    ModelBuilder::Scope s1(b, "intermediate");
    f = b.gelu(b.linear(h, ffn_dim));
  }
  ModelBuilder::Scope s2(b, "output");
  return b.layer_norm(h + b.linear(f, x.dim(2)));
}

}  // namespace opfuse
