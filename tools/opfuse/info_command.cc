#include <cstdio>
#include <iostream>
#include <map>

#include "cli_common.h"
#include "commands.h"
#include "frontend/onnx/importer.h"
#include "kernels/target_caps.h"
#include "report/model_summary.h"

namespace opfuse::cli {
namespace {

struct InfoArgs {
  std::string model;
  std::string level;  // empty: the model as imported only
  std::vector<std::string> dims;
  bool steps = false;
  bool measure_layouts = false;
  LimitFlags limits;
};

// Compiles the model at a level (symbolic dims bound by --dim, else 1) and prints what graph
// mode would run: kernels per run, arena, the passes' decisions, optionally every step.
Status print_compiled(const InfoArgs& args, const ModelSummary& summary) {
  SessionFlags flags;
  flags.level = args.level;
  flags.limits = args.limits;
  flags.measure_layouts = args.measure_layouts;
  OPFUSE_ASSIGN_OR_RETURN(Session session, open_session(args.model, flags));
  InputFlags input_flags;
  input_flags.random = true;
  input_flags.dims = args.dims;
  OPFUSE_ASSIGN_OR_RETURN(TensorMap inputs, gather_inputs(session, input_flags));
  OPFUSE_ASSIGN_OR_RETURN(auto plan, session.plan_for(inputs));
  std::printf("\ngraph mode %s: %zu kernels per run (from %zu nodes), arena %.2f MB\n",
              args.level.c_str(), plan->kernels_per_run(), summary.num_nodes,
              static_cast<double>(plan->arena_bytes()) / 1e6);
  std::map<std::string, std::pair<int, int>> per_pass;  // applied, refused
  std::map<std::string, int> reasons;
  for (const PassDecision& d : plan->pass_decisions()) {
    auto& counts = per_pass[d.pass];
    (d.applied ? counts.first : counts.second)++;
    if (!d.applied) ++reasons[d.pass + ": " + d.reason];
  }
  for (const auto& [pass, counts] : per_pass) {
    std::printf("  %-16s applied %d, refused %d\n", pass.c_str(), counts.first, counts.second);
  }
  for (const auto& [reason, count] : reasons) std::printf("    refused %dx (%s)\n", count, reason.c_str());
  // O3: each conv's layout choice (passes/layout.cc), with the estimates or timings behind it.
  for (const PassDecision& d : plan->pass_decisions()) {
    const bool costed = d.what.find("(measured") != std::string::npos || d.what.find("(estimated") != std::string::npos;
    if (d.pass == "layout" && d.applied && costed) {
      std::printf("    %s\n", d.what.c_str());
    }
  }
  std::map<std::string, int> kernels;
  for (const std::string& step : plan->describe_steps()) {
    ++kernels[step.substr(step.rfind("-> ") + 3)];
    if (args.steps) std::printf("  %s\n", step.c_str());
  }
  std::string by_impl;
  for (const auto& [name, count] : kernels) by_impl += str_cat(by_impl.empty() ? "" : ", ", name, " ", count);
  std::printf("  kernels by implementation: %s\n", by_impl.c_str());
  return Status::ok();
}

}  // namespace

Action add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Print a model's inputs, outputs, op histogram, "
                                         "parameter count and FLOPs; with --level, what graph mode runs");
  auto args = std::make_shared<InfoArgs>();
  cmd->add_option("MODEL", args->model, "ONNX model file")->required();
  cmd->add_option("--level", args->level, "also compile at O0..O3 and print kernels per run, arena and pass decisions");
  cmd->add_option("--dim", args->dims, "SYMBOL=N: size of a symbolic dim when compiling (default 1)");
  add_limit_flags(cmd, args->limits);
  cmd->add_flag("--steps", args->steps, "with --level: list every step and the kernel chosen for it");
  cmd->add_flag("--measure-layouts", args->measure_layouts,
                "with --level O3: time each conv in nChw16c and nhwc and print the choice and timings");
  return [args]() -> Status {
    OPFUSE_ASSIGN_OR_RETURN(Graph graph, load_model(args->model, args->limits));
    const ModelSummary summary = summarize(graph);
    std::cout << "model: " << args->model << "\n" << format_summary(graph, summary);
    std::cout << "target: " << active_target().describe() << ", " << active_target().describe_core_distance()
              << " (host: " << isa_tier_name(host_target().isa)
              << "; vector kernels: " << highway_dispatch_target() << ")\n";
    if (!args->level.empty()) OPFUSE_TRY(print_compiled(*args, summary));
    return Status::ok();
  };
}

}  // namespace opfuse::cli
