// BatchNormalization, inference form only: y = (x - mean) / sqrt(var + epsilon) * scale + B per
// channel (axis 1). Training (batch statistics, running-stat outputs) is out of scope for an
// inference compiler and is reported as a user error rather than silently computed wrong.
#include <cmath>

#include "ops/nn_common.h"

namespace opfuse {
namespace {

Status check_inference_mode(const Node& node, const AttrReader& attrs, size_t num_outputs) {
  if (attrs.get_int("training_mode") != 0) {
    return Status::user_error(str_cat(node.describe(),
                                      ": training_mode=1 is not supported (opfuse runs inference; "
                                      "export the model in eval mode)"));
  }
  size_t extra = 0;
  for (size_t i = 1; i < num_outputs; ++i) extra += node.output(i) != nullptr;
  if (extra > 0) {
    return Status::user_error(str_cat(node.describe(), ": has ", num_outputs,
                                      " outputs; the running/saved statistics outputs exist only "
                                      "in training mode, which opfuse does not support"));
  }
  return Status::ok();
}

Status infer_batch_norm(InferContext& ctx) {
  OPFUSE_TRY(check_inference_mode(ctx.node(), ctx.attrs(), ctx.num_outputs()));
  const DType t = ctx.input_dtype(0);
  if (t != DType::kUndefined && !is_float(t)) {
    return ctx.error(str_cat("input X has dtype ", dtype_name(t), "; expected a float type"));
  }
  const auto& xs = ctx.input_shape(0);
  if (xs && xs->size() < 2) {
    return ctx.error(str_cat("input X has shape ", shape_to_string(*xs), "; expected [N, C, ...]"));
  }
  const Dim c = xs ? (*xs)[1] : Dim::unknown();
  static const char* kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) {
    const DType di = ctx.input_dtype(i);
    if (di != DType::kUndefined && !is_float(di)) {
      return ctx.error(str_cat("input ", kNames[i], " has dtype ", dtype_name(di),
                               "; expected a float type"));
    }
    const auto& s = ctx.input_shape(i);
    if (s && (s->size() != 1 || (c.is_known() && (*s)[0].is_known() && (*s)[0] != c))) {
      return ctx.error(str_cat("input ", kNames[i], " has shape ", shape_to_string(*s),
                               "; expected [", c.to_string(), "] (one value per channel)"));
    }
  }
  ctx.set_output(0, t, xs);
  return Status::ok();
}

template <typename T>
Result<std::vector<Tensor>> batch_norm_compute(const Node& node,
                                               const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  const std::string who = node.describe();
  if (x.rank() < 2) {
    return Status::user_error(str_cat(who, ": input X is ", x.type_string(),
                                      "; expected [N, C, ...]"));
  }
  const int64_t n = x.dim(0), c = x.dim(1), inner = c ? x.numel() / (n * c) : 0;
  for (size_t i = 1; i < 5; ++i) {
    if (in[i]->rank() != 1 || in[i]->dim(0) != c) {
      return Status::user_error(str_cat(who, ": input ", i, " is ", in[i]->type_string(),
                                        "; expected [", c, "]"));
    }
  }
  // y = x * a + b with a = scale / sqrt(var + eps), b = B - mean * a, folded in double.
  const double eps = AttrReader(node).get_float("epsilon");
  std::vector<T> mul(c), add(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    const double a = static_cast<double>(in[1]->data<T>()[ch]) /
                     std::sqrt(static_cast<double>(in[4]->data<T>()[ch]) + eps);
    mul[ch] = static_cast<T>(a);
    add[ch] = static_cast<T>(static_cast<double>(in[2]->data<T>()[ch]) -
                             static_cast<double>(in[3]->data<T>()[ch]) * a);
  }
  OPFUSE_ASSIGN_OR_RETURN(Tensor y, Tensor::zeros(x.dtype(), x.dims(), who));
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
#pragma omp parallel for if (x.numel() > 65536)
  for (int64_t plane = 0; plane < n * c; ++plane) {
    const T a = mul[plane % c], b = add[plane % c];
    const T* xp = xd + plane * inner;
    T* yp = yd + plane * inner;
    for (int64_t i = 0; i < inner; ++i) yp[i] = xp[i] * a + b;
  }
  return std::vector<Tensor>{std::move(y)};
}

Status batch_norm_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  OPFUSE_TRY(check_inference_mode(node, ctx.attrs(), ctx.num_outputs()));
  for (size_t i = 0; i < 5; ++i) {
    if (!ctx.has_input(i)) return ctx.error(str_cat("input ", i, " is missing"));
  }
  return run_float_kernel(
      ctx, [&](const auto& in) { return batch_norm_compute<float>(node, in); },
      [&](const auto& in) { return batch_norm_compute<double>(node, in); });
}

// A multiply and an add per element.
int64_t batch_norm_flops(const Node& node) {
  const auto x = static_value_dims(node.input(0));
  return x ? 2 * numel_of(*x) : -1;
}

}  // namespace

std::vector<OpDef> batch_norm_ops() {
  OpDef d;
  d.name = "BatchNormalization";
  d.min_inputs = d.max_inputs = 5;
  d.max_outputs = 5;  // opset <= 13 declares 4 optional training outputs; rejected when used
  d.attrs = {
      {"epsilon", AttrType::kFloat, AttrValue(1e-5f)},
      {"momentum", AttrType::kFloat, AttrValue(0.9f)},
      {"training_mode", AttrType::kInt, AttrValue(int64_t{0})},
  };
  d.kind = FusionKind::kBroadcast;
  d.traits.inplace = true;
  d.infer = infer_batch_norm;
  d.reference = batch_norm_kernel;
  d.flops = batch_norm_flops;
  d.summary = "inference batch normalization: per-channel (x - mean) / sqrt(var + eps) * scale + B";
  return {std::move(d)};
}

}  // namespace opfuse
