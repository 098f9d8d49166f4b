// Conv (1-3 spatial dims). The reference kernel lowers to the shared GEMM:
// Y_g = W_g [M/g x C/g*K] * im2col(X_g).
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "ops/conv_common.h"
#include "ops/gemm_reference.h"

namespace opfuse {
namespace {

// Bytes of im2col buffer a Conv builds at once; larger outputs are processed in row chunks.
constexpr int64_t kColumnBudgetBytes = int64_t{16} << 20;

Status infer_conv(InferContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(DType t, check_float_inputs(ctx, {0, 1, 2}));
  OPFUSE_ASSIGN_OR_RETURN(std::optional<Shape> out, conv_output_shape(ctx));
  ctx.set_output(0, t, std::move(out));
  return Status::ok();
}

// ---------------------------------------------------------------- Conv kernel

// Lays out the receptive fields of output lines [l0, l1) (a line is one run along the last
// spatial axis) of one group's input channels as a [Cg*KD*KH*KW, (l1-l0)*OW] matrix.
template <typename T>
void im2col(const T* x, int64_t channels, const Geometry3& g, int64_t l0, int64_t l1, T* col,
            bool parallel) {
  const int64_t npos = (l1 - l0) * g.out[2];
  const int64_t ksize = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  const int64_t ow_count = g.out[2], iw_count = g.in[2], sw = g.stride[2];
#pragma omp parallel for if (parallel)
  for (int64_t row = 0; row < channels * ksize; ++row) {
    const int64_t c = row / ksize, kidx = row % ksize;
    const int64_t kd = kidx / (g.kernel[1] * g.kernel[2]);
    const int64_t kh = (kidx / g.kernel[2]) % g.kernel[1], kw = kidx % g.kernel[2];
    const T* src = x + c * in_plane;
    T* dst = col + row * npos;
    // Input column of output column ow is ow*sw + iw0; [ow_lo, ow_hi) stays inside the input.
    const int64_t iw0 = kw * g.dilation[2] - g.pad_begin[2];
    const int64_t ow_lo = std::min(ow_count, iw0 < 0 ? (-iw0 + sw - 1) / sw : 0);
    const int64_t ow_hi =
        std::max(ow_lo, std::min(ow_count, iw_count - iw0 <= 0 ? 0 : (iw_count - iw0 + sw - 1) / sw));
    for (int64_t l = l0; l < l1; ++l) {
      T* line = dst + (l - l0) * ow_count;
      const int64_t od = l / g.out[1], oh = l % g.out[1];
      const int64_t id = od * g.stride[0] - g.pad_begin[0] + kd * g.dilation[0];
      const int64_t ih = oh * g.stride[1] - g.pad_begin[1] + kh * g.dilation[1];
      if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
        std::fill(line, line + ow_count, T(0));
        continue;
      }
      const T* srow = src + (id * g.in[1] + ih) * iw_count + iw0;
      std::fill(line, line + ow_lo, T(0));
      if (sw == 1) {
        std::memcpy(line + ow_lo, srow + ow_lo, sizeof(T) * (ow_hi - ow_lo));
      } else {
        for (int64_t ow = ow_lo; ow < ow_hi; ++ow) line[ow] = srow[ow * sw];
      }
      std::fill(line + ow_hi, line + ow_count, T(0));
    }
  }
}

// An uninitialised, growable buffer: im2col writes every element, so zero-filling it (as a
// std::vector would) only costs memory bandwidth.
template <typename T>
class Scratch {
 public:
  T* get(size_t n) {
    if (n > size_) {
      data_.reset(new T[n]);
      size_ = n;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<T[]> data_;
  size_t size_ = 0;
};

// Output lines [l0, l1) of Y[n, group g] (all Mg channels): bias, im2col, one GEMM.
template <typename T>
void conv_lines(const T* x, const T* w, const T* bias, T* y, int64_t cg, int64_t mg,
                const Geometry3& g, int64_t l0, int64_t l1, Scratch<T>& scratch, bool parallel) {
  const int64_t rows = cg * g.kernel_size();
  const int64_t ow = g.out[2], out_size = g.out_size(), npos = (l1 - l0) * ow;
  T* y0 = y + l0 * ow;
  if (bias) {
    for (int64_t m = 0; m < mg; ++m) std::fill(y0 + m * out_size, y0 + m * out_size + npos, bias[m]);
  }
  const T beta = bias ? T(1) : T(0);
  if (g.is_pointwise()) {  // 1x1, stride 1, no padding: the input already is the matrix
    gemm<T>(false, false, mg, npos, rows, T(1), w, rows, x + l0 * ow, out_size, beta, y0,
            out_size, parallel);
    return;
  }
  T* col = scratch.get(static_cast<size_t>(rows * npos));
  im2col(x, cg, g, l0, l1, col, parallel);
  gemm<T>(false, false, mg, npos, rows, T(1), w, rows, col, npos, beta, y0, out_size, parallel);
}

template <typename T>
Result<std::vector<Tensor>> conv_compute(const Node& node, const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  const Tensor& w = *in[1];
  const Tensor* b = in.size() > 2 ? in[2] : nullptr;
  OPFUSE_ASSIGN_OR_RETURN(ConvSetup s, conv_setup(node, x, w, b, false));
  OPFUSE_ASSIGN_OR_RETURN(Tensor y, Tensor::zeros(x.dtype(), s.out_dims, node.describe()));
  const Geometry3& g = s.geo;
  const int64_t batch = x.dim(0), channels = x.dim(1), m = w.dim(0);
  const int64_t cg = channels / s.group, mg = m / s.group;
  const int64_t in_size = g.in_size(), out_size = g.out_size();
  const int64_t w_group = mg * cg * g.kernel_size();
  const T* xd = x.data<T>();
  const T* wd = w.data<T>();
  const T* bd = b ? b->data<T>() : nullptr;
  T* yd = y.data<T>();

  // Work is split into jobs of (image, group, chunk of output lines), each an im2col plus a
  // single-threaded GEMM, so one parallel region covers the whole op (fewer barriers than
  // parallelising im2col and GEMM separately). Chunks bound the im2col buffer and, when there
  // are fewer (image, group) pairs than threads, give every thread work while each chunk still
  // feeds the GEMM a few hundred columns. Only one big job left: parallelise inside it.
  const int64_t lines = g.out[0] * g.out[1], ow = g.out[2];
  const int64_t threads = omp_get_max_threads(), pairs = batch * s.group;
  const int64_t line_bytes = cg * g.kernel_size() * ow * static_cast<int64_t>(sizeof(T));
  const int64_t lines_in_budget =
      std::max<int64_t>(1, kColumnBudgetBytes / std::max<int64_t>(1, line_bytes));
  int64_t chunks = g.is_pointwise() ? 1 : (lines + lines_in_budget - 1) / lines_in_budget;
  if (pairs * chunks < 2 * threads) {
    const int64_t wanted = (2 * threads + pairs - 1) / pairs;
    chunks = std::max(chunks, std::min(wanted, lines * ow / 256));
  }
  chunks = std::clamp<int64_t>(chunks, 1, std::max<int64_t>(lines, 1));
  const int64_t lines_per_chunk = (lines + chunks - 1) / chunks;
  chunks = lines ? (lines + lines_per_chunk - 1) / lines_per_chunk : 0;
  const int64_t jobs = pairs * chunks;
  const bool outer = jobs >= threads && threads > 1;
#pragma omp parallel if (outer)
  {
    Scratch<T> col;
#pragma omp for schedule(dynamic)
    for (int64_t job = 0; job < jobs; ++job) {
      const int64_t pair = job / chunks, chunk = job % chunks;
      const int64_t n = pair / s.group, gi = pair % s.group;
      const int64_t l0 = chunk * lines_per_chunk, l1 = std::min(lines, l0 + lines_per_chunk);
      conv_lines(xd + (n * channels + gi * cg) * in_size, wd + gi * w_group,
                 bd ? bd + gi * mg : nullptr, yd + (n * m + gi * mg) * out_size, cg, mg, g, l0,
                 l1, col, !outer);
    }
  }
  return std::vector<Tensor>{std::move(y)};
}

Status conv_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  return run_float_kernel(
      ctx, [&](const auto& in) { return conv_compute<float>(node, in); },
      [&](const auto& in) { return conv_compute<double>(node, in); });
}

// ---------------------------------------------------------------- flops

// 2 * multiply-adds. Conv: every output element takes C/g * K of them (W holds M * C/g * K).
int64_t conv_flops(const Node& node) { return conv_family_flops(node.output(0), node.input(1)); }

}  // namespace

Result<std::optional<Shape>> conv_output_shape(const InferContext& ctx, size_t x, size_t w,
                                               size_t b) {
  OPFUSE_ASSIGN_OR_RETURN(auto info, check_conv_shapes(ctx, false, x, w));
  if (!info) return std::optional<Shape>();
  const std::string who = ctx.node().describe();
  OPFUSE_ASSIGN_OR_RETURN(WindowAttrs wa, read_window_attrs(ctx.attrs(), info->spatial,
                                                            info->weight_kernel, true, who));
  const Shape& xs = *ctx.input_shape(x);
  const Dim m = ctx.input_shape(w) ? (*ctx.input_shape(w))[0] : Dim::unknown();
  OPFUSE_TRY(check_bias(ctx, m, b));
  Shape out = {xs[0], m};
  for (size_t i = 0; i < info->spatial; ++i) {
    const Dim& in = xs[2 + i];
    OPFUSE_ASSIGN_OR_RETURN(WindowDim d,
                            window_dim(wa, i, in.is_known() ? in.value() : -1, false, who));
    out.push_back(d.out >= 0 ? Dim(d.out) : Dim::unknown());
  }
  return std::optional<Shape>(std::move(out));
}

std::vector<OpDef> conv_ops() {
  std::vector<OpDef> ops;
  {
    OpDef d;
    d.name = "Conv";
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.attrs = conv_attr_specs();
    d.kind = FusionKind::kAnchor;
    d.infer = infer_conv;
    d.reference = conv_kernel;
    d.flops = conv_flops;
    d.summary = "N-d convolution (1-3 spatial dims) with groups, strides, dilations, padding";
    ops.push_back(std::move(d));
  }
  ops.push_back(conv_transpose_def());
  return ops;
}

}  // namespace opfuse
