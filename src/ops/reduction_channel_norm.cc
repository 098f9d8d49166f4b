// Normalisations older CNNs use: InstanceNormalization (per sample and channel over the spatial
// dims, then a per-channel scale and bias), LRN (each value divided by a power of the sum of
// squares of its neighbouring channels) and MeanVarianceNormalization (zero mean, unit variance
// over `axes`). Reference kernels in double, two-pass variance, like the other norms.
#include <algorithm>
#include <cmath>

#include "ops/reduction_internal.h"

namespace opfuse {
namespace {

Status check_float_input(const InferContext& ctx, const char* what) {
  const DType t = ctx.input_dtype(0);
  if (t != DType::kUndefined && !is_float(t)) {
    return ctx.error(str_cat(what, " has dtype ", dtype_name(t), "; it must be a float dtype"));
  }
  return Status::ok();
}

// ---- InstanceNormalization -------------------------------------------------------------------

Status infer_instance_norm(InferContext& ctx) {
  OPFUSE_TRY(check_float_input(ctx, "input"));
  const auto& x = ctx.input_shape(0);
  if (x && x->size() < 2) return ctx.error(str_cat("input ", shape_to_string(*x), " must have rank >= 2 (N, C, ...)"));
  for (size_t i = 1; i < 3; ++i) {
    const auto& p = ctx.input_shape(i);
    if (ctx.input_dtype(i) != DType::kUndefined && ctx.input_dtype(0) != DType::kUndefined &&
        ctx.input_dtype(i) != ctx.input_dtype(0)) {
      return ctx.error(str_cat(i == 1 ? "scale" : "B", " has dtype ", dtype_name(ctx.input_dtype(i)), " but input has ",
                               dtype_name(ctx.input_dtype(0))));
    }
    if (p && (p->size() != 1 || (x && (*p)[0].is_known() && (*x)[1].is_known() && (*p)[0] != (*x)[1]))) {
      return ctx.error(str_cat(i == 1 ? "scale " : "B ", shape_to_string(*p), " must be 1-D with one entry per channel",
                               x ? str_cat(" of input ", shape_to_string(*x)) : std::string()));
    }
  }
  ctx.set_output(0, ctx.input_dtype(0), x);
  return Status::ok();
}

Status run_instance_norm(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor& bias = ctx.input(2);
  if (!is_float(x.dtype()) || x.rank() < 2) {
    return ctx.error(str_cat("input ", x.type_string(), " must be a float tensor of rank >= 2"));
  }
  const int64_t n = x.dim(0), c = x.dim(1), spatial = c == 0 || n == 0 ? 0 : x.numel() / (n * c);
  for (const Tensor* p : {&scale, &bias}) {
    if (p->rank() != 1 || p->dim(0) != c) {
      return ctx.error(str_cat(p == &scale ? "scale " : "B ", p->type_string(), " must have one entry per channel (",
                               c, " in input ", x.type_string(), ")"));
    }
  }
  const double eps = ctx.attrs().get_float("epsilon");
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.dims()));
  for (int64_t row = 0; row < n * c; ++row) {
    const int64_t base = row * spatial, channel = row % c;
    double mean = 0;
    for (int64_t i = 0; i < spatial; ++i) mean += x.get_double(base + i);
    mean /= static_cast<double>(spatial);
    double var = 0;
    for (int64_t i = 0; i < spatial; ++i) var += (x.get_double(base + i) - mean) * (x.get_double(base + i) - mean);
    var /= static_cast<double>(spatial);
    const double mul = scale.get_double(channel) / std::sqrt(var + eps), add = bias.get_double(channel);
    for (int64_t i = 0; i < spatial; ++i) y->set_double(base + i, (x.get_double(base + i) - mean) * mul + add);
  }
  return Status::ok();
}

// ---- LRN ---------------------------------------------------------------------------------------

Status infer_lrn(InferContext& ctx) {
  OPFUSE_TRY(check_float_input(ctx, "input"));
  const auto& x = ctx.input_shape(0);
  if (x && x->size() < 3) return ctx.error(str_cat("input ", shape_to_string(*x), " must have rank >= 3 (N, C, D1, ...)"));
  if (ctx.attrs().get_int("size") <= 0) return ctx.error(str_cat("size ", ctx.attrs().get_int("size"), " must be positive"));
  ctx.set_output(0, ctx.input_dtype(0), x);
  return Status::ok();
}

Status run_lrn(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!is_float(x.dtype()) || x.rank() < 3) {
    return ctx.error(str_cat("input ", x.type_string(), " must be a float tensor of rank >= 3"));
  }
  const int64_t size = ctx.attrs().get_int("size");
  if (size <= 0) return ctx.error(str_cat("size ", size, " must be positive"));
  const double alpha = ctx.attrs().get_float("alpha"), beta = ctx.attrs().get_float("beta");
  const double bias = ctx.attrs().get_float("bias");
  const int64_t c = x.dim(1), inner = c == 0 || x.dim(0) == 0 ? 0 : x.numel() / (x.dim(0) * c);
  // Channels [ch - floor((size-1)/2), ch + ceil((size-1)/2)], clipped to the tensor.
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.dims()));
  for (int64_t n = 0; n < x.dim(0); ++n) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t i = 0; i < inner; ++i) {
        double square_sum = 0;
        for (int64_t k = std::max<int64_t>(0, ch - before); k <= std::min(c - 1, ch + after); ++k) {
          const double v = x.get_double((n * c + k) * inner + i);
          square_sum += v * v;
        }
        const int64_t at = (n * c + ch) * inner + i;
        y->set_double(at, x.get_double(at) / std::pow(bias + alpha / static_cast<double>(size) * square_sum, beta));
      }
    }
  }
  return Status::ok();
}

// ---- MeanVarianceNormalization ---------------------------------------------------------------

Status infer_mvn(InferContext& ctx) {
  OPFUSE_TRY(check_float_input(ctx, "input"));
  const auto& x = ctx.input_shape(0);
  if (x) OPFUSE_TRY(reduction_axes(ctx.node(), ctx.attrs().get_ints("axes"), static_cast<int64_t>(x->size())).status());
  ctx.set_output(0, ctx.input_dtype(0), x);
  return Status::ok();
}

// (x - mean) / (sqrt(mean((x - mean)^2)) + 1e-9): the ONNX function body's epsilon, added to the
// standard deviation (not the variance) so a constant slice gives 0, not NaN.
Status run_mvn(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!is_float(x.dtype())) return ctx.error(str_cat("input ", x.type_string(), " must have a float dtype"));
  OPFUSE_ASSIGN_OR_RETURN(std::vector<int64_t> axes, reduction_axes(ctx.node(), ctx.attrs().get_ints("axes"), x.rank()));
  std::vector<bool> reduced(static_cast<size_t>(x.rank()), false);
  for (int64_t a : axes) reduced[static_cast<size_t>(a)] = true;
  const ReduceLayout layout = make_reduce_layout(x.dims(), reduced);
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.dims()));
  std::vector<int64_t> offsets;
  for (int64_t o = 0; o < layout.outer; ++o) {
    offsets.clear();
    layout.for_each_reduced(layout.base(o), [&](int64_t k) { offsets.push_back(k); });
    if (offsets.empty()) continue;
    double mean = 0;
    for (int64_t k : offsets) mean += x.get_double(k);
    mean /= static_cast<double>(offsets.size());
    double var = 0;
    for (int64_t k : offsets) var += (x.get_double(k) - mean) * (x.get_double(k) - mean);
    const double denom = std::sqrt(var / static_cast<double>(offsets.size())) + 1e-9;
    for (int64_t k : offsets) y->set_double(k, (x.get_double(k) - mean) / denom);
  }
  return Status::ok();
}

}  // namespace

std::vector<OpDef> channel_normalization_ops() {
  std::vector<OpDef> ops;
  OpDef instance = op_record("InstanceNormalization", 3, 3, FusionKind::kOpaque, infer_instance_norm, run_instance_norm,
                            "normalise each (sample, channel) over its spatial dims, then scale and shift");
  instance.attrs = {{"epsilon", AttrType::kFloat, AttrValue(1e-5f)}};
  ops.push_back(std::move(instance));
  OpDef lrn = op_record("LRN", 1, 1, FusionKind::kOpaque, infer_lrn, run_lrn,
                       "x / (bias + alpha/size * sum of squares over `size` neighbouring channels)^beta");
  lrn.attrs = {{"alpha", AttrType::kFloat, AttrValue(1e-4f)},
               {"beta", AttrType::kFloat, AttrValue(0.75f)},
               {"bias", AttrType::kFloat, AttrValue(1.0f)},
               {"size", AttrType::kInt, std::nullopt, true}};
  ops.push_back(std::move(lrn));
  OpDef mvn = op_record("MeanVarianceNormalization", 1, 1, FusionKind::kOpaque, infer_mvn, run_mvn,
                       "zero mean and unit variance over `axes` (default N, H, W)");
  mvn.attrs = {{"axes", AttrType::kInts, AttrValue(std::vector<int64_t>{0, 2, 3})}};
  ops.push_back(std::move(mvn));
  return ops;
}

}  // namespace opfuse
