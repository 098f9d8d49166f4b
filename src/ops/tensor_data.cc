// Ops that create data rather than move it: Constant, ConstantOfShape, Range. Opaque to the
// fuser; constant folding turns them into initializers.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "ops/tensor_helpers.h"

namespace opfuse {
namespace {

// ---- Constant ------------------------------------------------------------------------------

// The tensor a Constant node holds, from whichever single value attribute it sets.
Result<Tensor> constant_value(const Node& node) {
  const AttrReader attrs(node);
  int set = 0;
  Tensor value;
  if (attrs.has("value")) {
    const Tensor* t = attrs.get_tensor("value");
    if (t == nullptr || !t->defined()) {
      return Status::user_error(str_cat(node.describe(), ": attribute 'value' is not a tensor"));
    }
    value = *t;
    ++set;
  }
  if (attrs.has("value_float")) {
    value = Tensor::scalar<float>(attrs.get_float("value_float"));
    ++set;
  }
  if (attrs.has("value_floats")) {
    const auto v = attrs.get_floats("value_floats");
    value = Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v);
    ++set;
  }
  if (attrs.has("value_int")) {
    value = Tensor::scalar<int64_t>(attrs.get_int("value_int"));
    ++set;
  }
  if (attrs.has("value_ints")) {
    const auto v = attrs.get_ints("value_ints");
    value = Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
    ++set;
  }
  for (const char* unsupported : {"sparse_value", "value_string", "value_strings"}) {
    if (attrs.has(unsupported)) {
      return Status::user_error(
          str_cat(node.describe(), ": attribute '", unsupported, "' is not supported"));
    }
  }
  if (set != 1) {
    return Status::user_error(str_cat(node.describe(), ": exactly one value attribute must be set, found ", set));
  }
  return value;
}

Status infer_constant(InferContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(Tensor value, constant_value(ctx.node()));
  ctx.set_output(0, value.dtype(), value.shape());
  return Status::ok();
}

Status run_constant(KernelContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(Tensor value, constant_value(ctx.node()));
  // A copy, so that a consumer reusing its input buffer cannot alter the attribute.
  ctx.set_output(0, value.clone());
  return Status::ok();
}

// ---- ConstantOfShape -----------------------------------------------------------------------

// The fill value: a one-element tensor (default f32 0).
Result<Tensor> fill_value(const AttrReader& attrs, const Node& node) {
  const Tensor* t = attrs.get_tensor("value");
  if (t == nullptr) return Tensor::scalar<float>(0.0f);
  if (t->numel() != 1) {
    return Status::user_error(str_cat(node.describe(), ": attribute 'value' must hold one element, got ",
                                      t->type_string()));
  }
  return *t;
}

Status infer_constant_of_shape(InferContext& ctx) {
  OPFUSE_TRY(check_integer_input(ctx, 0, "shape"));
  OPFUSE_ASSIGN_OR_RETURN(Tensor value, fill_value(ctx.attrs(), ctx.node()));
  OPFUSE_ASSIGN_OR_RETURN(std::optional<Shape> out, shape_from_input(ctx, 0));
  ctx.set_output(0, value.dtype(), out);
  return Status::ok();
}

Status run_constant_of_shape(KernelContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(auto dims, int_input(ctx, 0, "shape"));
  if (ctx.input(0).rank() > 1) {
    return ctx.error(str_cat("shape input must be 1-D, got ", ctx.input(0).type_string()));
  }
  for (int64_t d : dims) {
    if (d < 0) return ctx.error(str_cat("negative dim in shape ", ints_to_string(dims)));
  }
  OPFUSE_ASSIGN_OR_RETURN(Tensor value, fill_value(ctx.attrs(), ctx.node()));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, value.dtype(), dims));
  const size_t elem = dtype_size(value.dtype());
  auto* dst = static_cast<uint8_t*>(y->raw_data());
  for (int64_t i = 0; i < y->numel(); ++i) std::memcpy(dst + i * elem, value.raw_data(), elem);
  return Status::ok();
}

// ---- Range ---------------------------------------------------------------------------------

// max(ceil((limit - start) / delta), 0), computed without overflow for every numeric dtype.
Result<int64_t> range_count(const Tensor& start, const Tensor& limit, const Tensor& delta,
                            const std::function<Status(std::string)>& error) {
  if (is_integer(start.dtype())) {
    const __int128 s = start.get_int(0), l = limit.get_int(0), d = delta.get_int(0);
    if (d == 0) return error("delta must not be 0");
    const __int128 span = l - s;
    __int128 n = span / d;
    if (span % d != 0 && ((span > 0) == (d > 0))) ++n;  // ceil for same-sign quotients
    if (n < 0) n = 0;
    if (n > std::numeric_limits<int64_t>::max()) return error("the range has too many elements");
    return static_cast<int64_t>(n);
  }
  const double s = start.get_double(0), l = limit.get_double(0), d = delta.get_double(0);
  if (d == 0) return error("delta must not be 0");
  const double n = std::ceil((l - s) / d);
  if (std::isnan(n)) return error("start, limit and delta must be finite");
  if (n <= 0) return int64_t{0};
  if (n >= 9.0e18) return error("the range has too many elements");
  return static_cast<int64_t>(n);
}

Status check_range_inputs(const DType (&types)[3], const std::function<Status(std::string)>& error) {
  static const char* kNames[3] = {"start", "limit", "delta"};
  for (int i = 0; i < 3; ++i) {
    if (types[i] == DType::kUndefined) continue;
    if (types[i] == DType::kBool) return error(str_cat("input '", kNames[i], "' must be numeric, got bool"));
    if (types[i] != types[0] && types[0] != DType::kUndefined) {
      return error(str_cat("inputs must share a dtype; start is ", dtype_name(types[0]), ", ",
                           kNames[i], " is ", dtype_name(types[i])));
    }
  }
  return Status::ok();
}

Status infer_range(InferContext& ctx) {
  auto error = [&](std::string m) { return ctx.error(m); };
  const DType types[3] = {ctx.input_dtype(0), ctx.input_dtype(1), ctx.input_dtype(2)};
  OPFUSE_TRY(check_range_inputs(types, error));
  Shape out = unknown_shape(1);
  const Tensor* s = ctx.input_constant(0);
  const Tensor* l = ctx.input_constant(1);
  const Tensor* d = ctx.input_constant(2);
  if (s && l && d && s->numel() == 1 && l->numel() == 1 && d->numel() == 1) {
    OPFUSE_ASSIGN_OR_RETURN(int64_t n, range_count(*s, *l, *d, error));
    out = Shape{Dim(n)};
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
  return Status::ok();
}

Status run_range(KernelContext& ctx) {
  auto error = [&](std::string m) { return ctx.error(m); };
  const Tensor& s = ctx.input(0);
  const Tensor& l = ctx.input(1);
  const Tensor& d = ctx.input(2);
  const DType types[3] = {s.dtype(), l.dtype(), d.dtype()};
  OPFUSE_TRY(check_range_inputs(types, error));
  for (const Tensor* t : {&s, &l, &d}) {
    if (t->numel() != 1) return ctx.error(str_cat("start, limit and delta must be scalars, got ", t->type_string()));
  }
  OPFUSE_ASSIGN_OR_RETURN(int64_t n, range_count(s, l, d, error));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, s.dtype(), {n}));
  // output[i] = start + i * delta, per the ONNX spec (not a running sum, which drifts).
  visit_dtype(s.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      const T start = s.data<T>()[0];
      const T delta = d.data<T>()[0];
      T* out = y->data<T>();
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T start = s.data<T>()[0];
      const T delta = d.data<T>()[0];
      T* out = y->data<T>();
      for (int64_t i = 0; i < n; ++i) out[i] = start + static_cast<T>(i) * delta;
    } else {
      const double start = s.get_double(0), delta = d.get_double(0);
      for (int64_t i = 0; i < n; ++i) y->set_double(i, start + static_cast<double>(i) * delta);
    }
  });
  return Status::ok();
}

OpDef data_op(std::string name, int min_inputs, int max_inputs, InferFn infer, KernelFn reference,
           std::string summary) {
  return op_record(std::move(name), min_inputs, max_inputs, FusionKind::kOpaque, infer, reference,
                   std::move(summary));
}

}  // namespace

std::vector<OpDef> tensor_data_ops() {
  std::vector<OpDef> ops;
  OpDef constant = data_op("Constant", 0, 0, infer_constant, run_constant,
                           "a tensor given as an attribute");
  constant.attrs = {{"value", AttrType::kTensor, std::nullopt},
                    {"value_float", AttrType::kFloat, std::nullopt},
                    {"value_floats", AttrType::kFloats, std::nullopt},
                    {"value_int", AttrType::kInt, std::nullopt},
                    {"value_ints", AttrType::kInts, std::nullopt}};
  ops.push_back(std::move(constant));

  OpDef cos = data_op("ConstantOfShape", 1, 1, infer_constant_of_shape, run_constant_of_shape,
                      "a tensor of the input's shape filled with `value` (default f32 0)");
  cos.attrs = {{"value", AttrType::kTensor, AttrValue(Tensor::from_vector<float>({1}, {0.0f}))}};
  ops.push_back(std::move(cos));

  ops.push_back(data_op("Range", 3, 3, infer_range, run_range,
                        "start, start+delta, ... up to (excluding) limit"));
  return ops;
}

}  // namespace opfuse
