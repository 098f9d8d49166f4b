// ConvTranspose (1-3 spatial dims): Y_g = col2im(W_g^T * X_g) on the shared GEMM.
#include "ops/conv_common.h"
#include "ops/gemm_reference.h"

namespace opfuse {
namespace {

Status infer_conv_transpose(InferContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(DType t, check_float_inputs(ctx, {0, 1, 2}));
  OPFUSE_ASSIGN_OR_RETURN(auto info, check_conv_shapes(ctx, true));
  if (!info) {
    ctx.set_output(0, t, std::nullopt);
    return Status::ok();
  }
  const std::string who = ctx.node().describe();
  OPFUSE_ASSIGN_OR_RETURN(WindowAttrs w, read_window_attrs(ctx.attrs(), info->spatial,
                                                           info->weight_kernel, true, who));
  OPFUSE_ASSIGN_OR_RETURN(auto extra, read_transpose_attrs(ctx.attrs(), info->spatial, who));
  const Shape& xs = *ctx.input_shape(0);
  Dim m = Dim::unknown();
  if (ctx.input_shape(1) && (*ctx.input_shape(1))[1].is_known()) {
    m = Dim((*ctx.input_shape(1))[1].value() * info->group);
  }
  OPFUSE_TRY(check_bias(ctx, m));
  Shape out = {xs[0], m};
  for (size_t i = 0; i < info->spatial; ++i) {
    const Dim& in = xs[2 + i];
    OPFUSE_ASSIGN_OR_RETURN(
        WindowDim d, conv_transpose_dim(w, i, in.is_known() ? in.value() : -1,
                                        extra.output_padding, extra.output_shape, who));
    out.push_back(d.out >= 0 ? Dim(d.out) : Dim::unknown());
  }
  ctx.set_output(0, t, std::move(out));
  return Status::ok();
}

// ---------------------------------------------------------------- ConvTranspose kernel

// Scatters col [Mg*K, in positions] into Y_g (adding), the adjoint of im2col. Parallel over
// output channels: every row of one channel writes only that channel.
template <typename T>
void col2im(const T* col, int64_t mg, const Geometry3& g, T* y) {
  const int64_t ksize = g.kernel_size(), in_size = g.in_size(), out_size = g.out_size();
#pragma omp parallel for
  for (int64_t m = 0; m < mg; ++m) {
    T* ym = y + m * out_size;
    for (int64_t kidx = 0; kidx < ksize; ++kidx) {
      const int64_t kd = kidx / (g.kernel[1] * g.kernel[2]);
      const int64_t kh = (kidx / g.kernel[2]) % g.kernel[1], kw = kidx % g.kernel[2];
      const T* src = col + (m * ksize + kidx) * in_size;
      for (int64_t id = 0; id < g.in[0]; ++id) {
        const int64_t od = id * g.stride[0] - g.pad_begin[0] + kd * g.dilation[0];
        if (od < 0 || od >= g.out[0]) continue;
        for (int64_t ih = 0; ih < g.in[1]; ++ih) {
          const int64_t oh = ih * g.stride[1] - g.pad_begin[1] + kh * g.dilation[1];
          if (oh < 0 || oh >= g.out[1]) continue;
          const T* srow = src + (id * g.in[1] + ih) * g.in[2];
          T* yrow = ym + (od * g.out[1] + oh) * g.out[2];
          for (int64_t iw = 0; iw < g.in[2]; ++iw) {
            const int64_t ow = iw * g.stride[2] - g.pad_begin[2] + kw * g.dilation[2];
            if (ow >= 0 && ow < g.out[2]) yrow[ow] += srow[iw];
          }
        }
      }
    }
  }
}

template <typename T>
Result<std::vector<Tensor>> conv_transpose_compute(const Node& node,
                                                   const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  const Tensor& w = *in[1];
  const Tensor* b = in.size() > 2 ? in[2] : nullptr;
  OPFUSE_ASSIGN_OR_RETURN(ConvSetup s, conv_setup(node, x, w, b, true));
  OPFUSE_ASSIGN_OR_RETURN(Tensor y, Tensor::zeros(x.dtype(), s.out_dims, node.describe()));
  const int64_t batch = x.dim(0), channels = x.dim(1), mg = w.dim(1), m = mg * s.group;
  const int64_t cg = channels / s.group;
  const int64_t in_size = s.geo.in_size(), out_size = s.geo.out_size();
  const int64_t rows = mg * s.geo.kernel_size();
  OPFUSE_ASSIGN_OR_RETURN(Tensor col, Tensor::zeros(x.dtype(), {rows, in_size},
                                                    node.describe() + " column buffer"));
  T* cd = col.data<T>();
  T* yd = y.data<T>();
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t gi = 0; gi < s.group; ++gi) {
      // col = W_g^T X_g: W_g is [Cg, Mg*K] row-major, so op(A) is its transpose.
      gemm<T>(true, false, rows, in_size, cg, T(1), w.data<T>() + gi * cg * rows, rows,
              x.data<T>() + (n * channels + gi * cg) * in_size, in_size, T(0), cd, in_size);
      col2im(cd, mg, s.geo, yd + (n * m + gi * mg) * out_size);
    }
    if (b) {
      for (int64_t c = 0; c < m; ++c) {
        T* yc = yd + (n * m + c) * out_size;
        const T bias = b->data<T>()[c];
        for (int64_t i = 0; i < out_size; ++i) yc[i] += bias;
      }
    }
  }
  return std::vector<Tensor>{std::move(y)};
}

Status conv_transpose_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  return run_float_kernel(
      ctx, [&](const auto& in) { return conv_transpose_compute<float>(node, in); },
      [&](const auto& in) { return conv_transpose_compute<double>(node, in); });
}

// ConvTranspose: every input element feeds M/g * K outputs (W holds C * M/g * K).
int64_t conv_transpose_flops(const Node& node) {
  return conv_family_flops(node.input(0), node.input(1));
}

}  // namespace

OpDef conv_transpose_def() {
  OpDef d;
  d.name = "ConvTranspose";
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.attrs = conv_attr_specs();
  d.attrs.push_back({"output_padding", AttrType::kInts, std::nullopt});
  d.attrs.push_back({"output_shape", AttrType::kInts, std::nullopt});
  d.kind = FusionKind::kAnchor;
  d.infer = infer_conv_transpose;
  d.reference = conv_transpose_kernel;
  d.flops = conv_transpose_flops;
  d.summary = "transposed convolution (1-3 spatial dims): the gradient of Conv w.r.t. its input";
  return d;
}

}  // namespace opfuse
