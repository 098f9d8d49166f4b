#include "ops/reference.h"

namespace opfuse {

Result<std::vector<Tensor>> run_reference(const Node& node, std::vector<const Tensor*> inputs) {
  KernelContext ctx(node, std::move(inputs));
  const OpDef& def = node.def();
  Status status = def.reference ? def.reference(ctx) : run_scalar_expr_kernel(ctx);
  OPFUSE_TRY(status);
  for (size_t i = 0; i < ctx.outputs().size(); ++i) {
    if (!ctx.outputs()[i].defined() && node.output(i) != nullptr) {
      return Status::internal_error(
          str_cat(node.describe(), ": reference kernel did not produce output ", i));
    }
  }
  return std::move(ctx.outputs());
}

}  // namespace opfuse
