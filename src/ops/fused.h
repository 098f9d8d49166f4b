// Fused anchors in opfuse's own domain "opfuse" (ops/fused.cc). An anchor with an epilogue:
//   opfuse::FusedConv(X, W, [B], [R], [S]) {Conv's attributes, epilogue = ["relu"] ...}
// computes Y = Conv(X * S, W, B) and then applies the post-ops of `epilogue` in order,
// elementwise. S, when given, scales X per input channel (see kInputScale).
// A post-op is written "name" or "name:p1:p2" (its float parameters, %.9g so they round-trip):
//   relu | leaky_relu:alpha | clip:min:max | sigmoid | sigmoid_mul (x * sigmoid(x), SiLU) |
//   hardswish | hardsigmoid:alpha:beta | tanh | elu:alpha | gelu_erf | gelu_tanh |
//   linear:a:b (a * y + b: scalar Mul/Div/Add/Sub) | add (y += R, the residual: input 3, Y's shape)
//   | one per other activation op record: selu:alpha:gamma | celu:alpha | thresholded_relu:alpha
//   | softplus | softsign | mish.
// The other anchors with epilogues (ops/fused_matmul.cc: FusedMatMul, FusedGemm) share the
// vocabulary, the residual-as-input-3 convention and apply_epilogue.
// The vocabulary is one table (post_op_specs below): the fuser, the reference kernel, the vector
// epilogue and the oneDNN kernels all read it.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ops/op_def.h"
#include "ops/scalar_expr.h"

namespace opfuse {

constexpr std::string_view kFusedDomain = "opfuse";

// A post-op. Its math is defined once: by the op record it absorbs (the activation's scalar
// expression, with the post-op's params bound to the op's attributes and constant inputs), or,
// for the post-ops that stand for a pattern rather than one op, by `pattern_expr`. The
// reference epilogue, the vector epilogue (kernels/cpu/hwy_epilogue.h) and the patterns derive
// from it; the oneDNN kernels map post-ops they know by name (kernels/cpu/onednn_post_ops.cc).
struct PostOpSpec {
  std::string name;     // "clip"
  std::string onnx_op;  // the op it absorbs ("Clip"); "" for the pattern post-ops
  int num_params = 0;
  // The op's float attributes the params are, in order; then, one param each, its constant
  // scalar inputs 1, 2 ... with the value an omitted one stands for (Clip's bounds: -inf, inf).
  std::vector<std::string> param_attrs;
  std::vector<float> param_inputs;
  // A string attribute the op must have to be this post-op (Gelu's "approximate": "none" is
  // gelu_erf, "tanh" gelu_tanh); empty when none.
  std::string required_attr, required_value;
  // The pattern post-ops' math over y (argument 0) and the residual (argument 1).
  ScalarExpr (*pattern_expr)(const float* params) = nullptr;
  bool reads_residual = false;  // "add": y + R, R the anchor's input 3
};

// Every post-op: the named ones, then one per single-input activation op record
// (OpTraits::activation) none of them absorbs, named after the op in snake case
// ("ThresholdedRelu" -> "thresholded_relu:alpha").
std::span<const PostOpSpec> post_op_specs();
const PostOpSpec* find_post_op(std::string_view name);
// The params of `node` (an `onnx_op` node) as this post-op, or nullopt when it cannot be this
// post-op (a bound that is not a compile-time f32 scalar, another Gelu approximation).
std::optional<std::vector<float>> post_op_params(const PostOpSpec& spec, const Node& node);

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

// A post-op's math: a scalar expression over y (argument 0) and, for "add", the residual
// (argument 1); an error if the op record it derives from does not give one.
Result<ScalarExpr> post_op_expr(const PostOp& op);
// The post-ops of `epilogue` composed in order into one expression over (y, residual).
Result<ScalarExpr> epilogue_expr(std::span<const PostOp> epilogue);

// Shape inference's part for an anchor with an epilogue (after the anchor's own inference set
// output 0): the epilogue parses, names "add" exactly once iff the residual input 3 is given,
// and the residual has the output's dtype and shape.
Status infer_epilogue(InferContext& ctx);
// The reference: applies the node's epilogue in place to output 0 (the anchor's result), in
// order; "add" reads the residual input 3.
Status apply_epilogue(KernelContext& ctx);

}  // namespace opfuse
