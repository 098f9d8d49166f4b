// QuantizeLinear's arithmetic as float32 ops, for the rules that take quantized models off the
// reference kernels (quantize_pairs_in_fp32, integer_products_in_fp32).
#pragma once

#include <optional>
#include <string>

#include "ir/graph.h"

namespace opfuse {

// One constant scale (f32) and zero point of a QuantizeLinear / DequantizeLinear whose integers
// are `type` (u8 or i8).
struct QuantizeParams {
  float scale = 1;
  float zero = 0;
  DType type = DType::kU8;
  float low() const { return type == DType::kU8 ? 0.0f : -128.0f; }
  float high() const { return type == DType::kU8 ? 255.0f : 127.0f; }
};

// `node`'s scale (input 1) and zero point (input 2, absent: 0) when both are constants of one
// value and `type` is u8 or i8; else nullopt.
std::optional<QuantizeParams> constant_quantize_params(const Node& node, DType type);

// QuantizeLinear(x) less the lowest step, as f32 ops: Clip(Round(x / s) + z, lo, hi) - lo, then
// Shrink (lambd = bias = 0: x for every x but 0 and NaN, which it makes 0), so NaN becomes the
// lowest step as QuantizeLinear's saturating conversion makes it. Every result is an integer in
// [0, hi - lo]: adding lo gives the quantized value, adding lo - z the dequantized one over s,
// both exactly. New nodes are named after `base`; `x`'s shape is theirs.
Result<Value*> quantized_less_low(Graph& graph, Value* x, const QuantizeParams& p, const std::string& base);

}  // namespace opfuse
