// Linear quantization: QuantizeLinear, DequantizeLinear (opsets 10 and 13: per tensor or, from
// 13, per axis) and DynamicQuantizeLinear (11). Exact reference kernels; opaque to fusion, since
// the region fuser's scalar expressions are float-only and a rounding step must not be
// reassociated with its neighbours.
#include "ops/quantize_common.h"

#include <algorithm>
#include <cstring>

namespace opfuse {
namespace {

// ---------------------------------------------------------------- QuantizeLinear

Status infer_quantize_linear(InferContext& ctx) {
  const DType x = ctx.input_dtype(0);
  if (x != DType::kUndefined && x != DType::kF32 && x != DType::kI32) {
    return ctx.error(str_cat("input x has dtype ", dtype_name(x), "; expected f32 or i32"));
  }
  const DType s = ctx.input_dtype(1);
  if (s != DType::kUndefined && s != DType::kF32) {
    return ctx.error(str_cat("scale (input 1) has dtype ", dtype_name(s), "; expected f32"));
  }
  // The output type is the zero point's; without one it is uint8 (the spec's default).
  DType y = DType::kU8;
  if (ctx.has_input(2)) {
    y = ctx.input_dtype(2);
    if (y != DType::kUndefined && y != DType::kU8 && y != DType::kI8) {
      return ctx.error(str_cat("zero point (input 2) has dtype ", dtype_name(y), "; expected u8 or i8"));
    }
  }
  OPFUSE_TRY(check_axis_params(ctx, 0, ctx.attrs().get_int("axis")));
  ctx.set_output(0, y, ctx.input_shape(0));
  return Status::ok();
}

template <typename Q, typename X>
void quantize_loop(const X* x, const AxisQuantParams& p, Q* y) {
  // int32 inputs are divided in double, as numpy (ONNX's reference) promotes int32 / float32.
  using F = std::conditional_t<std::is_same_v<X, float>, float, double>;
  int64_t i = 0;
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t c = 0; c < p.channels; ++c) {
      const F scale = static_cast<F>(p.scale[c]);
      const int32_t zp = p.zero_point[c];
      for (int64_t k = 0; k < p.inner; ++k, ++i) {
        y[i] = quantize_value<Q>(static_cast<F>(x[i]) / scale, zp);
      }
    }
  }
}

Status quantize_linear_kernel(KernelContext& ctx) {
  const std::string who = ctx.node().describe();
  const Tensor& x = ctx.input(0);
  const Tensor* zp = ctx.input_or_null(2);
  if (x.dtype() != DType::kF32 && x.dtype() != DType::kI32) {
    return ctx.error(str_cat("input x is ", x.type_string(), "; expected f32 or i32"));
  }
  OPFUSE_ASSIGN_OR_RETURN(AxisQuantParams p, resolve_axis_params(x, ctx.input(1), zp,
                                                                 ctx.attrs().get_int("axis"), who));
  return visit_quantized(zp ? zp->dtype() : DType::kU8, who + ": zero point (input 2)",
                         [&](auto q) -> Status {
    using Q = decltype(q);
    OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DTypeOf<Q>::value, x.dims()));
    if (x.dtype() == DType::kF32) {
      quantize_loop(x.data<float>(), p, y->data<Q>());
    } else {
      quantize_loop(x.data<int32_t>(), p, y->data<Q>());
    }
    return Status::ok();
  });
}

// ---------------------------------------------------------------- DequantizeLinear

Status infer_dequantize_linear(InferContext& ctx) {
  const DType x = ctx.input_dtype(0);
  if (x != DType::kUndefined && x != DType::kU8 && x != DType::kI8 && x != DType::kI32) {
    return ctx.error(str_cat("input x has dtype ", dtype_name(x), "; expected u8, i8 or i32"));
  }
  const DType s = ctx.input_dtype(1);
  if (s != DType::kUndefined && s != DType::kF32) {
    return ctx.error(str_cat("scale (input 1) has dtype ", dtype_name(s), "; expected f32"));
  }
  if (ctx.has_input(2)) {
    const DType z = ctx.input_dtype(2);
    if (z != DType::kUndefined && x != DType::kUndefined && z != x) {
      return ctx.error(str_cat("zero point (input 2) has dtype ", dtype_name(z), " but input x has ",
                               dtype_name(x), "; they must match"));
    }
  }
  OPFUSE_TRY(check_axis_params(ctx, 0, ctx.attrs().get_int("axis")));
  ctx.set_output(0, DType::kF32, ctx.input_shape(0));
  return Status::ok();
}

template <typename T>
void dequantize_loop(const T* x, const AxisQuantParams& p, float* y) {
  int64_t i = 0;
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t c = 0; c < p.channels; ++c) {
      const float scale = p.scale[c];
      const int64_t zp = p.zero_point[c];
      // The difference is exact in int64; for 8-bit inputs it is also exact as a float, so this
      // is (x - zp) * scale with a single rounding, as in the spec.
      for (int64_t k = 0; k < p.inner; ++k, ++i) {
        y[i] = static_cast<float>(static_cast<int64_t>(x[i]) - zp) * scale;
      }
    }
  }
}

Status dequantize_linear_kernel(KernelContext& ctx) {
  const std::string who = ctx.node().describe();
  const Tensor& x = ctx.input(0);
  const Tensor* zp = ctx.input_or_null(2);
  if (zp && zp->dtype() != x.dtype()) {
    return ctx.error(str_cat("zero point (input 2) is ", zp->type_string(), " but input x is ",
                             x.type_string(), "; their dtypes must match"));
  }
  OPFUSE_ASSIGN_OR_RETURN(AxisQuantParams p, resolve_axis_params(x, ctx.input(1), zp,
                                                                 ctx.attrs().get_int("axis"), who));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kF32, x.dims()));
  switch (x.dtype()) {
    case DType::kU8: dequantize_loop(x.data<uint8_t>(), p, y->data<float>()); break;
    case DType::kI8: dequantize_loop(x.data<int8_t>(), p, y->data<float>()); break;
    case DType::kI32:
      // The spec: int32 (a quantized bias) has no zero point; onnxruntime refuses a non-zero one.
      for (int32_t z : p.zero_point) {
        if (z != 0) {
          return ctx.error(str_cat("input x is ", x.type_string(),
                                   ", whose zero point must be 0, but zero point (input 2) holds ", z));
        }
      }
      dequantize_loop(x.data<int32_t>(), p, y->data<float>());
      break;
    default:
      return ctx.error(str_cat("input x is ", x.type_string(), "; expected u8, i8 or i32"));
  }
  return Status::ok();
}

// ---------------------------------------------------------------- DynamicQuantizeLinear

Status infer_dynamic_quantize_linear(InferContext& ctx) {
  const DType x = ctx.input_dtype(0);
  if (x != DType::kUndefined && x != DType::kF32) {
    return ctx.error(str_cat("input x has dtype ", dtype_name(x), "; expected f32"));
  }
  ctx.set_output(0, DType::kU8, ctx.input_shape(0));
  ctx.set_output(1, DType::kF32, Shape{});
  ctx.set_output(2, DType::kU8, Shape{});
  return Status::ok();
}

Status dynamic_quantize_linear_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::kF32) {
    return ctx.error(str_cat("input x is ", x.type_string(), "; expected f32"));
  }
  OPFUSE_ASSIGN_OR_RETURN(QuantizedTensor d, dynamic_quantize(x));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kU8, x.dims()));
  std::memcpy(y->raw_data(), d.q.raw_data(), d.q.nbytes());
  OPFUSE_ASSIGN_OR_RETURN(Tensor * s, ctx.allocate_output(1, DType::kF32, {}));
  s->data<float>()[0] = d.params.scale;
  OPFUSE_ASSIGN_OR_RETURN(Tensor * z, ctx.allocate_output(2, DType::kU8, {}));
  z->data<uint8_t>()[0] = static_cast<uint8_t>(d.params.zero_point);
  return Status::ok();
}

int64_t elementwise_flops(const Node& node) {
  const Value* x = node.input(0);
  if (x == nullptr || !x->shape) return -1;
  const auto dims = static_dims(*x->shape);
  return dims ? numel_of(*dims) : -1;
}

}  // namespace

std::vector<OpDef> quantize_linear_ops() {
  std::vector<OpDef> ops;
  {
    OpDef d;
    d.name = "QuantizeLinear";
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.attrs = {{"axis", AttrType::kInt, AttrValue(int64_t{1})}};
    d.infer = infer_quantize_linear;
    d.reference = quantize_linear_kernel;
    d.flops = elementwise_flops;
    d.summary = "y = saturate(round_half_even(x / scale) + zero_point), u8 or i8, per tensor or axis";
    ops.push_back(std::move(d));
  }
  {
    OpDef d;
    d.name = "DequantizeLinear";
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.attrs = {{"axis", AttrType::kInt, AttrValue(int64_t{1})}};
    d.infer = infer_dequantize_linear;
    d.reference = dequantize_linear_kernel;
    d.flops = elementwise_flops;
    d.summary = "y = (x - zero_point) * scale from u8, i8 or i32, per tensor or axis";
    ops.push_back(std::move(d));
  }
  {
    OpDef d;
    d.name = "DynamicQuantizeLinear";
    d.min_inputs = d.max_inputs = 1;
    d.min_outputs = d.max_outputs = 3;
    d.infer = infer_dynamic_quantize_linear;
    d.reference = dynamic_quantize_linear_kernel;
    d.flops = elementwise_flops;
    d.summary = "u8 quantization of x with a scale and zero point computed from its range";
    ops.push_back(std::move(d));
  }
  return ops;
}

}  // namespace opfuse
