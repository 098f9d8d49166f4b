// Every pass of opfuse, named once. Pipelines (pipelines.cc) refer to them by name.
#include "passes/pass.h"
#include "passes/passes.h"

namespace opfuse {

const std::vector<PassDef>& all_passes() {
  static const std::vector<PassDef> passes = {
      {"infer_shapes", "shape and dtype inference over the whole graph", run_infer_shapes_pass},
  };
  return passes;
}

}  // namespace opfuse
