// What the user lets the fusion passes do: one structure behind the C++ API (SessionOptions ->
// PipelineOptions), the CLI flags and the JSON config file. Every fusing pass asks it before it
// rewrites: is this rule enabled, may this node join a fusion.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace opfuse {

class Node;
struct TuningRecord;  // passes/tuning_record.h

struct FusionConfig {
  // Rules (pattern names, "region_fusion", "fold_batchnorm" ...) switched off by name.
  std::set<std::string> disabled_rules;
  // When non-empty, only these rules run (the others count as disabled).
  std::set<std::string> enabled_rules;
  // Nodes of these op types never join a fusion ("Softmax": keep every Softmax its own kernel).
  std::set<std::string> disabled_op_types;
  // Nodes whose name matches one of these globs (`*`, `?`) never join a fusion, e.g.
  // "classifier/*" keeps a classifier head unfused while the backbone fuses.
  std::vector<std::string> excluded_node_globs;
  // Region fusion: fuse a candidate when it cuts estimated memory traffic by at least this
  // fraction, and never build a region of more than this many nodes.
  double region_min_traffic_saving = 0.30;
  int max_region_nodes = 64;
  // Bytes of index tables one generated region kernel may precompute (for the Pad, Concat and
  // Gather it fuses: 8 bytes per element); a region that would need more is refused. 0: the
  // default, 64 MiB. It bounds nothing else (the plan's arena is not capped).
  int64_t region_table_budget_bytes = 0;
  // O3 layout: time each conv in nChw16c and nhwc at compile time and choose per conv
  // (passes/layout.cc). Off by default: it makes compiles nondeterministic and slower, and on this
  // machine it has not yet shown a measurable end-to-end gain over all-nChw16c.
  bool measure_layouts = false;
  // Choices measured by `opfuse tune` for this model and target (passes/tuning_record.h): the
  // layout pass replays its timings; kernel selection takes its kernels.
  std::shared_ptr<const TuningRecord> tuning;
  // Where the settings came from ("fusion config 'f.json'"), named by validation errors; empty
  // for settings made in code.
  std::string source;

  bool rule_enabled(std::string_view rule) const;
  // Whether `node` may be part of any fusion (its op type is not disabled and its name matches
  // no excluded glob).
  bool node_fusible(const Node& node) const;
  // Why `node` may not be fused ("excluded by glob 'classifier/*'"), or empty when it may.
  std::string node_refusal(const Node& node) const;
};

// `*` matches any run of characters (including '/'), `?` any one character.
bool glob_match(std::string_view glob, std::string_view text);

}  // namespace opfuse
