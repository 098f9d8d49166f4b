// The fusion report: what the passes of a level fused, what they refused and why, and what that
// bought (`opfuse report MODEL --level L [--json]`, and this API).
//
//   auto graph = load_onnx_file("m.onnx");
//   auto analysis = analyze_fusion(*graph, OptLevel::kO2, pipeline_options);  // fusion_analysis.h
//   FusionReport report = make_fusion_report(*analysis);
//   std::cout << format_fusion_report(report);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipelines/pipeline.h"
#include "report/fusion_analysis.h"

namespace opfuse {

struct FusionReport {
  std::string level;  // "O2"
  std::string target;  // the CPU tier compiled for, "avx2 (32-byte vectors), 2 cores, ..."
  FusionConfig config;

  struct Rule {
    std::string name;
    int64_t matched = 0;  // candidates the rule looked at (applied + refused)
    int64_t applied = 0;
    int64_t refused = 0;
  };
  std::vector<Rule> rules;  // by name

  // A kernel of the optimised graph that does the work of several original nodes. Decisions that
  // build on each other (BN folded into a Conv that then absorbs its Relu) form one kernel.
  struct Kernel {
    std::string node;  // the node of the optimised graph ("" when later removed, e.g. folded away)
    std::string kind;  // its op ("opfuse::FusedConv", "Conv")
    std::vector<std::string> rules;    // the rules that built it
    std::vector<std::string> members;  // original node names, in execution order
    std::vector<std::string> member_ops;  // their op types ("?" for nodes a pass created)
    int64_t bytes_saved = 0;
    // O3: the layout pass's decision for it ("FusedConv 'c' on nhwc (estimated nChw16c 0.9 ms,
    // nhwc 0.8 ms; ...)"), or "" when it runs in the plain layout.
    std::string layout;
  };
  std::vector<Kernel> kernels;

  struct Refusal {
    std::string rule;
    std::string what;
    std::string reason;
    std::vector<std::string> members;
  };
  std::vector<Refusal> refused;

  // Nodes the config keeps out of every fusion (op type or name glob), whether or not a rule
  // tried: {node name, why}.
  std::vector<std::pair<std::string, std::string>> excluded;

  size_t nodes_before = 0, nodes_after = 0;
  size_t kernels_before = 0, kernels_after = 0;
  int64_t traffic_before = 0, traffic_after = 0;  // estimated bytes moved per run
};

FusionReport make_fusion_report(const FusionAnalysis& analysis);
// Plain text for a terminal; stable (goldens compare it).
std::string format_fusion_report(const FusionReport& report);
std::string fusion_report_json(const FusionReport& report);  // pretty-printed
// "1.50 MB", "820 B": how reports print sizes.
std::string format_bytes(int64_t bytes);

}  // namespace opfuse
