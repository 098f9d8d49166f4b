// What the quantization ops share (ops/quantize.cc, integer_matmul.cc, integer_conv.cc): the
// rounding and saturation of one value into uint8/int8, dispatch over those two types, and the
// per-tensor / per-axis scale and zero-point pairs resolved against a tensor.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ops/op_def.h"

namespace opfuse {

// Nearest integer, ties to even (2.5 -> 2, 3.5 -> 4, -2.5 -> -2), written out rather than
// std::nearbyint so that no caller's floating-point rounding mode can change a quantized model.
// v - floor(v) is exact in binary floating point, so the tie test is exact. NaN and +-Inf pass
// through.
template <typename F>
F round_half_even(F v) {
  F f = std::floor(v);
  const F frac = v - f;
  if (frac > F(0.5) || (frac == F(0.5) && std::fmod(f, F(2)) != F(0))) f += F(1);
  return f;
}

// ONNX's quantization of one value already divided by its scale: round half to even, add the
// zero point, saturate to Q's range ([0, 255] or [-128, 127]; +-Inf saturate like any large value).
// NaN has no value in the spec; it becomes Q's lowest value, what ONNX's reference
// implementation gives (it casts rint(x) to int32, which on x86 turns NaN into INT32_MIN, then
// clips) and what onnxruntime's uint8 kernels give.
template <typename Q, typename F>
Q quantize_value(F scaled, int32_t zero_point) {
  constexpr F lo = F(std::numeric_limits<Q>::lowest()), hi = F(std::numeric_limits<Q>::max());
  if (std::isnan(scaled)) return std::numeric_limits<Q>::lowest();
  // Exact while |r| < 2^24; anything larger is far outside Q's range and saturates either way.
  const F r = round_half_even(scaled) + F(zero_point);
  if (r <= lo) return std::numeric_limits<Q>::lowest();
  if (r >= hi) return std::numeric_limits<Q>::max();
  return static_cast<Q>(r);
}

// DynamicQuantizeLinear's scale and zero point for the range [lo, hi] (lo <= 0 <= hi: the data's
// range widened to include 0), in f32 as ONNX's function body computes them: scale = range / 255,
// zero point = round(clip(0 - lo / scale, 0, 255)). An empty range (x all zeros) has no scale in
// the spec (0 / 0 in its function body, 1/255 in its Python reference); we follow onnxruntime:
// scale 1, zero point 0, so nothing downstream divides by 0. Shared by the reference and the
// vector kernel (kernels/cpu/hwy_convert.cc) so both quantize alike.
struct DynamicQuantParams {
  float scale = 1.0f;
  int32_t zero_point = 0;
};
inline DynamicQuantParams dynamic_quant_params(float lo, float hi) {
  DynamicQuantParams p;
  p.scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  p.zero_point = static_cast<int32_t>(round_half_even(std::clamp(0.0f - lo / p.scale, 0.0f, 255.0f)));
  return p;
}

// DynamicQuantizeLinear of f32 `x` (the reference): the range [min(x), max(x)] widened to
// include 0 (NaN elements left out), dynamic_quant_params of it, and every element quantized to
// u8 (NaN to 0, as QuantizeLinear). Shared by DynamicQuantizeLinear (ops/quantize.cc) and
// opfuse::QuantizedConv (ops/integer_conv.cc).
struct QuantizedTensor {
  Tensor q;  // u8 (or for static_quantize the zero point's type), x's dims
  DynamicQuantParams params;  // the scale and zero point it was quantized with
};
Result<QuantizedTensor> dynamic_quantize(const Tensor& x);
// QuantizeLinear of f32 `x` by one scale and zero point (u8 or i8, the output's type; none: u8
// zero), in the same form (opfuse::QuantizedConv's static quantization). Errors name `who`.
Result<QuantizedTensor> static_quantize(const Tensor& x, const Tensor& scale, const Tensor* zero_point,
                                        const std::string& who);

// Calls fn(uint8_t{}) or fn(int8_t{}) for a quantized dtype; a user error naming `what` for any
// other dtype.
template <typename Fn>
Status visit_quantized(DType t, const std::string& what, Fn&& fn) {
  if (t == DType::kU8) return fn(uint8_t{});
  if (t == DType::kI8) return fn(int8_t{});
  return Status::user_error(str_cat(what, " has dtype ", dtype_name(t), "; expected u8 or i8"));
}

// A scale (f32) and optional zero point applied along one axis of a tensor viewed as
// [outer, channels, inner]; per-tensor parameters are the case channels == 1.
struct AxisQuantParams {
  int64_t outer = 1, channels = 1, inner = 1;
  std::vector<float> scale;       // `channels` entries
  std::vector<int32_t> zero_point;  // `channels` entries (zeros when the input is absent)
};

// Resolves QuantizeLinear/DequantizeLinear's (scale, zero point) against `x`: a scalar or
// one-element scale is per tensor (axis ignored, as the spec says); a 1-D scale of n > 1 values
// applies along `axis` (negative counts from the back), whose dim must be n. The zero point must
// have as many values as the scale. Errors name the node (`who`), the inputs and the shapes.
Result<AxisQuantParams> resolve_axis_params(const Tensor& x, const Tensor& scale,
                                            const Tensor* zero_point, int64_t axis,
                                            const std::string& who);

// Inference-time counterpart: checks what the known shapes allow (scale rank <= 1, zero point
// matching the scale, the axis and its dim for a per-axis scale). Inputs x, scale, zero point
// are `x`, `x + 1`, `x + 2`.
Status check_axis_params(const InferContext& ctx, size_t x, int64_t axis);

// The values of a scale or zero-point tensor of `count` entries, or one entry broadcast to
// `count` (per tensor). Errors name the input (`what`) and its shape.
Result<std::vector<float>> per_channel_floats(const Tensor& t, int64_t count,
                                              const std::string& what);
Result<std::vector<int32_t>> per_channel_ints(const Tensor* t, int64_t count,
                                              const std::string& what);

// Records of this family, gathered by builtin_ops (ops/op_list.cc).
std::vector<OpDef> quantize_linear_ops();  // ops/quantize.cc
std::vector<OpDef> integer_matmul_ops();   // ops/integer_matmul.cc
std::vector<OpDef> integer_conv_ops();     // ops/integer_conv.cc

}  // namespace opfuse
