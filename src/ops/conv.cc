// Conv and ConvTranspose (1-3 spatial dims). Reference kernels lower to the shared GEMM:
// Conv = W_g [M/g x C/g*K] * im2col(X_g), ConvTranspose = col2im(W_g^T * X_g).
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "ops/gemm_reference.h"
#include "ops/nn_common.h"

namespace opfuse {
namespace {

// Bytes of im2col buffer a Conv builds at once; larger outputs are processed in row chunks.
constexpr int64_t kColumnBudgetBytes = int64_t{16} << 20;

// ---------------------------------------------------------------- attributes

struct TransposeAttrs {
  std::vector<int64_t> output_padding;  // empty or one per spatial dim
  std::vector<int64_t> output_shape;    // empty or one per spatial dim
};

Result<TransposeAttrs> read_transpose_attrs(const AttrReader& attrs, size_t spatial,
                                            const std::string& who) {
  TransposeAttrs t;
  t.output_padding = attrs.get_ints("output_padding");
  if (!t.output_padding.empty() && t.output_padding.size() != spatial) {
    return Status::user_error(str_cat(who, ": output_padding ", dims_to_string(t.output_padding),
                                      " needs one value per spatial dim (", spatial, ")"));
  }
  for (int64_t p : t.output_padding) {
    if (p < 0) return Status::user_error(str_cat(who, ": output_padding must not be negative"));
  }
  t.output_shape = attrs.get_ints("output_shape");
  // Some exporters write the full [N, C, spatial...] shape; the spatial tail is what counts.
  if (t.output_shape.size() == spatial + 2) {
    t.output_shape.erase(t.output_shape.begin(), t.output_shape.begin() + 2);
  }
  if (!t.output_shape.empty() && t.output_shape.size() != spatial) {
    return Status::user_error(str_cat(who, ": output_shape ", dims_to_string(t.output_shape),
                                      " needs one value per spatial dim (", spatial, ")"));
  }
  for (int64_t d : t.output_shape) {
    if (d < 1) return Status::user_error(str_cat(who, ": output_shape values must be positive"));
  }
  return t;
}

// What a Conv / ConvTranspose kernel needs, validated against the concrete tensors (kernels
// must not trust that shape inference saw these exact shapes).
struct ConvSetup {
  int64_t group = 1;
  Geometry3 geo;
  std::vector<int64_t> out_dims;
};

Result<ConvSetup> conv_setup(const Node& node, const Tensor& x, const Tensor& w, const Tensor* b,
                             bool transpose) {
  const std::string who = node.describe();
  const AttrReader attrs(node);
  ConvSetup s;
  const int64_t rank = x.rank();
  if (rank < 3 || rank > 5) {
    return Status::user_error(str_cat(who, ": input X is ", x.type_string(),
                                      "; expected [N, C, spatial...] with 1 to 3 spatial dims"));
  }
  if (w.rank() != rank) {
    return Status::user_error(str_cat(who, ": weight W is ", w.type_string(),
                                      " but input X is ", x.type_string(), "; ranks must match"));
  }
  s.group = attrs.get_int("group");
  if (s.group < 1) return Status::user_error(str_cat(who, ": group must be at least 1"));
  const int64_t c = x.dim(1);
  int64_t m = 0;
  bool channels_ok;
  if (transpose) {
    channels_ok = w.dim(0) == c && c % s.group == 0;
    m = w.dim(1) * s.group;
  } else {
    channels_ok = w.dim(1) * s.group == c && w.dim(0) % s.group == 0;
    m = w.dim(0);
  }
  if (!channels_ok) {
    return Status::user_error(str_cat(who, ": input X ", x.type_string(), " and weight W ",
                                      w.type_string(), " do not agree on channels for group ",
                                      s.group));
  }
  if (b && (b->rank() != 1 || b->dim(0) != m)) {
    return Status::user_error(
        str_cat(who, ": bias B is ", b->type_string(), "; expected [", m, "]"));
  }
  const size_t spatial = static_cast<size_t>(rank - 2);
  const std::vector<int64_t> weight_kernel(w.dims().begin() + 2, w.dims().end());
  OPFUSE_ASSIGN_OR_RETURN(WindowAttrs wa,
                          read_window_attrs(attrs, spatial, weight_kernel, true, who));
  TransposeAttrs ta;
  if (transpose) {
    OPFUSE_ASSIGN_OR_RETURN(ta, read_transpose_attrs(attrs, spatial, who));
  }
  s.out_dims = {x.dim(0), m};
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t in = x.dim(2 + static_cast<int64_t>(i));
    WindowDim d;
    if (transpose) {
      OPFUSE_ASSIGN_OR_RETURN(
          d, conv_transpose_dim(wa, i, in, ta.output_padding, ta.output_shape, who));
    } else {
      OPFUSE_ASSIGN_OR_RETURN(d, window_dim(wa, i, in, false, who));
    }
    set_geometry_axis(s.geo, spatial, i, in, wa, d);
    s.out_dims.push_back(d.out);
  }
  return s;
}

// ---------------------------------------------------------------- shape inference

// Checks what Conv and ConvTranspose share: ranks, group, channel counts, bias. `weight_in_ch`
// is the weight axis that counts input channels per group (1 for Conv, 0 for ConvTranspose).
struct ConvInferInfo {
  size_t spatial = 0;
  int64_t group = 1;
  std::vector<int64_t> weight_kernel;  // -1 unknown
};

Result<std::optional<ConvInferInfo>> check_conv_shapes(const InferContext& ctx, bool transpose) {
  const std::string who = ctx.node().describe();
  ConvInferInfo info;
  info.group = ctx.attrs().get_int("group");
  if (info.group < 1) return ctx.error(str_cat("group must be at least 1, got ", info.group));
  const auto& xs = ctx.input_shape(0);
  const auto& ws = ctx.input_shape(1);
  if (!xs) return std::optional<ConvInferInfo>();  // rank unknown: nothing more to say
  const size_t rank = xs->size();
  if (rank < 3 || rank > 5) {
    return ctx.error(str_cat("input X has shape ", shape_to_string(*xs),
                             "; expected [N, C, spatial...] with 1 to 3 spatial dims"));
  }
  info.spatial = rank - 2;
  info.weight_kernel.assign(info.spatial, -1);
  if (ws) {
    if (ws->size() != rank) {
      return ctx.error(str_cat("weight W has shape ", shape_to_string(*ws), " (rank ", ws->size(),
                               ") but input X has rank ", rank, " ", shape_to_string(*xs)));
    }
    info.weight_kernel = dims_or_unknown(Shape(ws->begin() + 2, ws->end()));
    const Dim& c = (*xs)[1];
    // Conv: W is [M, C/g, k...]; ConvTranspose: W is [C, M/g, k...].
    const Dim& wc = transpose ? (*ws)[0] : (*ws)[1];
    if (c.is_known() && wc.is_known()) {
      const int64_t expected = transpose ? wc.value() : wc.value() * info.group;
      if (c.value() != expected) {
        return ctx.error(str_cat("input X ", shape_to_string(*xs), " has ", c.value(),
                                 " channels but weight W ", shape_to_string(*ws), " with group ",
                                 info.group, " expects ", expected));
      }
    }
    if (transpose && c.is_known() && c.value() % info.group != 0) {
      return ctx.error(str_cat("input X has ", c.value(), " channels, not divisible by group ",
                               info.group));
    }
    if (!transpose && (*ws)[0].is_known() && (*ws)[0].value() % info.group != 0) {
      return ctx.error(str_cat("weight W ", shape_to_string(*ws), " has ", (*ws)[0].value(),
                               " output channels, not divisible by group ", info.group));
    }
  }
  return std::optional<ConvInferInfo>(std::move(info));
}

Status check_bias(const InferContext& ctx, const Dim& out_channels) {
  if (!ctx.has_input(2) || !ctx.input_shape(2)) return Status::ok();
  const Shape& bs = *ctx.input_shape(2);
  if (bs.size() != 1 || (bs[0].is_known() && out_channels.is_known() && bs[0] != out_channels)) {
    return ctx.error(str_cat("bias B has shape ", shape_to_string(bs), "; expected [",
                             out_channels.to_string(), "]"));
  }
  return Status::ok();
}

Status infer_conv(InferContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(DType t, check_float_inputs(ctx, {0, 1, 2}));
  OPFUSE_ASSIGN_OR_RETURN(auto info, check_conv_shapes(ctx, false));
  if (!info) {
    ctx.set_output(0, t, std::nullopt);
    return Status::ok();
  }
  const std::string who = ctx.node().describe();
  OPFUSE_ASSIGN_OR_RETURN(WindowAttrs w, read_window_attrs(ctx.attrs(), info->spatial,
                                                           info->weight_kernel, true, who));
  const Shape& xs = *ctx.input_shape(0);
  const Dim m = ctx.input_shape(1) ? (*ctx.input_shape(1))[0] : Dim::unknown();
  OPFUSE_TRY(check_bias(ctx, m));
  Shape out = {xs[0], m};
  for (size_t i = 0; i < info->spatial; ++i) {
    const Dim& in = xs[2 + i];
    OPFUSE_ASSIGN_OR_RETURN(WindowDim d,
                            window_dim(w, i, in.is_known() ? in.value() : -1, false, who));
    out.push_back(d.out >= 0 ? Dim(d.out) : Dim::unknown());
  }
  ctx.set_output(0, t, std::move(out));
  return Status::ok();
}

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
  int64_t chunks = g.is_pointwise() || line_bytes == 0
                       ? 1
                       : (lines + std::max<int64_t>(1, kColumnBudgetBytes / line_bytes) - 1) /
                             std::max<int64_t>(1, kColumnBudgetBytes / line_bytes);
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

Status conv_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  return run_float_kernel(
      ctx, [&](const auto& in) { return conv_compute<float>(node, in); },
      [&](const auto& in) { return conv_compute<double>(node, in); });
}

Status conv_transpose_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  return run_float_kernel(
      ctx, [&](const auto& in) { return conv_transpose_compute<float>(node, in); },
      [&](const auto& in) { return conv_transpose_compute<double>(node, in); });
}

// ---------------------------------------------------------------- flops

// 2 * multiply-adds. Conv: every output element takes C/g * K of them (W holds M * C/g * K).
int64_t conv_flops(const Node& node) {
  const auto y = static_value_dims(node.output(0));
  const auto w = static_value_dims(node.input(1));
  if (!y || !w || w->empty() || (*w)[0] == 0) return -1;
  return 2 * numel_of(*y) * (numel_of(*w) / (*w)[0]);
}

// ConvTranspose: every input element feeds M/g * K outputs (W holds C * M/g * K).
int64_t conv_transpose_flops(const Node& node) {
  const auto x = static_value_dims(node.input(0));
  const auto w = static_value_dims(node.input(1));
  if (!x || !w || w->empty() || (*w)[0] == 0) return -1;
  return 2 * numel_of(*x) * (numel_of(*w) / (*w)[0]);
}

std::vector<AttrSpec> window_attr_specs() {
  return {
      {"auto_pad", AttrType::kString, AttrValue(std::string("NOTSET"))},
      {"dilations", AttrType::kInts, std::nullopt},
      {"group", AttrType::kInt, AttrValue(int64_t{1})},
      {"kernel_shape", AttrType::kInts, std::nullopt},
      {"pads", AttrType::kInts, std::nullopt},
      {"strides", AttrType::kInts, std::nullopt},
  };
}

}  // namespace

std::vector<OpDef> conv_ops() {
  std::vector<OpDef> ops;
  {
    OpDef d;
    d.name = "Conv";
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.attrs = window_attr_specs();
    d.kind = FusionKind::kAnchor;
    d.infer = infer_conv;
    d.reference = conv_kernel;
    d.flops = conv_flops;
    d.summary = "N-d convolution (1-3 spatial dims) with groups, strides, dilations, padding";
    ops.push_back(std::move(d));
  }
  {
    OpDef d;
    d.name = "ConvTranspose";
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.attrs = window_attr_specs();
    d.attrs.push_back({"output_padding", AttrType::kInts, std::nullopt});
    d.attrs.push_back({"output_shape", AttrType::kInts, std::nullopt});
    d.kind = FusionKind::kAnchor;
    d.infer = infer_conv_transpose;
    d.reference = conv_transpose_kernel;
    d.flops = conv_transpose_flops;
    d.summary = "transposed convolution (1-3 spatial dims): the gradient of Conv w.r.t. its input";
    ops.push_back(std::move(d));
  }
  return ops;
}

}  // namespace opfuse
