#include "ops/quantize_common.h"

#include "ops/op_list.h"

namespace opfuse {

std::vector<OpDef> quantization_ops() {
  std::vector<OpDef> all;
  for (auto family : {quantize_linear_ops, integer_matmul_ops, integer_conv_ops}) {
    for (OpDef& def : family()) all.push_back(std::move(def));
  }
  return all;
}

Result<std::vector<float>> per_channel_floats(const Tensor& t, int64_t count,
                                              const std::string& what) {
  if (t.dtype() != DType::kF32) {
    return Status::user_error(str_cat(what, " has dtype ", dtype_name(t.dtype()), "; expected f32"));
  }
  if (t.numel() != 1 && t.numel() != count) {
    return Status::user_error(str_cat(what, " is ", t.type_string(), "; expected one value or ",
                                      count));
  }
  std::vector<float> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out[i] = t.data<float>()[t.numel() == 1 ? 0 : i];
  return out;
}

Result<std::vector<int32_t>> per_channel_ints(const Tensor* t, int64_t count,
                                              const std::string& what) {
  std::vector<int32_t> out(static_cast<size_t>(count), 0);
  if (t == nullptr) return out;
  if (t->numel() != 1 && t->numel() != count) {
    return Status::user_error(str_cat(what, " is ", t->type_string(), "; expected one value or ",
                                      count));
  }
  for (int64_t i = 0; i < count; ++i) {
    out[i] = static_cast<int32_t>(t->get_int(t->numel() == 1 ? 0 : i));
  }
  return out;
}

Result<AxisQuantParams> resolve_axis_params(const Tensor& x, const Tensor& scale,
                                            const Tensor* zero_point, int64_t axis,
                                            const std::string& who) {
  AxisQuantParams p;
  if (scale.rank() > 1) {
    return Status::user_error(str_cat(who, ": scale (input 1) is ", scale.type_string(),
                                      "; expected a scalar or a 1-d tensor"));
  }
  if (zero_point && zero_point->numel() != scale.numel()) {
    return Status::user_error(str_cat(who, ": zero point (input 2) ", zero_point->type_string(),
                                      " does not match scale (input 1) ", scale.type_string()));
  }
  if (scale.numel() != 1) {
    const int64_t rank = x.rank();
    if (axis < -rank || axis >= rank) {
      return Status::user_error(str_cat(who, ": axis ", axis, " is out of range for input x ",
                                        x.type_string()));
    }
    const int64_t a = axis < 0 ? axis + rank : axis;
    if (x.dim(a) != scale.numel()) {
      return Status::user_error(str_cat(who, ": scale (input 1) ", scale.type_string(),
                                        " does not match dim ", a, " of input x ",
                                        x.type_string()));
    }
    p.channels = scale.numel();
    for (int64_t i = 0; i < a; ++i) p.outer *= x.dim(i);
    for (int64_t i = a + 1; i < rank; ++i) p.inner *= x.dim(i);
  } else {
    p.inner = x.numel();
  }
  OPFUSE_ASSIGN_OR_RETURN(p.scale, per_channel_floats(scale, p.channels, who + ": scale (input 1)"));
  OPFUSE_ASSIGN_OR_RETURN(p.zero_point,
                          per_channel_ints(zero_point, p.channels, who + ": zero point (input 2)"));
  return p;
}

Status check_axis_params(const InferContext& ctx, size_t x, int64_t axis) {
  const auto& xs = ctx.input_shape(x);
  const auto& ss = ctx.input_shape(x + 1);
  if (!ss) return Status::ok();
  if (ss->size() > 1) {
    return ctx.error(str_cat("scale (input ", x + 1, ") has shape ", shape_to_string(*ss),
                             "; expected a scalar or a 1-d tensor"));
  }
  if (ctx.has_input(x + 2) && ctx.input_shape(x + 2)) {
    const Shape& zs = *ctx.input_shape(x + 2);
    const auto zd = static_dims(zs), sd = static_dims(*ss);
    if (zd && sd && numel_of(*zd) != numel_of(*sd)) {
      return ctx.error(str_cat("zero point (input ", x + 2, ") has shape ", shape_to_string(zs),
                               " but scale (input ", x + 1, ") has ", shape_to_string(*ss)));
    }
  }
  // A 1-d scale of unknown or unit length may still be per tensor: nothing more to check.
  if (ss->empty() || !(*ss)[0].is_known() || (*ss)[0].value() == 1 || !xs) return Status::ok();
  const int64_t rank = static_cast<int64_t>(xs->size());
  if (axis < -rank || axis >= rank) {
    return ctx.error(str_cat("axis ", axis, " is out of range for input x ", shape_to_string(*xs)));
  }
  const Dim& d = (*xs)[axis < 0 ? axis + rank : axis];
  if (d.is_known() && d.value() != (*ss)[0].value()) {
    return ctx.error(str_cat("scale (input ", x + 1, ") has shape ", shape_to_string(*ss),
                             " but dim ", axis, " of input x ", shape_to_string(*xs), " is ",
                             d.value()));
  }
  return Status::ok();
}

Result<QuantizedTensor> dynamic_quantize(const Tensor& x) {
  const float* xp = x.data<float>();
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (xp[i] < lo) lo = xp[i];
    if (xp[i] > hi) hi = xp[i];
  }
  QuantizedTensor d;
  d.params = dynamic_quant_params(lo, hi);
  OPFUSE_ASSIGN_OR_RETURN(d.q, Tensor::uninitialized(DType::kU8, x.dims(), "DynamicQuantizeLinear output"));
  uint8_t* q = d.q.data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) q[i] = quantize_value<uint8_t>(xp[i] / d.params.scale, d.params.zero_point);
  return d;
}

Result<QuantizedTensor> static_quantize(const Tensor& x, const Tensor& scale, const Tensor* zero_point,
                                        const std::string& who) {
  if (scale.dtype() != DType::kF32 || scale.numel() != 1 || (zero_point && zero_point->numel() != 1)) {
    return Status::user_error(str_cat(who, ": x_scale ", scale.type_string(), " and x_zero ",
                                      zero_point ? zero_point->type_string() : "(none)", " must be one value each"));
  }
  QuantizedTensor d;
  d.params.scale = scale.data<float>()[0];
  d.params.zero_point = zero_point ? static_cast<int32_t>(zero_point->get_int(0)) : 0;
  const DType type = zero_point ? zero_point->dtype() : DType::kU8;
  OPFUSE_TRY(visit_quantized(type, who + ": x_zero", [&](auto q) -> Status {
    using Q = decltype(q);
    OPFUSE_ASSIGN_OR_RETURN(d.q, Tensor::uninitialized(type, x.dims(), "QuantizeLinear output"));
    const float* xp = x.data<float>();
    Q* out = d.q.data<Q>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = quantize_value<Q>(xp[i] / d.params.scale, d.params.zero_point);
    return Status::ok();
  }));
  return d;
}

}  // namespace opfuse
