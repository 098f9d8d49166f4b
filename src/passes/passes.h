// The entry points of the passes (one file each under src/passes/), listed in pass_list.cc.
#pragma once

#include "passes/pass.h"

namespace opfuse {

Result<bool> run_infer_shapes_pass(Graph& graph, PassContext& context);

}  // namespace opfuse
