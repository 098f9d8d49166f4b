// Fused anchors in opfuse's own domain "opfuse" (ops/fused.cc). An anchor with an epilogue:
//   opfuse::FusedConv(X, W, [B], [R], [S]) {Conv's attributes, epilogue = ["relu"] ...}
// computes Y = Conv(X * S, W, B) and then applies the post-ops of `epilogue` in order,
// elementwise. S, when given, scales X per input channel (see kInputScale).
// A post-op is written "name" or "name:p1:p2" (its float parameters, %.9g so they round-trip):
//   relu | leaky_relu:alpha | clip:min:max | sigmoid | sigmoid_mul (x * sigmoid(x), SiLU) |
//   hardswish | hardsigmoid:alpha:beta | tanh | elu:alpha | gelu_erf | gelu_tanh |
//   linear:a:b (a * y + b: scalar Mul/Div/Add/Sub) | add (y += R, the residual: input 3, Y's shape).
// The other anchors with epilogues (ops/fused_matmul.cc: FusedMatMul, FusedGemm) share the
// vocabulary, the residual-as-input-3 convention and apply_epilogue.
// The vocabulary is one table (kPostOps below): the fuser, the reference kernel and the oneDNN
// kernel all read it.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ops/op_def.h"

namespace opfuse {

constexpr std::string_view kFusedDomain = "opfuse";

// How a post-op maps to oneDNN (kernels/cpu/onednn_conv.cc turns it into a dnnl::algorithm):
// an eltwise post-op with alpha/beta, or a binary add of the residual input.
enum class DnnlPostOp {
  kNone, kEltwiseRelu, kEltwiseClip, kEltwiseLogistic, kEltwiseSwish, kEltwiseHardswish,
  kEltwiseTanh, kEltwiseElu, kEltwiseGeluErf, kBinaryAdd,
  kEltwiseGeluTanh, kEltwiseLinear,
  kEltwiseHardsigmoid,  // oneDNN 2.6 has none: linear(alpha, beta) then clip(0, 1)
};

struct PostOpSpec {
  std::string_view name;     // "clip"
  std::string_view onnx_op;  // the single ONNX op it absorbs ("Clip"); "" for patterns (add, sigmoid_mul)
  int num_params;
  float (*apply)(float x, const float* params);  // null for add (needs the residual)
  DnnlPostOp dnnl;
  // oneDNN's alpha/beta from the params (identity mapping unless stated in the table).
  float (*dnnl_alpha)(const float* params);
  float (*dnnl_beta)(const float* params);
  // The params of the ONNX op this absorbs (attributes, constant inputs), or nullopt when that
  // node cannot become this post-op (non-constant Clip bounds, Gelu's tanh approximation).
  std::optional<std::vector<float>> (*params_of)(const Node& node);
};

// Every post-op, in one table.
std::span<const PostOpSpec> post_op_specs();
const PostOpSpec* find_post_op(std::string_view name);

// One parsed entry of an epilogue list.
struct PostOp {
  const PostOpSpec* spec = nullptr;
  std::vector<float> params;
};
// "clip:0:6" -> {clip, [0, 6]}; nullopt for unknown names or a wrong parameter count.
std::optional<PostOp> parse_post_op(std::string_view text);
std::string format_post_op(std::string_view name, const std::vector<float>& params);
// The node's `epilogue` attribute parsed; an error names the node and the bad entry.
Result<std::vector<PostOp>> read_epilogue(const Node& node);

// FusedConv's (and BlockedConv's) optional input 4, S: a per-input-channel scale, so the node
// computes Conv(X * S, W, B). patterns/input_scale.cc folds a squeeze-excitation Mul into the
// conv reading it this way, and the oneDNN kernels apply it to the weights instead of to X
// (Conv(X * S, W) = Conv(X, W * S) per input channel). S holds X's C channels: plain, every dim
// is 1 but the channel axis, C (right-aligned against X's rank); blocked (BlockedConv only),
// [1, Cb, 1, 1, b] like a blocked per-channel tensor. Either way its first C floats are the
// scales in channel order.
constexpr size_t kInputScale = 4;
// Whether `s` is a plain per-channel vector of `channels` for a rank-`rank` X.
bool is_channel_vector(const std::vector<int64_t>& s, size_t rank, int64_t channels);
// Shape inference's part for S: f32, and a plain per-channel vector of `channels` (or, when
// `blocked_lanes` > 0, the blocked [1, ceil(C/lanes), 1, 1, lanes] form too).
Status infer_input_scale(InferContext& ctx, size_t x_rank, int64_t channels, int64_t blocked_lanes);
// X * S per channel (X plain [N, C, ...]; S's first C floats), in a new tensor: the
// references' first step.
Result<Tensor> scale_input_channels(const Tensor& x, const Tensor& s);

// Shape inference's part for an anchor with an epilogue (after the anchor's own inference set
// output 0): the epilogue parses, names "add" exactly once iff the residual input 3 is given,
// and the residual has the output's dtype and shape.
Status infer_epilogue(InferContext& ctx);
// The reference: applies the node's epilogue in place to output 0 (the anchor's result), in
// order; "add" reads the residual input 3.
Status apply_epilogue(KernelContext& ctx);

}  // namespace opfuse
