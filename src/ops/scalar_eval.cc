#include "ops/reference.h"

namespace opfuse {

Status run_scalar_expr_kernel(KernelContext& ctx) {
  return Status::internal_error(str_cat(ctx.node().describe(), ": scalar evaluator not built yet"));
}

}  // namespace opfuse
