// Pipelines: each optimisation level is a table of stages of passes (pipelines.cc), each stage
// with a one-line reason; run_pipeline (pass_manager.cc) runs a level's table, or a list of
// passes by name, over a graph.
#pragma once

#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "passes/pass.h"

namespace opfuse {

// The built-in pass or a registered extra pass (passes/extra_passes.h) of that name.
const PassDef* find_pass(std::string_view name);

enum class OptLevel { kO0, kO1, kO2, kO3 };
// The level a session compiles at unless told otherwise (the API, `run`, `bench`, `validate`,
// `profile`, the server, Python): the fastest one, as ONNX Runtime defaults to all its
// optimisations. O3 is measured not slower than O2 or O1 on every zoo model at every tier
// (docs/benchmarks.md), and every level is tested against eager mode.
inline constexpr OptLevel kDefaultOptLevel = OptLevel::kO3;
std::string_view opt_level_name(OptLevel level);  // "O1"
Result<OptLevel> parse_opt_level(std::string_view name);
// The level to compile at, for every front end (CLI, Python, server): the one the user gave, else
// the fusion config's (`config_source` names the config in errors), else `fallback`.
Result<OptLevel> choose_opt_level(const std::optional<std::string>& given, const std::optional<std::string>& from_config,
                                  std::string_view config_source, OptLevel fallback);

// One pipeline stage: passes run in order, repeated until none changes the graph when
// `to_fixpoint`, at most PipelineOptions::max_iterations times.
struct PipelineStage {
  std::vector<std::string_view> passes;
  bool to_fixpoint;
  std::string_view why;
};
const std::vector<PipelineStage>& pipeline_for(OptLevel level);

struct PipelineOptions {
  bool verify_after_each = false;        // run the verifier after every pass (tests, debugging)
  std::ostream* print_after_all = nullptr;  // print the graph after every pass that changed it
  // Instead of the level's pipeline, run exactly these passes in order (once each).
  std::optional<std::vector<std::string>> passes;
  int max_iterations = 8;
  FusionConfig fusion;  // run_pipeline copies it into PassContext::fusion
  // What the layout pass times with (PassContext::layout_timer); null: the estimates, or a
  // MeasuringLayoutTimer the runtime supplies when fusion.measure_layouts asks for one.
  std::shared_ptr<LayoutTimer> layout_timer;
};

// Runs the level's pipeline (or options.passes). Unknown pass names are an error listing the
// valid ones. A verifier failure names the pass that broke the graph.
// The scalar integer or bool inputs an If depends on (pipelines/bind_values.cc): graph mode
// binds their values, a plan per value, so the If folds away.
std::vector<size_t> inputs_deciding_ifs(const Graph& graph);
// Replaces the uses of each named graph input by a constant of its value (a one-element tensor),
// recording the decision (specialize_inputs).
void bind_input_values(Graph& graph, const std::map<std::string, Tensor>& values, PassContext& context);

Status run_pipeline(Graph& graph, OptLevel level, const PipelineOptions& options,
                    PassContext& context);

}  // namespace opfuse
