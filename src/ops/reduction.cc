// The reduction family: Reduce* over a set of axes, ArgMax/ArgMin over one axis, and (from
// reduction_norm.cc) Softmax, LogSoftmax and LayerNormalization.
//
// Axes: ReduceSum takes them as an optional input (opset 13+) with noop_with_empty_axes; the
// other Reduce ops take the `axes` attribute (opset 13-17). Absent or empty axes reduce all.
#include <cmath>
#include <limits>

#include "ops/op_list.h"
#include "ops/reduction_internal.h"

namespace opfuse {
namespace {

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

bool reduce_dtype_ok(DType t) { return t != DType::kBool; }

// The reduction axes a node asks for. `known` is false when they come from a non-constant input.
struct AxesRequest {
  bool known = true;
  std::vector<int64_t> axes;  // as written (not normalised); empty means all or noop
  bool noop = false;          // empty axes with noop_with_empty_axes: the op is the identity
};

template <bool kAxesInput>
AxesRequest axes_request(const AttrReader& attrs, const Tensor* axes_input, bool has_axes_input) {
  AxesRequest req;
  if constexpr (kAxesInput) {
    if (has_axes_input) {
      if (axes_input == nullptr) {
        req.known = false;
        return req;
      }
      req.axes = axes_input->to_int_vector();
    }
    req.noop = req.axes.empty() && attrs.get_int("noop_with_empty_axes") != 0;
  } else {
    req.axes = attrs.get_ints("axes");
  }
  return req;
}

template <bool kAxesInput>
Status infer_reduce(InferContext& ctx) {
  const DType dtype = ctx.input_dtype(0);
  if (dtype != DType::kUndefined && !reduce_dtype_ok(dtype)) {
    return ctx.error(str_cat("input dtype ", dtype_name(dtype), " is not supported"));
  }
  if constexpr (kAxesInput) {
    if (ctx.has_input(1) && ctx.input_dtype(1) != DType::kUndefined &&
        ctx.input_dtype(1) != DType::kI64) {
      return ctx.error(str_cat("axes must be i64, got ", dtype_name(ctx.input_dtype(1))));
    }
  }
  const bool keepdims = ctx.attrs().get_int("keepdims") != 0;
  const AxesRequest req =
      axes_request<kAxesInput>(ctx.attrs(), ctx.input_constant(1), ctx.has_input(1));
  const std::optional<Shape>& in = ctx.input_shape(0);
  if (req.noop) {
    ctx.set_output(0, dtype, in);
    return Status::ok();
  }
  if (!in) {
    // Rank unknown: only a full reduction without keepdims has a known (scalar) result.
    const bool all = req.known && req.axes.empty();
    ctx.set_output(0, dtype, all && !keepdims ? std::optional<Shape>(Shape{}) : std::nullopt);
    return Status::ok();
  }
  const int64_t rank = static_cast<int64_t>(in->size());
  if (!req.known) {
    // Which dims are reduced is unknown: keepdims keeps the rank; otherwise the axes' length
    // (when its shape is known) gives the rank.
    if (keepdims) {
      ctx.set_output(0, dtype, Shape(rank, Dim::unknown()));
      return Status::ok();
    }
    const std::optional<Shape>& axes_shape = ctx.input_shape(1);
    if (axes_shape && axes_shape->size() == 1 && (*axes_shape)[0].is_known() &&
        (*axes_shape)[0].value() > 0) {
      const int64_t out_rank = rank - (*axes_shape)[0].value();
      if (out_rank < 0) {
        return ctx.error(str_cat("axes has ", (*axes_shape)[0].value(),
                                 " entries but the input has rank ", rank));
      }
      ctx.set_output(0, dtype, Shape(out_rank, Dim::unknown()));
    } else {
      ctx.set_output(0, dtype, std::nullopt);
    }
    return Status::ok();
  }
  OPFUSE_ASSIGN_OR_RETURN(std::vector<int64_t> axes, reduction_axes(ctx.node(), req.axes, rank));
  ctx.set_output(0, dtype, reduced_shape(*in, axes, keepdims));
  return Status::ok();
}

// Integers accumulate in int64 (wrapping like the narrow type would, without signed-overflow
// UB); floats in double, so f32 sums over long rows keep their accuracy.
inline int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

template <ReduceKind K, typename T>
void reduce_typed(const Tensor& in, Tensor& out, const ReduceLayout& layout) {
  const T* x = in.data<T>();
  T* y = out.data<T>();
  constexpr bool kInt = std::is_integral_v<T>;
  const int64_t count = layout.count;
#pragma omp parallel for schedule(static) if (layout.outer > 1 && \
                                                  layout.outer * count >= kReduceParallelThreshold)
  for (int64_t o = 0; o < layout.outer; ++o) {
    const int64_t base = layout.base(o);
    if constexpr (kInt && (K == ReduceKind::kSum || K == ReduceKind::kMean ||
                           K == ReduceKind::kProd || K == ReduceKind::kL1 ||
                           K == ReduceKind::kSumSquare)) {
      int64_t acc = K == ReduceKind::kProd ? 1 : 0;
      layout.for_each_reduced(base, [&](int64_t i) {
        const int64_t v = static_cast<int64_t>(x[i]);
        if constexpr (K == ReduceKind::kProd) {
          acc = wrap_mul(acc, v);
        } else if constexpr (K == ReduceKind::kL1) {
          acc = wrap_add(acc, v < 0 ? -v : v);
        } else if constexpr (K == ReduceKind::kSumSquare) {
          acc = wrap_add(acc, wrap_mul(v, v));
        } else {
          acc = wrap_add(acc, v);
        }
      });
      if constexpr (K == ReduceKind::kMean) acc = count > 0 ? acc / count : 0;
      y[o] = static_cast<T>(acc);
    } else if constexpr (kInt && (K == ReduceKind::kMax || K == ReduceKind::kMin)) {
      T acc = K == ReduceKind::kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
      layout.for_each_reduced(base, [&](int64_t i) {
        if (K == ReduceKind::kMax ? x[i] > acc : x[i] < acc) acc = x[i];
      });
      y[o] = acc;
    } else if constexpr (K == ReduceKind::kMax || K == ReduceKind::kMin) {
      // NaN propagates (as in numpy): once acc is NaN no comparison replaces it.
      constexpr double kInf = std::numeric_limits<double>::infinity();
      double acc = K == ReduceKind::kMax ? -kInf : kInf;
      layout.for_each_reduced(base, [&](int64_t i) {
        const double v = element_to_double(x[i]);
        if ((K == ReduceKind::kMax ? v > acc : v < acc) || std::isnan(v)) acc = v;
      });
      y[o] = element_from_double<T>(acc);
    } else if constexpr (K == ReduceKind::kLogSumExp) {
      // Shift by the max so exp never overflows.
      double m = -std::numeric_limits<double>::infinity();
      layout.for_each_reduced(base, [&](int64_t i) {
        const double v = element_to_double(x[i]);
        if (v > m || std::isnan(v)) m = v;
      });
      double result = m;
      if (std::isfinite(m)) {
        double sum = 0;
        layout.for_each_reduced(base, [&](int64_t i) { sum += std::exp(element_to_double(x[i]) - m); });
        result = m + std::log(sum);
      }
      y[o] = element_from_double<T>(result);
    } else {
      double acc = K == ReduceKind::kProd ? 1.0 : 0.0;
      layout.for_each_reduced(base, [&](int64_t i) {
        const double v = element_to_double(x[i]);
        if constexpr (K == ReduceKind::kProd) {
          acc *= v;
        } else if constexpr (K == ReduceKind::kL1) {
          acc += std::fabs(v);
        } else if constexpr (K == ReduceKind::kL2 || K == ReduceKind::kSumSquare) {
          acc += v * v;
        } else {
          acc += v;
        }
      });
      if constexpr (K == ReduceKind::kMean) acc /= static_cast<double>(count);
      if constexpr (K == ReduceKind::kL2) acc = std::sqrt(acc);
      if constexpr (K == ReduceKind::kLogSum) acc = std::log(acc);
      y[o] = element_from_double<T>(acc);
    }
  }
}

template <ReduceKind K, bool kAxesInput>
Status reduce_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  if (!reduce_dtype_ok(in.dtype())) {
    return ctx.error(str_cat("input dtype ", dtype_name(in.dtype()), " is not supported"));
  }
  const AxesRequest req =
      axes_request<kAxesInput>(ctx.attrs(), ctx.input_or_null(1), ctx.has_input(1));
  if (req.noop) {
    ctx.set_output(0, in);
    return Status::ok();
  }
  OPFUSE_ASSIGN_OR_RETURN(std::vector<int64_t> axes, reduction_axes(ctx.node(), req.axes, in.rank()));
  const bool keepdims = ctx.attrs().get_int("keepdims") != 0;
  std::vector<bool> reduced(in.dims().size(), axes.empty());
  for (int64_t a : axes) reduced[a] = true;
  OPFUSE_ASSIGN_OR_RETURN(Tensor * out,
                          ctx.allocate_output(0, in.dtype(), reduced_dims(in.dims(), axes, keepdims)));
  const ReduceLayout layout = make_reduce_layout(in.dims(), reduced);
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) reduce_typed<K, T>(in, *out, layout);
  });
  return Status::ok();
}

// One operation per input element; the L2/log-sum-exp extras are noise at this granularity.
int64_t reduce_flops(const Node& node) {
  auto dims = static_input_dims(node, 0);
  return dims ? numel_of(*dims) : -1;
}

template <ReduceKind K, bool kAxesInput>
OpDef reduce_def(const char* name, ReduceSpec spec, const char* summary) {
  OpDef def;
  def.name = name;
  def.min_inputs = 1;
  def.max_inputs = kAxesInput ? 2 : 1;
  def.kind = FusionKind::kReduction;
  def.attrs.push_back(AttrSpec{"keepdims", AttrType::kInt, AttrValue(int64_t{1})});
  if constexpr (kAxesInput) {
    def.attrs.push_back(AttrSpec{"noop_with_empty_axes", AttrType::kInt, AttrValue(int64_t{0})});
  } else {
    def.attrs.push_back(AttrSpec{"axes", AttrType::kInts, std::nullopt});
  }
  def.infer = infer_reduce<kAxesInput>;
  def.reference = reduce_kernel<K, kAxesInput>;
  def.reduce = spec;
  def.flops = reduce_flops;
  def.summary = summary;
  return def;
}

// ---- ArgMax / ArgMin ----

Status infer_arg(InferContext& ctx) {
  const DType dtype = ctx.input_dtype(0);
  if (dtype == DType::kBool) return ctx.error("input dtype bool is not supported");
  const std::optional<Shape>& in = ctx.input_shape(0);
  if (!in) {
    ctx.set_output(0, DType::kI64, std::nullopt);
    return Status::ok();
  }
  const int64_t rank = static_cast<int64_t>(in->size());
  OPFUSE_ASSIGN_OR_RETURN(int64_t axis,
                          reduction_axis(ctx.node(), ctx.attrs().get_int("axis"), rank));
  ctx.set_output(0, DType::kI64, reduced_shape(*in, {axis}, ctx.attrs().get_int("keepdims") != 0));
  return Status::ok();
}

template <typename T>
bool is_nan_value(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

// Integers compare as themselves (int64 above 2^53 must not round through double).
template <typename T>
auto as_comparable(T v) {
  if constexpr (std::is_same_v<T, Half>) {
    return half_to_float(v);
  } else {
    return v;
  }
}

// NaN wins over any number (numpy's argmax/argmin return the first NaN); ties go to the first
// index, or the last with select_last_index.
template <bool kMax, typename T>
void arg_typed(const Tensor& in, Tensor& out, const ReduceLayout& layout, bool select_last) {
  using C = std::conditional_t<std::is_same_v<T, Half>, float, T>;
  const T* x = in.data<T>();
  int64_t* y = out.data<int64_t>();
  const int64_t n = layout.count;
  const int64_t stride = layout.red_strides.empty() ? 1 : layout.red_strides[0];
#pragma omp parallel for schedule(static) if (layout.outer > 1 && \
                                                  layout.outer * n >= kReduceParallelThreshold)
  for (int64_t o = 0; o < layout.outer; ++o) {
    const int64_t base = layout.base(o);
    C best = as_comparable(x[base]);
    int64_t best_j = 0;
    for (int64_t j = 1; j < n; ++j) {
      const C v = as_comparable(x[base + j * stride]);
      bool take;
      if (is_nan_value(v)) {
        take = select_last || !is_nan_value(best);
      } else if (is_nan_value(best)) {
        take = false;
      } else if constexpr (kMax) {
        take = select_last ? v >= best : v > best;
      } else {
        take = select_last ? v <= best : v < best;
      }
      if (take) {
        best = v;
        best_j = j;
      }
    }
    y[o] = best_j;
  }
}

template <bool kMax>
Status arg_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  if (in.dtype() == DType::kBool) return ctx.error("input dtype bool is not supported");
  OPFUSE_ASSIGN_OR_RETURN(int64_t axis,
                          reduction_axis(ctx.node(), ctx.attrs().get_int("axis"), in.rank()));
  const bool keepdims = ctx.attrs().get_int("keepdims") != 0;
  OPFUSE_ASSIGN_OR_RETURN(Tensor * out,
                          ctx.allocate_output(0, DType::kI64, reduced_dims(in.dims(), {axis}, keepdims)));
  if (out->numel() > 0 && in.dim(axis) == 0) {
    return ctx.error(str_cat("cannot take ", ctx.node().op_type(), " over axis ", axis,
                             " of size 0 (input ", in.type_string(), ")"));
  }
  std::vector<bool> reduced(in.dims().size(), false);
  reduced[axis] = true;
  const ReduceLayout layout = make_reduce_layout(in.dims(), reduced);
  const bool select_last = ctx.attrs().get_int("select_last_index") != 0;
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) arg_typed<kMax, T>(in, *out, layout, select_last);
  });
  return Status::ok();
}

OpDef arg_def(const char* name, KernelFn kernel, const char* summary) {
  OpDef def;
  def.name = name;
  def.kind = FusionKind::kReduction;
  def.attrs = {AttrSpec{"axis", AttrType::kInt, AttrValue(int64_t{0})},
               AttrSpec{"keepdims", AttrType::kInt, AttrValue(int64_t{1})},
               AttrSpec{"select_last_index", AttrType::kInt, AttrValue(int64_t{0})}};
  def.infer = infer_arg;
  def.reference = kernel;
  def.flops = reduce_flops;
  def.summary = summary;
  return def;
}

}  // namespace

std::vector<OpDef> reduction_ops() {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const ReduceSpec none{};
  std::vector<OpDef> ops = {
      reduce_def<ReduceKind::kSum, true>("ReduceSum", {ReduceCombiner::kSum, 0.0, false},
                                         "sum over axes (axes input)"),
      reduce_def<ReduceKind::kMean, false>("ReduceMean", {ReduceCombiner::kSum, 0.0, true},
                                           "mean over axes"),
      reduce_def<ReduceKind::kMax, false>("ReduceMax", {ReduceCombiner::kMax, -kInf, false},
                                          "maximum over axes"),
      reduce_def<ReduceKind::kMin, false>("ReduceMin", {ReduceCombiner::kMin, kInf, false},
                                          "minimum over axes"),
      reduce_def<ReduceKind::kProd, false>("ReduceProd", {ReduceCombiner::kProd, 1.0, false},
                                           "product over axes"),
      // Not plain combiners: they transform elements before summing or the sum after.
      reduce_def<ReduceKind::kL1, false>("ReduceL1", none, "sum of absolute values over axes"),
      reduce_def<ReduceKind::kL2, false>("ReduceL2", none, "Euclidean norm over axes"),
      reduce_def<ReduceKind::kSumSquare, false>("ReduceSumSquare", none, "sum of squares over axes"),
      reduce_def<ReduceKind::kLogSum, false>("ReduceLogSum", none, "log of the sum over axes"),
      reduce_def<ReduceKind::kLogSumExp, false>("ReduceLogSumExp", none,
                                                "log of the sum of exponentials over axes"),
      arg_def("ArgMax", arg_kernel<true>, "index of the maximum along an axis"),
      arg_def("ArgMin", arg_kernel<false>, "index of the minimum along an axis"),
  };
  for (OpDef& def : normalization_ops()) ops.push_back(std::move(def));
  for (OpDef& def : axis_scan_ops()) ops.push_back(std::move(def));
  for (OpDef& def : channel_normalization_ops()) ops.push_back(std::move(def));
  return ops;
}

}  // namespace opfuse
