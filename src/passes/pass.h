// Passes: every graph rewrite is a named PassDef in one list (pass_list.cc), run on a graph with
// a PassContext that collects its decisions. The pipelines that run them: pipelines/pipeline.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/target.h"
#include "ir/graph.h"
#include "passes/fusion_config.h"

namespace opfuse {

class LayoutTimer;  // passes/layout_measure.h

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

// The two common shapes of a decision.
PassDecision refusal(std::string pass, std::string what, std::string reason,
                     std::vector<std::string> members = {});
PassDecision application(std::string pass, std::string what, std::vector<std::string> members = {},
                         std::string result = {});

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
  // Times convs and reorders for the layout pass instead of its estimates (not owned; null:
  // estimate). Supplied from above: the runtime measures real kernels, tests inject timings.
  LayoutTimer* layout_timer = nullptr;

  // The one way a pass records a decision: appended to `decisions` and counted under its rule
  // (its pass, when it names none): matched always, applied when applied. A refusal recorded
  // already (fixpoint stages rerun passes) is dropped; returns whether it was recorded.
  bool decide(PassDecision decision);

 private:
  std::unordered_set<std::string> refusals_seen_;  // pass, rule, what and reason of each refusal
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

}  // namespace opfuse
