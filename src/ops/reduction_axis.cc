// Ops that combine the elements along one axis but keep (or resize) that axis instead of removing
// it: CumSum (prefix sums, optionally exclusive and/or from the end), Hardmax (one-hot of the
// first maximum) and TopK (the k largest or smallest values and their indices). Each views its
// input as [outer, n, inner] and walks the n elements of every (outer, inner) line with stride
// `inner`.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "ops/reduction_internal.h"
#include "ops/tensor_helpers.h"

namespace opfuse {
namespace {

struct AxisLines {
  int64_t outer = 1, n = 1, inner = 1;
  int64_t start(int64_t line) const { return (line / inner) * n * inner + line % inner; }
  int64_t count() const { return outer * inner; }
};

AxisLines axis_lines(const std::vector<int64_t>& dims, int64_t axis) {
  AxisLines l;
  for (int64_t i = 0; i < axis; ++i) l.outer *= dims[i];
  l.n = dims[axis];
  for (size_t i = static_cast<size_t>(axis) + 1; i < dims.size(); ++i) l.inner *= dims[i];
  return l;
}

// ---- CumSum --------------------------------------------------------------------------------

bool cumsum_dtype(DType t) {
  return is_float(t) || t == DType::kI32 || t == DType::kI64 || t == DType::kU32 || t == DType::kU64;
}

Status infer_cumsum(InferContext& ctx) {
  const DType dtype = ctx.input_dtype(0);
  if (dtype != DType::kUndefined && !cumsum_dtype(dtype)) {
    return ctx.error(str_cat("x has dtype ", dtype_name(dtype), "; CumSum takes float, int32/64 or uint32/64"));
  }
  OPFUSE_TRY(check_integer_input(ctx, 1, "axis"));
  const auto& x = ctx.input_shape(0);
  if (const auto& axis_shape = ctx.input_shape(1); axis_shape && axis_shape->size() > 1) {
    return ctx.error(str_cat("axis ", shape_to_string(*axis_shape), " must be a scalar"));
  }
  if (auto axis = constant_ints(ctx, 1); axis && x) {
    if (axis->size() != 1) return ctx.error(str_cat("axis must hold one value, got ", ints_to_string(*axis)));
    OPFUSE_TRY(reduction_axis(ctx.node(), (*axis)[0], static_cast<int64_t>(x->size())).status());
  }
  ctx.set_output(0, dtype, x);
  return Status::ok();
}

// Sums in double for floats (f16 and f32 gain accuracy on long axes) and in the type's own
// unsigned arithmetic for integers, where overflow wraps and no value round-trips through double.
template <typename T, bool = std::is_integral_v<T>>
struct CumSumAccumulator {
  using type = double;
};
template <typename T>
struct CumSumAccumulator<T, true> {
  using type = std::make_unsigned_t<T>;
};

template <typename T>
void cumsum_typed(const T* x, T* y, const AxisLines& l, bool exclusive, bool reverse) {
  using Acc = typename CumSumAccumulator<T>::type;
  const auto load = [](T v) -> Acc {
    if constexpr (std::is_integral_v<T>) return static_cast<Acc>(v);
    else return element_to_double(v);
  };
  const auto store = [](Acc v) -> T {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(v);
    else return element_from_double<T>(v);
  };
  for (int64_t line = 0; line < l.count(); ++line) {
    const int64_t base = l.start(line);
    Acc sum = 0;
    for (int64_t step = 0; step < l.n; ++step) {
      const int64_t k = base + (reverse ? l.n - 1 - step : step) * l.inner;
      const Acc v = load(x[k]);
      if (!exclusive) sum += v;
      y[k] = store(sum);
      if (exclusive) sum += v;
    }
  }
}

Status run_cumsum(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!cumsum_dtype(x.dtype())) {
    return ctx.error(str_cat("x ", x.type_string(), " must be float, int32/64 or uint32/64"));
  }
  OPFUSE_ASSIGN_OR_RETURN(auto axis_values, int_input(ctx, 1, "axis"));
  if (axis_values.size() != 1 || ctx.input(1).rank() > 1) {
    return ctx.error(str_cat("axis ", ctx.input(1).type_string(), " must be a scalar"));
  }
  if (x.rank() == 0) return ctx.error("x must have rank >= 1");
  OPFUSE_ASSIGN_OR_RETURN(int64_t axis, reduction_axis(ctx.node(), axis_values[0], x.rank()));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.dims()));
  const AxisLines lines = axis_lines(x.dims(), axis);
  const bool exclusive = ctx.attrs().get_int("exclusive") != 0;
  const bool reverse = ctx.attrs().get_int("reverse") != 0;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) cumsum_typed<T>(x.data<T>(), y->data<T>(), lines, exclusive, reverse);
  });
  return Status::ok();
}

// ---- Hardmax -------------------------------------------------------------------------------

Status infer_hardmax(InferContext& ctx) {
  const DType dtype = ctx.input_dtype(0);
  if (dtype != DType::kUndefined && !is_float(dtype)) {
    return ctx.error(str_cat("input has dtype ", dtype_name(dtype), "; it must be a float dtype"));
  }
  const auto& in = ctx.input_shape(0);
  if (in) {
    OPFUSE_TRY(reduction_axis(ctx.node(), ctx.attrs().get_int("axis"), static_cast<int64_t>(in->size())).status());
  }
  ctx.set_output(0, dtype, in);
  return Status::ok();
}

// The first index of the maximum of each line, as numpy.argmax: a NaN counts as the maximum.
Status run_hardmax(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!is_float(x.dtype())) return ctx.error(str_cat("input ", x.type_string(), " must have a float dtype"));
  if (x.rank() == 0) return ctx.error("input must have rank >= 1");
  OPFUSE_ASSIGN_OR_RETURN(int64_t axis, reduction_axis(ctx.node(), ctx.attrs().get_int("axis"), x.rank()));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.dims()));
  const AxisLines l = axis_lines(x.dims(), axis);
  if (l.n == 0) return Status::ok();
  for (int64_t line = 0; line < l.count(); ++line) {
    const int64_t base = l.start(line);
    int64_t best = 0;
    double best_value = x.get_double(base);
    for (int64_t j = 1; j < l.n && !std::isnan(best_value); ++j) {
      const double v = x.get_double(base + j * l.inner);
      if (v > best_value || std::isnan(v)) {
        best = j;
        best_value = v;
      }
    }
    y->set_double(base + best * l.inner, 1.0);
  }
  return Status::ok();
}

// ---- TopK ----------------------------------------------------------------------------------

Status infer_topk(InferContext& ctx) {
  OPFUSE_TRY(check_integer_input(ctx, 1, "K"));
  const DType dtype = ctx.input_dtype(0);
  if (dtype == DType::kBool) return ctx.error("X has dtype bool; TopK takes numeric dtypes");
  const auto& x = ctx.input_shape(0);
  std::optional<Shape> out;
  if (x) {
    if (x->empty()) return ctx.error("X must have rank >= 1");
    OPFUSE_ASSIGN_OR_RETURN(int64_t axis,
                            reduction_axis(ctx.node(), ctx.attrs().get_int("axis"), static_cast<int64_t>(x->size())));
    out = *x;
    (*out)[axis] = Dim::unknown();
    if (auto k = constant_ints(ctx, 1)) {
      if (k->size() != 1) return ctx.error(str_cat("K must hold one value, got ", ints_to_string(*k)));
      const int64_t kv = (*k)[0];
      const Dim& n = (*x)[axis];
      if (kv < 0 || (n.is_known() && kv > n.value())) {
        return ctx.error(str_cat("K = ", kv, " is not in [0, ", n.to_string(), "] (axis ", axis, " of X ",
                                 shape_to_string(*x), ")"));
      }
      (*out)[axis] = Dim(kv);
    }
  }
  ctx.set_output(0, dtype, out);
  ctx.set_output(1, DType::kI64, out);
  return Status::ok();
}

// Orders the indices of one line: larger values first when `largest` (else smaller first), equal
// values by index, and NaN above every number (numpy's sort places NaN last, i.e. largest).
struct TopKOrder {
  const std::vector<double>* values;
  bool largest;
  bool operator()(int64_t a, int64_t b) const {
    const double va = (*values)[a], vb = (*values)[b];
    const bool na = std::isnan(va), nb = std::isnan(vb);
    if (na || nb) {
      if (na && nb) return a < b;
      return largest ? na : nb;
    }
    if (va != vb) return largest ? va > vb : va < vb;
    return a < b;
  }
};

Status run_topk(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() == 0) return ctx.error("X must have rank >= 1");
  if (x.dtype() == DType::kBool) return ctx.error("X has dtype bool; TopK takes numeric dtypes");
  OPFUSE_ASSIGN_OR_RETURN(int64_t axis, reduction_axis(ctx.node(), ctx.attrs().get_int("axis"), x.rank()));
  OPFUSE_ASSIGN_OR_RETURN(auto k_values, int_input(ctx, 1, "K"));
  if (k_values.size() != 1) return ctx.error(str_cat("K ", ctx.input(1).type_string(), " must hold one value"));
  const int64_t k = k_values[0];
  if (k < 0 || k > x.dim(axis)) {
    return ctx.error(str_cat("K = ", k, " is not in [0, ", x.dim(axis), "] (axis ", axis, " of X ",
                             x.type_string(), ")"));
  }
  std::vector<int64_t> out_dims = x.dims();
  out_dims[axis] = k;
  OPFUSE_ASSIGN_OR_RETURN(Tensor * values, ctx.allocate_output(0, x.dtype(), out_dims));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * indices, ctx.allocate_output(1, DType::kI64, out_dims));
  const AxisLines in = axis_lines(x.dims(), axis);
  const AxisLines out = axis_lines(out_dims, axis);
  // The order of equal elements is fixed (by index), so `sorted` = 0 may return sorted output.
  const TopKOrder order{nullptr, ctx.attrs().get_int("largest") != 0};
  std::vector<double> line_values(static_cast<size_t>(in.n));
  std::vector<int64_t> perm(static_cast<size_t>(in.n));
  int64_t* index_out = indices->data<int64_t>();
  for (int64_t line = 0; line < in.count(); ++line) {
    const int64_t src = in.start(line), dst = out.start(line);
    for (int64_t j = 0; j < in.n; ++j) line_values[j] = x.get_double(src + j * in.inner);
    std::iota(perm.begin(), perm.end(), 0);
    TopKOrder line_order = order;
    line_order.values = &line_values;
    std::partial_sort(perm.begin(), perm.begin() + k, perm.end(), line_order);
    for (int64_t j = 0; j < k; ++j) index_out[dst + j * out.inner] = perm[j];
  }
  // Values are copied as elements (not through double) so int64 and uint64 stay exact.
  const size_t elem = dtype_size(x.dtype());
  const auto* src_bytes = static_cast<const uint8_t*>(x.raw_data());
  auto* dst_bytes = static_cast<uint8_t*>(values->raw_data());
  for (int64_t line = 0; line < in.count(); ++line) {
    const int64_t src = in.start(line), dst = out.start(line);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t o = dst + j * out.inner;
      std::memcpy(dst_bytes + o * elem, src_bytes + (src + index_out[o] * in.inner) * elem, elem);
    }
  }
  return Status::ok();
}

}  // namespace

std::vector<OpDef> axis_scan_ops() {
  std::vector<OpDef> ops;
  OpDef cumsum = op_record("CumSum", 2, 2, FusionKind::kOpaque, infer_cumsum, run_cumsum,
                         "running sum along the axis input (exclusive, reverse)");
  cumsum.attrs = {{"exclusive", AttrType::kInt, AttrValue(int64_t{0})},
                  {"reverse", AttrType::kInt, AttrValue(int64_t{0})}};
  ops.push_back(std::move(cumsum));
  OpDef hardmax = op_record("Hardmax", 1, 1, FusionKind::kOpaque, infer_hardmax, run_hardmax,
                          "1 at the first maximum along an axis, 0 elsewhere");
  hardmax.attrs = {{"axis", AttrType::kInt, AttrValue(int64_t{-1})}};
  ops.push_back(std::move(hardmax));
  OpDef topk = op_record("TopK", 2, 2, FusionKind::kOpaque, infer_topk, run_topk,
                       "the K largest (or smallest) values along an axis and their indices");
  topk.max_outputs = topk.min_outputs = 2;
  topk.attrs = {{"axis", AttrType::kInt, AttrValue(int64_t{-1})},
                {"largest", AttrType::kInt, AttrValue(int64_t{1})},
                {"sorted", AttrType::kInt, AttrValue(int64_t{1})}};
  ops.push_back(std::move(topk));
  return ops;
}

}  // namespace opfuse
