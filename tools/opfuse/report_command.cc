// `opfuse report MODEL --level L [--json]`: what the level fused, refused and why, and the
// estimated savings (report/fusion_report.h). `--rules` lists every rule name the fusion flags
// accept.
#include <cstdio>

#include "cli_common.h"
#include "commands.h"
#include "passes/fusion_rules.h"
#include "report/fusion_report.h"

namespace opfuse::cli {
namespace {

struct ReportArgs {
  std::string model;
  SessionFlags session;
  std::vector<std::string> dims;
  std::vector<std::string> binds;
  bool json = false;
  bool rules = false;
  std::string output;
  bool force = false;
};

Status report(const ReportArgs& args) {
  if (args.rules) {
    for (const FusionRuleInfo& rule : known_fusion_rules()) {
      std::printf("%-28s %s\n", rule.name.c_str(), rule.summary.c_str());
    }
    return Status::ok();
  }
  if (args.model.empty()) return Status::user_error("give a MODEL (or --rules)");
  if (!args.output.empty()) OPFUSE_TRY(check_can_write_output(args.output, args.force));
  OPFUSE_ASSIGN_OR_RETURN(FusionAnalysis analysis, analyze_model(args.model, args.session, args.dims, args.binds));
  const FusionReport r = make_fusion_report(analysis);
  const std::string text = args.json ? fusion_report_json(r) : format_fusion_report(r);
  if (args.output.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return Status::ok();
  }
  OPFUSE_TRY(write_output(args.output, text, args.force));
  std::printf("wrote %s\n", args.output.c_str());
  return Status::ok();
}

}  // namespace

Action add_report_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("report", "What a level fuses and refuses (and why), per rule and per "
                                           "kernel, with estimated memory traffic before and after");
  auto args = std::make_shared<ReportArgs>();
  cmd->add_option("MODEL", args->model, "ONNX model file");
  add_session_flags(cmd, args->session, "O2");
  cmd->add_option("--dim", args->dims, "SYMBOL=N: size of a symbolic dim (default 1)");
  add_bind_flag(cmd, args->binds);
  cmd->add_flag("--json", args->json, "print JSON instead of text");
  cmd->add_flag("--rules", args->rules, "list every fusion rule name the fusion flags accept");
  cmd->add_option("-o,--output", args->output, "write the report to this file instead of stdout");
  cmd->add_flag("--force", args->force, "overwrite the output file");
  return [args] { return report(*args); };
}

}  // namespace opfuse::cli
