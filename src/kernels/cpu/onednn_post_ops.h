// An epilogue (ops/fused.h) as oneDNN post-ops: shared by every anchor kernel with epilogues
// (onednn_conv.cc's FusedConv, onednn_fused_matmul.cc's FusedMatMul / FusedGemm).
#pragma once

#include <optional>
#include <span>

#include <memory>
#include <vector>

#include "kernels/cpu/hwy_epilogue.h"
#include "kernels/cpu/onednn_common.h"
#include "ops/fused.h"

namespace opfuse::onednn {

// How the residual add reaches oneDNN: a binary add post-op reading R, or a sum post-op adding
// what dst holds when the primitive starts (so R must be there: PrimitivePlan::accumulate_input).
// oneDNN 2.6's brgconv kernels (nhwc) take sum but not binary post-ops, and fall back to slower
// ones for a binary add (measured on ResNet-50's 1x1 convs: 258 vs 273 us, 243 vs 298 us).
enum class ResidualAs { kBinary, kSum };

// `ops` as oneDNN post-ops, appended to `start`; nullopt when one has no oneDNN counterpart
// (onednn_post_ops.cc maps the post-ops it has by name) or repeats an eltwise algorithm of an
// earlier one (oneDNN 2.6's jit kernels would give it the earlier one's parameters). The residual add (if in `ops`) becomes
// a binary add post-op of `y_md` or a sum post-op; `residual_index` gets its position, or -1.
std::optional<dnnl::post_ops> make_post_ops(std::span<const PostOp> ops, const dnnl::memory::desc& y_md,
                                            int& residual_index, ResidualAs as = ResidualAs::kBinary,
                                            dnnl::post_ops start = dnnl::post_ops());

// Whether oneDNN's kernels keep ONNX's NaN semantics for `op`. Its relu with alpha 0 and its
// clip are max/min instructions that return the bound for a NaN lane (relu(NaN) = 0), where
// ONNX's Relu, Clip and HardSigmoid give NaN: a silently finite answer where the unfused graph
// shows the problem. Those run in our own pass (hwy_epilogue.cc keeps NaN) when the node may see
// NaN or Inf (KernelCompileContext::exact_non_finite).
bool onednn_keeps_nan(const PostOp& op);
// How many leading post-ops oneDNN may apply: those before the first one it has no counterpart
// for, that repeats an eltwise algorithm of an earlier one (a second linear or clip) or, where
// the node may see NaN (ctx.exact_non_finite), would not keep NaN through.
size_t nan_keeping_post_ops(std::span<const PostOp> ops, const KernelCompileContext& ctx);

// How many leading post-ops of `ops` oneDNN's convolution kernels apply at little cost (relu,
// leaky_relu, clip, linear and the residual add; the costs are in hwy_epilogue.h), stopping, where
// the node may see NaN, at one it would not keep NaN through, and at a repeated algorithm. The
// rest run as our own pass over the output (HostEpilogueKernel).
size_t cheap_conv_post_ops(std::span<const PostOp> ops, const KernelCompileContext& ctx);

// How many leading post-ops the library kernel applies: `by_default` (the anchor's own rule
// above), unless a tuning record placed the epilogue (KernelCompileContext::epilogue): kLibrary
// every one oneDNN keeps NaN through, kOwnPass none.
size_t placed_post_ops(std::span<const PostOp> ops, const KernelCompileContext& ctx, size_t by_default);

// A per-channel bias our pass adds to a plain [N, C, spatial...] output before the epilogue,
// for the primitives whose own bias is slow (oneDNN 2.6's deconvolution: +3-5 ms on a 24 ->
// 24-channel 2x2 stride-2 one to 320x320 whose product takes 1-3.8 ms).
struct ChannelBias {
  std::vector<float> values;  // one per channel; empty: none
  int64_t spatial = 1;        // elements per channel and image
};

// An anchor's oneDNN kernel (with the leading post-ops of its epilogue) followed by the rest of
// the epilogue, applied in place to output 0 by hwy_cpu::apply_epilogue; an "add" among them
// reads the residual input 3 (laid out as the output). With a ChannelBias the pass goes channel
// by channel, adding the bias first.
class HostEpilogueKernel final : public Kernel {
 public:
  HostEpilogueKernel(std::unique_ptr<Kernel> anchor, hwy_cpu::VectorEpilogue rest, std::string rest_names,
                     ChannelBias bias = {})
      : anchor_(std::move(anchor)), rest_(std::move(rest)), rest_names_(std::move(rest_names)), bias_(std::move(bias)) {}
  Status run(std::span<const Tensor* const> inputs, std::span<Tensor* const> outputs) const override;
  std::string_view name() const override { return anchor_->name(); }
  // "jit:avx2, then relu": the library's kernel, then the post-ops our pass applies.
  std::string implementation() const override { return anchor_->implementation() + ", then " + rest_names_; }
  int in_place_input() const override { return anchor_->in_place_input(); }
  bool reads_input(size_t input) const override {
    return anchor_->reads_input(input) || (input == 3 && rest_.reads_residual);
  }

 private:
  std::unique_ptr<Kernel> anchor_;
  hwy_cpu::VectorEpilogue rest_;
  std::string rest_names_;  // "bias, relu, add"
  ChannelBias bias_;
};

// `anchor` alone when `rest` and `bias` are empty, else wrapped in a HostEpilogueKernel; an
// error when a post-op of `rest` has no vector form.
Result<std::unique_ptr<Kernel>> with_host_epilogue(const Node& node, std::unique_ptr<Kernel> anchor,
                                                   std::span<const PostOp> rest, ChannelBias bias = {});

}  // namespace opfuse::onednn
