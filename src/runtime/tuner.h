// The autotuner behind `opfuse tune`: measures, on this machine and target, the choices the
// compiler otherwise estimates, and writes them to a tuning record (passes/tuning_record.h).
//
// Candidates, each compared end to end with the best plan so far (whole-model runs, alternating
// rounds; a candidate is kept when it wins every round and by keep_ratio at the median, and still
// does over as many rounds again, so noise rarely flips a choice):
//   1. layouts: the O3 layout pass solved with measured conv and reorder timings instead of the
//      estimate (only for models whose O3 plan has convs to lay out);
//   2. region fusion's traffic-saving threshold, 0.1 and 0.5 against the configured one (for
//      models where region fusion weighed candidates);
//   3. kernels: for every class of anchors (op type, chosen kernel, the kernels that could run
//      them) each other kernel that supports them, for all nodes of the class at once;
//   4. epilogue placement: for every class of anchors on a library kernel with an epilogue (op
//      type and post-ops), the whole epilogue in our own pass, and as much as keeps NaN inside the
//      library kernel.
// A class that loses or ties as a whole may still hold nodes that win: the same rounds time every
// step, so the nodes whose own steps ran faster with the candidate (nodes_faster_in_their_steps)
// are compared again end to end, as a candidate of their own.
// Measuring stops at the time budget; what was not measured keeps the default.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "passes/tuning_record.h"
#include "runtime/session.h"

namespace opfuse {

struct TuneOptions {
  SessionOptions session;     // level, threads, target, fusion config of the plans compared
  double budget_seconds = 300;
  int rounds = 3;             // alternating rounds per comparison
  int runs_per_round = 10;    // timed runs of each plan per round, after one warm-up
  double keep_ratio = 0.98;   // a candidate is kept at or below this median time ratio (and < 1 in every round)
  double node_ratio = 0.9;    // a node of a class not kept is tried alone when its steps' ratio is at most this
  std::ostream* progress = nullptr;  // one line per candidate
};

// The steps of one plan timed over several rounds: each step's node, and per round each step's
// median microseconds.
struct StepTimes {
  std::vector<std::string> nodes;
  std::vector<std::vector<double>> rounds_us;
};

// The nodes of `changed` (the nodes a candidate runs otherwise) whose steps ran faster in the
// candidate's plan: a node's cost is its own step plus the step after it, which reads its output
// and so pays for where the node left it (another thread's cache, another layout), the median
// over rounds; a node is taken when candidate / incumbent is at most `ratio`. Nodes missing from
// either plan are left out. In the order of `changed`.
std::vector<std::string> nodes_faster_in_their_steps(const StepTimes& incumbent, const StepTimes& candidate,
                                                     const std::vector<std::string>& changed, double ratio);

// `model` as loaded (the record's digest is taken from it); `inputs` for every graph input.
Result<TuningRecord> tune_model(const Graph& model, const TensorMap& inputs, const TuneOptions& options);

}  // namespace opfuse
