// Passes: every graph rewrite is a named PassDef in one list (pass_list.cc); each optimisation
// level is a table of pipeline stages (pipelines.cc), each entry with a one-line reason.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/target.h"
#include "ir/graph.h"
#include "passes/fusion_config.h"

namespace opfuse {

// A decision a pass made that a user may ask about: a fold or fusion applied, or refused and why.
// The fusion report (issue: reports) renders these; keep every field meaningful.
struct PassDecision {
  std::string pass;
  std::string what;      // e.g. "BatchNormalization 'bn1' into Conv 'conv1'"
  bool applied = false;
  std::string reason;    // why it was refused (empty when applied)
  std::string rule;      // the pattern / rule name users switch with FusionConfig (may equal pass)
  std::vector<std::string> members;  // names of the original nodes involved
  std::string result;    // applied: name of the node that now does their work
  int64_t bytes_saved = 0;  // applied fusions: estimated memory traffic saved per run (0: unknown)
};

// How often a rule matched (its match tree fit) and was applied (its checks passed and it
// rewrote the graph), per rule name.
struct RuleCounter {
  int64_t matched = 0;
  int64_t applied = 0;
};

struct PassContext {
  std::vector<PassDecision> decisions;
  std::map<std::string, RuleCounter> rule_counters;
  FusionConfig fusion;  // what the user allows the fusing passes to do
  Target target = active_target();  // the CPU compiled for: every ISA-dependent choice reads it

  void applied(std::string pass, std::string what) {
    decisions.push_back({std::move(pass), std::move(what), true, {}, {}, {}, {}, 0});
  }
  void refused(std::string pass, std::string what, std::string reason) {
    decisions.push_back({std::move(pass), std::move(what), false, std::move(reason), {}, {}, {}, 0});
  }
  void record(PassDecision decision) { decisions.push_back(std::move(decision)); }
};

// Runs on a graph; returns whether it changed anything (the fixpoint driver stops when no pass
// of a stage changes the graph).
using PassFn = Result<bool> (*)(Graph&, PassContext&);

struct PassDef {
  std::string_view name;     // "constant_fold": the name users give to --passes
  std::string_view summary;  // one line for --help and docs
  PassFn run;
};

// Every pass, named once.
const std::vector<PassDef>& all_passes();
const PassDef* find_pass(std::string_view name);

enum class OptLevel { kO0, kO1, kO2, kO3 };
std::string_view opt_level_name(OptLevel level);  // "O1"
Result<OptLevel> parse_opt_level(std::string_view name);

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
};

// Runs the level's pipeline (or options.passes). Unknown pass names are an error listing the
// valid ones. A verifier failure names the pass that broke the graph.
Status run_pipeline(Graph& graph, OptLevel level, const PipelineOptions& options,
                    PassContext& context);

}  // namespace opfuse
