// `opfuse profile MODEL --level L`: per-kernel time table, Chrome trace (--trace FILE, open in
// Perfetto or chrome://tracing), and the small-op share before (--baseline, default O1) and
// after fusion (report/profiler.h).
#include <cstdio>

#include "cli_common.h"
#include "commands.h"
#include "passes/fusion_config_json.h"
#include "pipelines/pipeline.h"
#include "report/profiler.h"

namespace opfuse::cli {
namespace {

struct ProfileArgs {
  std::string model;
  SessionFlags session;
  InputFlags inputs;
  std::string baseline = "O1";
  int runs = 10;
  int warmup = 2;
  std::string small_bytes = "64KiB";
  std::string trace;
  bool force = false;
  size_t top = 30;
};

Status profile(const ProfileArgs& args) {
  if (!args.trace.empty()) OPFUSE_TRY(check_can_write_output(args.trace, args.force));
  if (args.session.mode != "graph") return Status::user_error("profile times graph mode; --mode must be graph");
  ProfileOptions options;
  options.runs = args.runs;
  options.warmup = args.warmup;
  OPFUSE_ASSIGN_OR_RETURN(options.small_op_bytes, parse_byte_size(args.small_bytes));
  OPFUSE_ASSIGN_OR_RETURN(SessionOptions main, session_options(args.session));
  const OptLevel level = main.level;
  std::vector<std::pair<std::string, SessionOptions>> runs;
  if (!args.baseline.empty() && args.baseline != "none") {
    OPFUSE_ASSIGN_OR_RETURN(OptLevel base, parse_opt_level(args.baseline));
    if (base != level) {
      SessionFlags flags = args.session;
      flags.level = args.baseline;
      flags.level_option = nullptr;
      flags.fusion_config.clear();  // the baseline is the plain level
      flags.disable.clear(), flags.enable_only.clear(), flags.disable_op.clear(), flags.exclude.clear();
      OPFUSE_ASSIGN_OR_RETURN(SessionOptions baseline, session_options(flags));
      runs.emplace_back(args.baseline, std::move(baseline));
    }
  }
  runs.emplace_back(std::string(opt_level_name(level)), std::move(main));
  std::vector<Profile> profiles;
  for (const auto& [label, session_options] : runs) {
    OPFUSE_ASSIGN_OR_RETURN(Session session, open_session(args.model, session_options, args.session.limits));
    OPFUSE_ASSIGN_OR_RETURN(TensorMap inputs, gather_inputs(session, args.inputs));
    OPFUSE_ASSIGN_OR_RETURN(auto plan, session.plan_for(inputs));
    OPFUSE_ASSIGN_OR_RETURN(Profile p, profile_plan(*plan, inputs, options, label));
    std::printf("%s\n", format_profile(p, args.top).c_str());
    profiles.push_back(std::move(p));
  }
  std::printf("small-op share (kernels writing < %s):\n", args.small_bytes.c_str());
  for (const Profile& p : profiles) {
    std::printf("  %-4s %5.1f%% of kernel time in %zu of %zu kernels\n", p.label.c_str(), 100.0 * p.small_op_share,
                p.small_kernels, p.steps.size());
  }
  if (profiles.size() == 2 && profiles[1].wall_us_per_run > 0) {
    std::printf("speed-up %s -> %s: %.2fx (median wall time; the machine may be noisy)\n", profiles[0].label.c_str(),
                profiles[1].label.c_str(), profiles[0].wall_us_per_run / profiles[1].wall_us_per_run);
  }
  if (!args.trace.empty()) {
    OPFUSE_TRY(write_output(args.trace, chrome_trace_json(profiles), args.force));
    std::printf("wrote %s (open in https://ui.perfetto.dev or chrome://tracing)\n", args.trace.c_str());
  }
  return Status::ok();
}

}  // namespace

Action add_profile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("profile", "Time every kernel of graph mode: per-kernel table, Chrome "
                                            "trace, small-op share before vs after fusion");
  auto args = std::make_shared<ProfileArgs>();
  cmd->add_option("MODEL", args->model, "ONNX model file")->required();
  add_session_flags(cmd, args->session);
  add_input_flags(cmd, args->inputs, /*random_by_default=*/true);
  cmd->add_option("--baseline", args->baseline, "level to compare with (none: no baseline)")->default_val("O1");
  cmd->add_option("--runs", args->runs, "timed runs")->default_val(10);
  cmd->add_option("--warmup", args->warmup, "untimed runs first")->default_val(2);
  cmd->add_option("--small-bytes", args->small_bytes, "a kernel writing less than this is small")->default_val("64KiB");
  cmd->add_option("--trace", args->trace, "write a Chrome-trace JSON file");
  cmd->add_flag("--force", args->force, "overwrite the trace file");
  cmd->add_option("--top", args->top, "rows of the table")->default_val(30);
  return [args] { return profile(*args); };
}

}  // namespace opfuse::cli
