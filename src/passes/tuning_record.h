// A tuning record (`opfuse tune`, runtime/tuner.h): the target-dependent choices measured for one
// model on one target, and the measurements behind them. Compiles given a record replay its
// choices instead of estimating: the O3 layout pass solves its layout problem with the recorded
// conv and reorder timings, region fusion takes the recorded threshold, and kernel creation takes
// the recorded kernel and epilogue placement of each node it names.
// Without a record compiles stay deterministic estimates. A record is refused for any other
// model (digest) or target tier, with the command that makes a fitting one.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/target.h"
#include "ir/graph.h"

namespace opfuse {

struct TuningRecord {
  std::string model_digest;  // model_digest() of the graph as loaded
  std::string target;        // isa_tier_name of the target it was measured on ("avx2")
  // The layout pass's timings (milliseconds, keyed by the measuring timer's signatures:
  // passes/layout_measure.h), replayed when `use_layouts`; they lost end to end otherwise.
  bool use_layouts = false;
  std::map<std::string, double> layout_ms;
  // Region fusion's minimum traffic saving (FusionConfig::region_min_traffic_saving), when a
  // measured value beat the configured one.
  std::optional<double> region_threshold;
  // Node name (of the optimised graph) -> kernel name ("cpu.gemm", "onednn.matmul").
  std::map<std::string, std::string> kernels;
  // Node name -> where its epilogue runs: "library" (inside the library kernel as far as it keeps
  // NaN) or "own_pass" (all of it in our own pass after the kernel).
  std::map<std::string, std::string> epilogues;
  // What the tuner measured, for people reading the file: one line each, e.g.
  // "O3 default 47.1 ms, layouts measured 46.2 ms: kept".
  std::vector<std::string> measurements;
  std::string source;  // where it was read from ("tuning record 't.json'"), for messages
};

// A digest of the model: its structure as text (ops, attributes, names, shapes) and the bytes of
// every constant. 16 hex digits (FNV-1a, 64 bit): it tells models apart, it is not a signature.
std::string model_digest(const Graph& graph);

std::string tuning_record_to_json(const TuningRecord& record);
Result<TuningRecord> parse_tuning_record(std::string_view text, const std::string& source);
Result<TuningRecord> load_tuning_record(const std::string& path);

// User error when the record was made for another model or another target tier.
Status check_tuning_record(const TuningRecord& record, const Graph& graph, const Target& target);

}  // namespace opfuse
