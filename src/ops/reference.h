// Runs one node with its reference kernel: the correctness oracle used by eager mode, constant
// folding and every optimised-kernel test.
#pragma once

#include <vector>

#include "ops/op_def.h"

namespace opfuse {

// Runs `node` on concrete inputs (nullptr for omitted optional inputs) and returns its outputs.
// Ops without an explicit reference kernel evaluate their scalar expression with broadcasting.
Result<std::vector<Tensor>> run_reference(const Node& node, std::vector<const Tensor*> inputs);

// The generic reference kernel of elementwise/broadcast ops: evaluates node.def().scalar over
// the broadcast inputs (ops/scalar_eval.cc).
Status run_scalar_expr_kernel(KernelContext& ctx);

// `expr` over f32 inputs of out's dims (argument i reads inputs[i]), into the f32 tensor `out`,
// which may be one of the inputs: element by element, in float, as the elementwise reference.
Status evaluate_f32_scalar_expr(const ScalarExpr& expr, const std::vector<const Tensor*>& inputs, Tensor& out);

}  // namespace opfuse
