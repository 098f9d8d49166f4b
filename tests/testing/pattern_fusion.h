// Runs only the pattern fuser (fuse_patterns, then dce) on a graph, as the pattern tests do to
// see one rule's rewrite without the rest of the O2 pipeline.
#pragma once

#include <string>
#include <vector>

#include "passes/pass.h"
#include "pipelines/pipeline.h"

namespace opfuse::testing_patterns {

inline Status fuse_patterns_only(Graph& graph, PassContext& ctx) {
  PipelineOptions options;
  options.verify_after_each = true;
  options.passes = std::vector<std::string>{"fuse_patterns", "dce"};
  return run_pipeline(graph, OptLevel::kO2, options, ctx);
}

inline Status fuse_patterns_only(Graph& graph) {
  PassContext ctx;
  return fuse_patterns_only(graph, ctx);
}

}  // namespace opfuse::testing_patterns
