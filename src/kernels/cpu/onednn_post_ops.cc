#include "kernels/cpu/onednn_post_ops.h"

#include <algorithm>

namespace opfuse::onednn {

std::optional<dnnl::post_ops> make_post_ops(std::span<const PostOp> ops, const dnnl::memory::desc& y_md,
                                            int& residual_index, ResidualAs as) {
  dnnl::post_ops out;
  residual_index = -1;
  for (const PostOp& op : ops) {
    using A = dnnl::algorithm;
    A alg = A::undef;
    const float* p = op.params.data();
    switch (op.spec->dnnl) {
      case DnnlPostOp::kEltwiseRelu: alg = A::eltwise_relu; break;
      case DnnlPostOp::kEltwiseClip: alg = A::eltwise_clip; break;
      case DnnlPostOp::kEltwiseLogistic: alg = A::eltwise_logistic; break;
      case DnnlPostOp::kEltwiseSwish: alg = A::eltwise_swish; break;
      case DnnlPostOp::kEltwiseHardswish: alg = A::eltwise_hardswish; break;
      case DnnlPostOp::kEltwiseTanh: alg = A::eltwise_tanh; break;
      case DnnlPostOp::kEltwiseElu: alg = A::eltwise_elu; break;
      case DnnlPostOp::kEltwiseGeluErf: alg = A::eltwise_gelu_erf; break;
      case DnnlPostOp::kEltwiseGeluTanh: alg = A::eltwise_gelu_tanh; break;
      case DnnlPostOp::kEltwiseLinear: alg = A::eltwise_linear; break;
      case DnnlPostOp::kEltwiseHardsigmoid:
        // max(0, min(1, alpha * x + beta)): oneDNN 2.6 has no hardsigmoid.
        out.append_eltwise(1.0f, A::eltwise_linear, p[0], p[1]);
        out.append_eltwise(1.0f, A::eltwise_clip, 0.0f, 1.0f);
        continue;
      case DnnlPostOp::kBinaryAdd:
        if (residual_index >= 0) return std::nullopt;
        residual_index = out.len();
        if (as == ResidualAs::kSum) {
          out.append_sum(1.0f);
        } else {
          out.append_binary(A::binary_add, y_md);
        }
        continue;
      case DnnlPostOp::kNone: return std::nullopt;
    }
    out.append_eltwise(1.0f, alg, op.spec->dnnl_alpha(p), op.spec->dnnl_beta(p));
  }
  return out;
}

bool onednn_keeps_nan(const PostOp& op) {
  switch (op.spec->dnnl) {
    case DnnlPostOp::kEltwiseRelu:  // with alpha != 0 (leaky) oneDNN blends alpha * x: NaN stays
      return op.spec->dnnl_alpha(op.params.data()) != 0.0f;
    case DnnlPostOp::kEltwiseClip:
    case DnnlPostOp::kEltwiseHardsigmoid:  // linear, then clip
      return false;
    default:
      return true;
  }
}

size_t nan_keeping_post_ops(std::span<const PostOp> ops, bool exact_non_finite) {
  size_t n = 0;
  while (n < ops.size() && (!exact_non_finite || onednn_keeps_nan(ops[n]))) ++n;
  return n;
}

size_t cheap_conv_post_ops(std::span<const PostOp> ops, bool exact_non_finite) {
  size_t n = 0;
  while (n < ops.size()) {
    const DnnlPostOp kind = ops[n].spec->dnnl;
    // relu and leaky_relu share kEltwiseRelu.
    if ((exact_non_finite && !onednn_keeps_nan(ops[n])) ||
        (kind != DnnlPostOp::kEltwiseRelu && kind != DnnlPostOp::kEltwiseClip &&
         kind != DnnlPostOp::kEltwiseLinear && kind != DnnlPostOp::kBinaryAdd)) {
      break;
    }
    ++n;
  }
  return n;
}

size_t placed_post_ops(std::span<const PostOp> ops, const KernelCompileContext& ctx, size_t by_default) {
  switch (ctx.epilogue) {
    case KernelCompileContext::Epilogue::kLibrary: return nan_keeping_post_ops(ops, ctx.exact_non_finite);
    case KernelCompileContext::Epilogue::kOwnPass: return 0;
    case KernelCompileContext::Epilogue::kDefault: break;
  }
  return by_default;
}

Status HostEpilogueKernel::run(std::span<const Tensor* const> inputs, std::span<Tensor* const> outputs) const {
  OPFUSE_TRY(anchor_->run(inputs, outputs));
  Tensor* y = outputs.empty() ? nullptr : outputs[0];
  const Tensor* r = inputs.size() > 3 ? inputs[3] : nullptr;
  const bool wants_r = std::any_of(rest_.begin(), rest_.end(), [](const hwy_cpu::VectorPostOp& op) {
    return op.kind == hwy_cpu::VectorPostOp::Kind::kAdd;
  });
  if (y == nullptr || y->dtype() != DType::kF32 ||
      (wants_r && (r == nullptr || r->dtype() != DType::kF32 || r->numel() != y->numel()))) {
    return Status::internal_error(str_cat(name(), ": the residual or the output differ from the plan"));
  }
  hwy_cpu::apply_post_ops(rest_, y->data<float>(), wants_r ? r->data<float>() : nullptr, y->numel());
  return Status::ok();
}

Result<std::unique_ptr<Kernel>> with_host_epilogue(const Node& node, std::unique_ptr<Kernel> anchor,
                                                   std::span<const PostOp> rest) {
  if (rest.empty()) return anchor;
  auto ops = hwy_cpu::vector_post_ops(rest);
  if (!ops) return Status::internal_error(str_cat(node.describe(), ": a post-op has no vector form"));
  std::string names;
  for (const PostOp& op : rest) names += str_cat(names.empty() ? "" : ", ", op.spec->name);
  return std::unique_ptr<Kernel>(std::make_unique<HostEpilogueKernel>(std::move(anchor), std::move(*ops), std::move(names)));
}

}  // namespace opfuse::onednn
