// Where NaN or Inf can appear in a graph whose float inputs are all finite. A compiled plan for
// finite inputs lets anchors keep NaN-dropping post-ops (oneDNN's relu and clip) inside the
// library kernel, where they cost nothing, on nodes whose inputs cannot be non-finite; the
// session runs that plan when every float input is finite and a fully NaN-exact plan otherwise
// (runtime/session.cc). What this cannot see: a sum of finite values overflowing to Inf inside a
// Conv or MatMul (|values| near 3.4e38), or a DynamicQuantizeLinear's range doing so (values
// beyond +-1.7e38), after which a fused relu would turn a NaN the unfused graph shows into 0.
#pragma once

#include <unordered_set>

#include "ir/graph.h"

namespace opfuse {

// The values that may hold NaN or Inf: graph inputs unless `inputs_finite`, constants holding
// one, and the outputs of nodes reading such a value or whose op can make a non-finite value
// from finite ones (Div, Log, Sqrt, Exp, Pow, Reciprocal, casts, custom ops ...: every node that
// is not is_finite_preserving, ops/op_def.h).
std::unordered_set<const Value*> values_that_may_be_non_finite(const Graph& graph, bool inputs_finite);

// Whether every element of `tensor` is finite (tensors of integers and bools always are).
bool all_finite(const Tensor& tensor);

}  // namespace opfuse
