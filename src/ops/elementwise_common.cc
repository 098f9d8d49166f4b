#include "ops/elementwise_common.h"

#include <algorithm>

namespace opfuse::ew {
namespace {

std::string_view class_name(TypeClass cls) {
  switch (cls) {
    case TypeClass::kFloat: return "a float dtype (f16, f32, f64)";
    case TypeClass::kSigned: return "a float or signed integer dtype";
    case TypeClass::kNumeric: return "a numeric dtype (float or integer)";
    case TypeClass::kAny: return "any dtype";
    case TypeClass::kBool: return "bool";
  }
  return "?";
}

}  // namespace

bool is_transcendental(ScalarOp op) {
  switch (op) {
    case ScalarOp::kExp: case ScalarOp::kLog: case ScalarOp::kTanh: case ScalarOp::kErf:
    case ScalarOp::kSigmoid: case ScalarOp::kPow: case ScalarOp::kSin: case ScalarOp::kCos:
    case ScalarOp::kTan: case ScalarOp::kAsin: case ScalarOp::kAcos: case ScalarOp::kAtan:
    case ScalarOp::kSinh: case ScalarOp::kCosh: case ScalarOp::kAsinh: case ScalarOp::kAcosh:
    case ScalarOp::kAtanh:
      return true;
    default:
      return false;
  }
}

bool dtype_in_class(DType t, TypeClass cls) {
  switch (cls) {
    case TypeClass::kFloat: return is_float(t);
    case TypeClass::kSigned: return is_float(t) || is_signed_int(t);
    case TypeClass::kNumeric: return is_float(t) || is_integer(t);
    case TypeClass::kAny: return t != DType::kUndefined;
    case TypeClass::kBool: return t == DType::kBool;
  }
  return false;
}

Status check_arity(const InferContext& ctx) {
  const OpDef& def = ctx.node().def();
  const size_t n = ctx.num_inputs();
  if (n > static_cast<size_t>(def.max_inputs)) {
    return ctx.error(str_cat("takes at most ", def.max_inputs, " inputs, got ", n));
  }
  if (n < static_cast<size_t>(def.min_inputs)) {
    return ctx.error(str_cat("needs at least ", def.min_inputs, " inputs, got ", n));
  }
  for (size_t i = 0; i < n; ++i) {
    const bool required = i < static_cast<size_t>(def.min_inputs) || def.max_inputs == kVariadic;
    if (required && !ctx.has_input(i)) return ctx.error(str_cat("input ", i, " is missing"));
  }
  return Status::ok();
}

Result<DType> common_dtype(const InferContext& ctx, const std::vector<size_t>& inputs,
                           TypeClass cls) {
  DType common = DType::kUndefined;
  size_t first = 0;
  for (size_t i : inputs) {
    if (!ctx.has_input(i)) continue;
    const DType t = ctx.input_dtype(i);
    if (t == DType::kUndefined) continue;
    if (!dtype_in_class(t, cls)) {
      return ctx.error(str_cat("input ", i, " has dtype ", dtype_name(t), "; ",
                               ctx.node().op_type(), " takes ", class_name(cls)));
    }
    if (common == DType::kUndefined) {
      common = t;
      first = i;
    } else if (t != common) {
      return ctx.error(str_cat("inputs ", first, " and ", i, " have different dtypes ",
                               dtype_name(common), " and ", dtype_name(t)));
    }
  }
  return common;
}

Result<std::optional<Shape>> broadcast_inputs(const InferContext& ctx,
                                              const std::vector<size_t>& inputs) {
  std::vector<Shape> shapes;
  for (size_t i : inputs) {
    if (!ctx.has_input(i)) continue;
    if (!ctx.input_shape(i)) return std::optional<Shape>();
    shapes.push_back(*ctx.input_shape(i));
  }
  OPFUSE_ASSIGN_OR_RETURN(Shape out, broadcast_shapes(shapes, ctx.node().describe()));
  return std::optional<Shape>(std::move(out));
}

std::vector<size_t> present_inputs(const InferContext& ctx) {
  std::vector<size_t> out;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i)) out.push_back(i);
  }
  return out;
}

Status infer_broadcast_impl(InferContext& ctx, TypeClass cls, OutType out) {
  OPFUSE_TRY(check_arity(ctx));
  const std::vector<size_t> inputs = present_inputs(ctx);
  OPFUSE_ASSIGN_OR_RETURN(DType dtype, common_dtype(ctx, inputs, cls));
  OPFUSE_ASSIGN_OR_RETURN(std::optional<Shape> shape, broadcast_inputs(ctx, inputs));
  ctx.set_output(0, out == OutType::kBool ? DType::kBool : dtype, std::move(shape));
  return Status::ok();
}

int64_t elementwise_flops(const Node& node) {
  const Value* out = node.output(0);
  if (out == nullptr || !out->shape) return -1;
  const auto dims = static_dims(*out->shape);
  if (!dims) return -1;
  AttrReader attrs(node);
  const ScalarExpr expr = node.def().scalar(ScalarExprContext{attrs, node});
  int64_t cost = 0;
  for (const ScalarInstr& in : expr.code) {
    if (in.op == ScalarOp::kArg || in.op == ScalarOp::kConst) continue;
    cost += is_transcendental(in.op) ? 4 : 1;
  }
  return numel_of(*dims) * std::max<int64_t>(cost, 1);
}

OpDef make_op(std::string name, int min_inputs, int max_inputs, FusionKind kind, InferFn infer,
              ScalarExprFn scalar, std::string summary) {
  // No reference kernel of its own: the generic one evaluates `scalar` with broadcasting.
  OpDef def = op_record(std::move(name), min_inputs, max_inputs, kind, infer, nullptr, std::move(summary));
  def.min_opset = 11;
  def.max_opset = 17;
  def.scalar = scalar;
  def.flops = elementwise_flops;
  return def;
}

}  // namespace opfuse::ew
