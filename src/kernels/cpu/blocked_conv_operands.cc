#include "kernels/cpu/blocked_conv_operands.h"

#include "kernels/cpu/hwy_epilogue.h"
#include "kernels/cpu/hwy_kernels.h"
#include "ops/op_def.h"

namespace opfuse {

std::optional<BlockedConvOperands> blocked_conv_operands(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  if (node.op_type() != "BlockedConv" || node.domain() != kFusedDomain || node.outputs().size() != 1 ||
      node.inputs().size() < 2 || node.inputs().size() > 4) {
    return std::nullopt;
  }
  const auto x = hwy_cpu::static_dims_of(node.input(0));
  const auto w = hwy_cpu::static_dims_of(node.input(1));
  const auto y = hwy_cpu::static_dims_of(node.output(0));
  if (!x || !w || !y || x->size() != 5 || w->size() != 4 || y->size() != 5) return std::nullopt;
  BlockedConvOperands o;
  o.x = *x, o.w = *w, o.y = *y;
  o.weights = ctx.f32_constant(1, *w);
  if (o.weights == nullptr) return std::nullopt;
  if (node.has_input(2)) {
    o.bias = ctx.f32_constant(2, {(*w)[0]});
    if (o.bias == nullptr) return std::nullopt;
  }
  auto epilogue = hwy_cpu::anchor_vector_epilogue(node, *y);
  if (!epilogue) return std::nullopt;
  o.epilogue = std::move(*epilogue);
  o.residual = node.has_input(3);
  return o;
}

}  // namespace opfuse
