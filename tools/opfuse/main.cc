#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "cli_common.h"
#include "commands.h"

namespace {

// OpenMP threads that spin after a parallel region starve everything else on a busy machine:
// measured here, the demo ran 10x slower with libgomp's default (spinning) wait policy than
// with "passive". libgomp reads OMP_WAIT_POLICY before main runs, so when the user has not
// chosen a policy we set it and re-execute ourselves once.
void default_to_passive_openmp_waits(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  execv("/proc/self/exe", argv);  // only returns on failure: then run with the default policy
}

}  // namespace

int main(int argc, char** argv) {
  default_to_passive_openmp_waits(argv);
  CLI::App app{"opfuse: an operator-fusing inference compiler and CPU runtime for ONNX models"};
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, opfuse::cli::Action>> commands;
  for (auto add : {opfuse::cli::add_info_command, opfuse::cli::add_run_command,
                   opfuse::cli::add_bench_command, opfuse::cli::add_demo_command,
                   opfuse::cli::add_report_command, opfuse::cli::add_viz_command,
                   opfuse::cli::add_profile_command, opfuse::cli::add_validate_command,
                   opfuse::cli::add_optimize_command}) {
    const size_t before = app.get_subcommands({}).size();
    opfuse::cli::Action action = add(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(action));
  }
  std::vector<std::string> custom_op_libs;  // every command takes --custom-op-lib
  for (auto& [sub, action] : commands) {
    opfuse::cli::add_custom_op_lib_flag(sub, custom_op_libs);
    action = [action, &custom_op_libs]() -> opfuse::Status {
      OPFUSE_TRY(opfuse::cli::load_custom_op_libs(custom_op_libs));
      return action();
    };
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 1;  // bad command line: a user error
  }
  try {
    for (auto& [sub, action] : commands) {
      if (!sub->parsed()) continue;
      opfuse::Status status = action();
      if (status.is_ok()) return 0;
      std::fprintf(stderr, "opfuse %s: error: %s\n", sub->get_name().c_str(),
                   status.message().c_str());
      return status.kind() == opfuse::ErrorKind::kUser ? 1 : 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "opfuse: internal error: %s\n", e.what());
    return 2;
  }
  return 2;
}
