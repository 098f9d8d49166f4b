// Softmax, LogSoftmax (opset-13 semantics: normalise along one axis, default -1) and
// LayerNormalization (opset 17). Their reference kernels are the eager baseline for
// transformer models (BERT: 12 x 128 x 128 softmax rows, 128 x 768 layer-norm rows), so they
// are numerically stable (max-shifted exp, two-pass variance, double accumulators) and spread
// rows over OpenMP threads when the tensor is large.
#include <cmath>
#include <limits>

#include "ops/reduction_internal.h"

namespace opfuse {
namespace {

bool is_float_input(DType t) { return t == DType::kUndefined || is_float(t); }

// ---- Softmax / LogSoftmax ----

Status infer_softmax(InferContext& ctx) {
  const DType dtype = ctx.input_dtype(0);
  if (!is_float_input(dtype)) {
    return ctx.error(str_cat("input dtype ", dtype_name(dtype), " is not a float type"));
  }
  const std::optional<Shape>& in = ctx.input_shape(0);
  if (in) {
    OPFUSE_TRY(reduction_axis(ctx.node(), ctx.attrs().get_int("axis"),
                              static_cast<int64_t>(in->size()))
                   .status());
  }
  ctx.set_output(0, dtype, in);
  return Status::ok();
}

// x viewed as [outer, n, inner]; each of the outer*inner rows (stride `inner`) is normalised.
template <bool kLog, typename T>
void softmax_typed(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  // f32/f16 compute exp in float (exact enough, and 2-3x faster than double); sums in double.
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  constexpr bool kStoreExp = std::is_same_v<T, C>;  // y can hold exp values between passes
  const int64_t rows = outer * inner;
#pragma omp parallel for schedule(static) if (rows > 1 && rows * n >= kReduceParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = (r / inner) * n * inner + r % inner;
    C m = -std::numeric_limits<C>::infinity();
    for (int64_t j = 0; j < n; ++j) {
      const C v = static_cast<C>(element_to_double(x[base + j * inner]));
      if (v > m || std::isnan(v)) m = v;
    }
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t k = base + j * inner;
      const C e = std::exp(static_cast<C>(element_to_double(x[k])) - m);
      sum += e;
      if constexpr (kStoreExp && !kLog) y[k] = e;
    }
    if constexpr (kLog) {
      const double shift = static_cast<double>(m) + std::log(sum);
      for (int64_t j = 0; j < n; ++j) {
        const int64_t k = base + j * inner;
        y[k] = element_from_double<T>(element_to_double(x[k]) - shift);
      }
    } else {
      const double inv = 1.0 / sum;
      for (int64_t j = 0; j < n; ++j) {
        const int64_t k = base + j * inner;
        double e;
        if constexpr (kStoreExp) {
          e = static_cast<double>(y[k]);
        } else {
          e = std::exp(static_cast<C>(element_to_double(x[k])) - m);
        }
        y[k] = element_from_double<T>(e * inv);
      }
    }
  }
}

template <bool kLog>
Status softmax_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  if (!is_float(in.dtype())) {
    return ctx.error(str_cat("input dtype ", dtype_name(in.dtype()), " is not a float type"));
  }
  if (in.rank() == 0) return ctx.error("input must have rank >= 1");
  OPFUSE_ASSIGN_OR_RETURN(int64_t axis,
                          reduction_axis(ctx.node(), ctx.attrs().get_int("axis"), in.rank()));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, in.dtype(), in.dims()));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= in.dim(i);
  for (int64_t i = axis + 1; i < in.rank(); ++i) inner *= in.dim(i);
  const int64_t n = in.dim(axis);
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  std::is_same_v<T, Half>) {
      softmax_typed<kLog, T>(in.data<T>(), out->data<T>(), outer, n, inner);
    }
  });
  return Status::ok();
}

int64_t softmax_flops(const Node& node) {
  auto dims = static_input_dims(node, 0);
  return dims ? 5 * numel_of(*dims) : -1;  // max, subtract, exp, sum, scale
}

OpDef softmax_def(const char* name, KernelFn kernel, const char* summary) {
  OpDef def;
  def.name = name;
  def.kind = FusionKind::kReduction;
  def.attrs = {AttrSpec{"axis", AttrType::kInt, AttrValue(int64_t{-1})}};
  def.infer = infer_softmax;
  def.reference = kernel;
  def.flops = softmax_flops;
  def.summary = summary;
  return def;
}

// ---- LayerNormalization ----

// ONNX TensorProto element types allowed for stash_type (the Mean/InvStdDev dtype).
Result<DType> stash_dtype(const Node& node, int64_t stash_type) {
  switch (stash_type) {
    case 1: return DType::kF32;
    case 10: return DType::kF16;
    case 11: return DType::kF64;
    default:
      return Status::user_error(str_cat(node.describe(), ": stash_type ", stash_type,
                                        " is not supported (use 1 for float, 10 for float16 or "
                                        "11 for double)"));
  }
}

// Scale and B broadcast unidirectionally onto the normalised dims X[axis:].
Status check_param_shape(const Node& node, const char* what, const Shape& param,
                         const Shape& normalized) {
  const int64_t extra = static_cast<int64_t>(param.size()) - static_cast<int64_t>(normalized.size());
  for (int64_t i = 0; i < static_cast<int64_t>(param.size()); ++i) {
    const Dim& p = param[i];
    if (!p.is_known() || p.value() == 1) continue;
    const Dim* t = i - extra >= 0 ? &normalized[i - extra] : nullptr;
    if (t == nullptr || (t->is_known() && t->value() != p.value())) {
      return Status::user_error(str_cat(node.describe(), ": ", what, " of shape ",
                                        shape_to_string(param),
                                        " does not broadcast to the normalised dims ",
                                        shape_to_string(normalized)));
    }
  }
  return Status::ok();
}

Status infer_layer_norm(InferContext& ctx) {
  const DType dtype = ctx.input_dtype(0);
  if (!is_float_input(dtype)) {
    return ctx.error(str_cat("input dtype ", dtype_name(dtype), " is not a float type"));
  }
  if (!ctx.has_input(1)) return ctx.error("input Scale is required");
  OPFUSE_ASSIGN_OR_RETURN(DType stash, stash_dtype(ctx.node(), ctx.attrs().get_int("stash_type")));
  const std::optional<Shape>& in = ctx.input_shape(0);
  std::optional<Shape> stats_shape;
  if (in) {
    const int64_t rank = static_cast<int64_t>(in->size());
    OPFUSE_ASSIGN_OR_RETURN(int64_t axis,
                            reduction_axis(ctx.node(), ctx.attrs().get_int("axis"), rank));
    const Shape normalized(in->begin() + axis, in->end());
    if (ctx.input_shape(1)) {
      OPFUSE_TRY(check_param_shape(ctx.node(), "Scale", *ctx.input_shape(1), normalized));
    }
    if (ctx.has_input(2) && ctx.input_shape(2)) {
      OPFUSE_TRY(check_param_shape(ctx.node(), "B", *ctx.input_shape(2), normalized));
    }
    stats_shape = *in;
    for (int64_t i = axis; i < rank; ++i) (*stats_shape)[i] = Dim(1);
  }
  ctx.set_output(0, dtype, in);
  for (size_t i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, stash, stats_shape);
  return Status::ok();
}

// For each of the D normalised positions, the element of `param` it reads. Empty when the
// param is laid out exactly like X[axis:] (the common case), so the kernel indexes directly.
std::vector<int64_t> param_index(const std::vector<int64_t>& param,
                                 const std::vector<int64_t>& normalized, int64_t d) {
  if (numel_of(param) == d) return {};
  std::vector<int64_t> index(static_cast<size_t>(d));
  const int64_t rank = static_cast<int64_t>(normalized.size());
  const int64_t extra = static_cast<int64_t>(param.size()) - rank;
  for (int64_t flat = 0; flat < d; ++flat) {
    int64_t rem = flat, p = 0, pstride = 1;
    for (int64_t i = rank - 1; i >= 0; --i) {
      const int64_t coord = rem % normalized[i];
      rem /= normalized[i];
      const int64_t pi = i + extra;
      if (pi < 0) continue;
      if (param[pi] != 1) p += coord * pstride;
      pstride *= param[pi];
    }
    index[flat] = p;
  }
  return index;
}

template <typename T>
void layer_norm_typed(KernelContext& ctx, int64_t outer, int64_t d, double eps,
                      const std::vector<int64_t>& scale_idx, const std::vector<int64_t>& bias_idx,
                      Tensor& y, Tensor* mean_out, Tensor* inv_out) {
  const T* x = ctx.input(0).data<T>();
  const Tensor& scale = ctx.input(1);
  const Tensor* bias = ctx.input_or_null(2);
  const T* s = scale.data<T>();
  const T* b = bias ? bias->data<T>() : nullptr;
  T* out = y.data<T>();
#pragma omp parallel for schedule(static) if (outer > 1 && outer * d >= kReduceParallelThreshold)
  for (int64_t r = 0; r < outer; ++r) {
    const T* row = x + r * d;
    double sum = 0;
    for (int64_t j = 0; j < d; ++j) sum += element_to_double(row[j]);
    const double mean = d > 0 ? sum / static_cast<double>(d) : 0.0;
    // Two passes: the variance of (x - mean) avoids E[x^2] - E[x]^2 cancellation.
    double sq = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double c = element_to_double(row[j]) - mean;
      sq += c * c;
    }
    const double var = d > 0 ? sq / static_cast<double>(d) : 0.0;
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < d; ++j) {
      const double sv = element_to_double(s[scale_idx.empty() ? j : scale_idx[j]]);
      double v = (element_to_double(row[j]) - mean) * inv * sv;
      if (b) v += element_to_double(b[bias_idx.empty() ? j : bias_idx[j]]);
      out[r * d + j] = element_from_double<T>(v);
    }
    if (mean_out) mean_out->set_double(r, mean);
    if (inv_out) inv_out->set_double(r, inv);
  }
}

Status layer_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!is_float(x.dtype())) {
    return ctx.error(str_cat("input dtype ", dtype_name(x.dtype()), " is not a float type"));
  }
  if (!ctx.has_input(1)) return ctx.error("input Scale is required");
  const Tensor& scale = ctx.input(1);
  const Tensor* bias = ctx.input_or_null(2);
  for (const Tensor* p : {&scale, bias}) {
    if (p && p->dtype() != x.dtype()) {
      return ctx.error(str_cat("Scale and B must have X's dtype ", dtype_name(x.dtype()),
                               ", got ", p->type_string()));
    }
  }
  OPFUSE_ASSIGN_OR_RETURN(DType stash, stash_dtype(ctx.node(), ctx.attrs().get_int("stash_type")));
  OPFUSE_ASSIGN_OR_RETURN(int64_t axis,
                          reduction_axis(ctx.node(), ctx.attrs().get_int("axis"), x.rank()));
  const std::vector<int64_t> normalized(x.dims().begin() + axis, x.dims().end());
  OPFUSE_TRY(check_param_shape(ctx.node(), "Scale", scale.shape(), make_shape(normalized)));
  if (bias) OPFUSE_TRY(check_param_shape(ctx.node(), "B", bias->shape(), make_shape(normalized)));
  const int64_t d = numel_of(normalized);
  const int64_t outer = d > 0 ? x.numel() / d : 0;

  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.dims()));
  std::vector<int64_t> stats_dims = x.dims();
  for (int64_t i = axis; i < x.rank(); ++i) stats_dims[i] = 1;
  Tensor* mean_out = nullptr;
  Tensor* inv_out = nullptr;
  if (ctx.num_outputs() > 1) {
    OPFUSE_ASSIGN_OR_RETURN(mean_out, ctx.allocate_output(1, stash, stats_dims));
  }
  if (ctx.num_outputs() > 2) {
    OPFUSE_ASSIGN_OR_RETURN(inv_out, ctx.allocate_output(2, stash, stats_dims));
  }
  const std::vector<int64_t> scale_idx = param_index(scale.dims(), normalized, d);
  const std::vector<int64_t> bias_idx =
      bias ? param_index(bias->dims(), normalized, d) : std::vector<int64_t>{};
  const double eps = ctx.attrs().get_float("epsilon");
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  std::is_same_v<T, Half>) {
      layer_norm_typed<T>(ctx, outer, d, eps, scale_idx, bias_idx, *y, mean_out, inv_out);
    }
  });
  return Status::ok();
}

int64_t layer_norm_flops(const Node& node) {
  auto dims = static_input_dims(node, 0);
  return dims ? 8 * numel_of(*dims) : -1;  // mean, centre, square, sum, scale, shift ...
}

}  // namespace

std::vector<OpDef> normalization_ops() {
  OpDef ln;
  ln.name = "LayerNormalization";
  ln.min_opset = 17;
  ln.min_inputs = 2;
  ln.max_inputs = 3;
  ln.min_outputs = 1;
  ln.max_outputs = 3;
  ln.kind = FusionKind::kReduction;
  ln.attrs = {AttrSpec{"axis", AttrType::kInt, AttrValue(int64_t{-1})},
              AttrSpec{"epsilon", AttrType::kFloat, AttrValue(1e-5f)},
              AttrSpec{"stash_type", AttrType::kInt, AttrValue(int64_t{1})}};
  ln.infer = infer_layer_norm;
  ln.reference = layer_norm_kernel;
  ln.flops = layer_norm_flops;
  ln.summary = "normalise over the trailing dims from axis, then scale and shift";
  return {
      softmax_def("Softmax", softmax_kernel<false>, "exp normalised to sum 1 along an axis"),
      softmax_def("LogSoftmax", softmax_kernel<true>, "log of Softmax along an axis"),
      std::move(ln),
  };
}

}  // namespace opfuse
