#include "kernels/cpu/onednn_post_ops.h"

#include <algorithm>

#include "kernels/cpu/hwy_kernels.h"

namespace opfuse::onednn {
namespace {

float p0(const float* p) { return p[0]; }
float p1(const float* p) { return p[1]; }
float zero(const float*) { return 0.0f; }
float one(const float*) { return 1.0f; }

using A = dnnl::algorithm;

// The post-ops oneDNN 2.6 has a counterpart for, by name (ops/fused.h); any other post-op (a
// new activation) runs as our own pass (HostEpilogueKernel).
struct OnednnPostOp {
  std::string_view name;
  A alg;  // undef: the residual add (a binary or sum post-op)
  float (*alpha)(const float* params);
  float (*beta)(const float* params);
  // oneDNN's relu with alpha 0, its clip and its hardsigmoid (linear, then clip) are max/min
  // instructions that give the bound for a NaN lane; its logistic gives a number too.
  bool keeps_nan;
  // Applied at little cost by its convolution kernels (the costs are in hwy_epilogue.h). For
  // hardswish, measured inside the models (opfuse tune's epilogue placement, per node): every
  // hardswish conv of MobileNetV3-Large ran faster with it inside oneDNN's kernel, 866 -> 755 us
  // in all at AVX-512 and 0.973 of the model's time at the AVX2 tier; DeepLabV3's 20, 6.9 -> 6.6
  // ms at AVX-512 and 11.2 -> 10.8 ms at AVX2 (a few nodes up to 5% slower, the stem 866 -> 515 us).
  bool cheap_in_conv;
};
constexpr OnednnPostOp kOnednnPostOps[] = {
    {"relu", A::eltwise_relu, zero, zero, false, true},
    {"leaky_relu", A::eltwise_relu, p0, zero, true, true},  // keeps NaN unless alpha is 0: below
    {"clip", A::eltwise_clip, p0, p1, false, true},
    // Its logistic turns NaN into a number (NonFiniteTest.LibraryActivationsAfterDeconvAndMatMulKeepNaN).
    {"sigmoid", A::eltwise_logistic, zero, zero, false, false},
    {"sigmoid_mul", A::eltwise_swish, one, zero, true, false},
    {"hardswish", A::eltwise_hardswish, zero, zero, true, true},
    {"tanh", A::eltwise_tanh, zero, zero, true, false},
    {"elu", A::eltwise_elu, p0, zero, true, false},
    {"gelu_erf", A::eltwise_gelu_erf, zero, zero, true, false},
    {"gelu_tanh", A::eltwise_gelu_tanh, zero, zero, true, false},
    // max(0, min(1, alpha * x + beta)): oneDNN 2.6 has no hardsigmoid; linear(alpha, beta), then clip(0, 1).
    {"hardsigmoid", A::eltwise_linear, p0, p1, false, false},
    {"linear", A::eltwise_linear, p0, p1, true, true},
    {"add", A::undef, zero, zero, true, true},
};

const OnednnPostOp* onednn_form(const PostOp& op) {
  for (const OnednnPostOp& o : kOnednnPostOps) {
    if (o.name == op.spec->name) return &o;
  }
  return nullptr;
}

// The eltwise algorithms a post-op becomes (hardsigmoid: linear, then clip; the residual add:
// none, it is a binary or sum post-op).
std::vector<A> eltwise_algs(const OnednnPostOp& form) {
  if (form.alg == A::undef) return {};
  if (form.name == "hardsigmoid") return {A::eltwise_linear, A::eltwise_clip};
  return {form.alg};
}

// oneDNN 2.6's jit convolution kernels (brgconv, jit:avx2, jit:avx512_core) apply every eltwise
// post-op of one algorithm with the first one's alpha and beta: linear(1.07, 0) then
// linear(1, 0.05) scaled twice by 1.07, clip(-1, 1) then clip(0, 0.5) clipped to [-1, 1], three
// linears off by 13 (a 3x3 conv, both tiers; its GEMM conv was right). PP-LCNet's convs end in
// hardswish, a scale and a shift. So a chain gives oneDNN each algorithm once; from the first
// repeat on, the post-ops run in our own pass.
bool repeats_an_algorithm(const OnednnPostOp& form, std::vector<A>& seen) {
  for (A alg : eltwise_algs(form)) {
    if (std::find(seen.begin(), seen.end(), alg) != seen.end()) return true;
  }
  for (A alg : eltwise_algs(form)) seen.push_back(alg);
  return false;
}

}  // namespace

std::optional<dnnl::post_ops> make_post_ops(std::span<const PostOp> ops, const dnnl::memory::desc& y_md,
                                            int& residual_index, ResidualAs as, dnnl::post_ops out) {
  residual_index = -1;
  std::vector<A> seen;
  for (const PostOp& op : ops) {
    const OnednnPostOp* form = onednn_form(op);
    if (form == nullptr || repeats_an_algorithm(*form, seen)) return std::nullopt;
    if (op.spec->reads_residual) {
      if (residual_index >= 0) return std::nullopt;
      residual_index = out.len();
      if (as == ResidualAs::kSum) {
        out.append_sum(1.0f);
      } else {
        out.append_binary(A::binary_add, y_md);
      }
      continue;
    }
    const float* p = op.params.data();
    out.append_eltwise(1.0f, form->alg, form->alpha(p), form->beta(p));
    if (op.spec->name == "hardsigmoid") out.append_eltwise(1.0f, A::eltwise_clip, 0.0f, 1.0f);
  }
  return out;
}

bool onednn_keeps_nan(const PostOp& op) {
  const OnednnPostOp* form = onednn_form(op);
  if (form == nullptr) return false;
  // leaky relu: oneDNN blends alpha * x, so NaN stays unless alpha is 0 (then it is relu).
  if (op.spec->name == "leaky_relu") return form->alpha(op.params.data()) != 0.0f;
  return form->keeps_nan;
}

namespace {

size_t leading_nan_keeping(std::span<const PostOp> ops, bool exact_non_finite) {
  size_t n = 0;
  std::vector<A> seen;
  while (n < ops.size()) {
    const OnednnPostOp* form = onednn_form(ops[n]);
    if (form == nullptr || (exact_non_finite && !onednn_keeps_nan(ops[n])) || repeats_an_algorithm(*form, seen)) break;
    ++n;
  }
  return n;
}

size_t leading_cheap(std::span<const PostOp> ops, bool exact_non_finite) {
  size_t n = 0;
  std::vector<A> seen;
  while (n < ops.size()) {
    const OnednnPostOp* form = onednn_form(ops[n]);
    if (form == nullptr || !form->cheap_in_conv || (exact_non_finite && !onednn_keeps_nan(ops[n])) ||
        repeats_an_algorithm(*form, seen)) {
      break;
    }
    ++n;
  }
  return n;
}

}  // namespace

size_t nan_keeping_post_ops(std::span<const PostOp> ops, const KernelCompileContext& ctx) {
  return ctx.by_finiteness(leading_nan_keeping(ops, true), leading_nan_keeping(ops, false));
}

size_t cheap_conv_post_ops(std::span<const PostOp> ops, const KernelCompileContext& ctx) {
  return ctx.by_finiteness(leading_cheap(ops, true), leading_cheap(ops, false));
}

size_t placed_post_ops(std::span<const PostOp> ops, const KernelCompileContext& ctx, size_t by_default) {
  switch (ctx.epilogue) {
    case KernelCompileContext::Epilogue::kLibrary: return nan_keeping_post_ops(ops, ctx);
    case KernelCompileContext::Epilogue::kOwnPass: return 0;
    case KernelCompileContext::Epilogue::kDefault: break;
  }
  return by_default;
}

Status HostEpilogueKernel::run(std::span<const Tensor* const> inputs, std::span<Tensor* const> outputs) const {
  OPFUSE_TRY(anchor_->run(inputs, outputs));
  Tensor* y = outputs.empty() ? nullptr : outputs[0];
  const Tensor* r = inputs.size() > 3 ? inputs[3] : nullptr;
  const bool wants_r = rest_.reads_residual;
  if (y == nullptr || y->dtype() != DType::kF32 ||
      (wants_r && (r == nullptr || r->dtype() != DType::kF32 || r->numel() != y->numel()))) {
    return Status::internal_error(str_cat(name(), ": the residual or the output differ from the plan"));
  }
  float* out = y->data<float>();
  const float* res = wants_r ? r->data<float>() : nullptr;
  if (bias_.values.empty()) {
    hwy_cpu::apply_epilogue(rest_, out, res, y->numel());
    return Status::ok();
  }
  const int64_t channels = static_cast<int64_t>(bias_.values.size()), n = bias_.spatial;
  if (n <= 0 || y->numel() % (channels * n) != 0) {
    return Status::internal_error(str_cat(name(), ": the output differs from the plan's channels"));
  }
  const int64_t rows = y->numel() / n;
#pragma omp parallel for schedule(static) if (y->numel() > hwy_cpu::kParallelThreshold)
  for (int64_t row = 0; row < rows; ++row) {
    float* yr = out + row * n;
    const float b = bias_.values[static_cast<size_t>(row % channels)];
    for (int64_t i = 0; i < n; ++i) yr[i] += b;
    hwy_cpu::apply_epilogue_here(rest_, yr, res != nullptr ? res + row * n : nullptr, n);
  }
  return Status::ok();
}

Result<std::unique_ptr<Kernel>> with_host_epilogue(const Node& node, std::unique_ptr<Kernel> anchor,
                                                   std::span<const PostOp> rest, ChannelBias bias) {
  if (rest.empty() && bias.values.empty()) return anchor;
  auto program = hwy_cpu::vector_epilogue(rest);
  if (!program) return Status::internal_error(str_cat(node.describe(), ": the epilogue has no vector form"));
  std::string names = bias.values.empty() ? "" : "bias";
  for (const PostOp& op : rest) names += str_cat(names.empty() ? "" : ", ", op.spec->name);
  return std::unique_ptr<Kernel>(std::make_unique<HostEpilogueKernel>(std::move(anchor), std::move(*program),
                                                                      std::move(names), std::move(bias)));
}

}  // namespace opfuse::onednn
