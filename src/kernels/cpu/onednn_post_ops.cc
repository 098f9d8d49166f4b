#include "kernels/cpu/onednn_post_ops.h"

namespace opfuse::onednn {

std::optional<dnnl::post_ops> make_post_ops(std::span<const PostOp> ops, const dnnl::memory::desc& y_md,
                                            int& residual_index) {
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
        out.append_binary(A::binary_add, y_md);
        continue;
      case DnnlPostOp::kNone: return std::nullopt;
    }
    out.append_eltwise(1.0f, alg, op.spec->dnnl_alpha(p), op.spec->dnnl_beta(p));
  }
  return out;
}

}  // namespace opfuse::onednn
