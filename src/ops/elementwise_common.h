// Shared pieces of the elementwise op records (ops/elementwise*.cc): dtype classes, the
// "broadcast the inputs, output dtype = X" inference function, flops, and a record builder.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "ops/op_def.h"

namespace opfuse::ew {

constexpr int kVariadic = std::numeric_limits<int>::max();

// Which dtypes an op's data inputs accept (ONNX type constraints, bfloat16 aside).
enum class TypeClass {
  kFloat,    // f16, f32, f64
  kSigned,   // floats and signed integers (Relu, Neg)
  kNumeric,  // floats and all integers
  kAny,      // anything, bool included (Equal, Where's x/y)
  kBool,     // bool only (Not, And, Or, Xor)
};
enum class OutType { kSame, kBool };

bool dtype_in_class(DType t, TypeClass cls);

// exp, log, tanh, erf, sigmoid, pow, sin, cos: several times an add's cost (vector code evaluates
// them by polynomials): what op cost estimates and region fusion's recompute bound count.
bool is_transcendental(ScalarOp op);

// Required inputs present, no more than max_inputs, variadic inputs not omitted.
Status check_arity(const InferContext& ctx);
// The dtype shared by `inputs` (indices), each checked against `cls`; kUndefined when none is
// known yet. A mismatch is a user error naming the node, both inputs and both dtypes.
Result<DType> common_dtype(const InferContext& ctx, const std::vector<size_t>& inputs,
                           TypeClass cls);
// Broadcast of the given inputs' shapes (nullopt when a rank is unknown); errors name the node.
Result<std::optional<Shape>> broadcast_inputs(const InferContext& ctx,
                                              const std::vector<size_t>& inputs);
std::vector<size_t> present_inputs(const InferContext& ctx);

Status infer_broadcast_impl(InferContext& ctx, TypeClass cls, OutType out);
// Every present input has the same dtype of class C; the output is their broadcast, of that
// dtype (kSame) or bool (kBool).
template <TypeClass C, OutType O = OutType::kSame>
Status infer_broadcast(InferContext& ctx) {
  return infer_broadcast_impl(ctx, C, O);
}

// Output element count times the cost of the scalar expression per element (transcendental
// instructions count 4, others 1, at least 1 in total); -1 when the output shape is not static.
int64_t elementwise_flops(const Node& node);

// A record with the fields every elementwise op sets; callers adjust attrs and traits.
OpDef make_op(std::string name, int min_inputs, int max_inputs, FusionKind kind, InferFn infer,
              ScalarExprFn scalar, std::string summary);

// Appends the activation functions (Relu, Sigmoid, Gelu, ...): ops/elementwise_activations.cc.
void append_activation_ops(std::vector<OpDef>& ops);
// Appends BitShift: ops/elementwise_bitwise.cc.
void append_bitwise_ops(std::vector<OpDef>& ops);

}  // namespace opfuse::ew
