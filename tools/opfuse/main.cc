#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "cli_common.h"
#include "commands.h"

namespace {

// How idle OpenMP workers wait for the next parallel region (libgomp reads this before main
// runs, so when the user has chosen nothing we set it and re-execute ourselves once): spinning
// for a bounded time, then sleeping. Measured on this 2-core KVM guest, side by side with ONNX
// Runtime (whose pool also spins): with OMP_WAIT_POLICY=passive every parallel region begins
// with a futex wake-up, and efficientnet_b0 ran in 20-40 ms against 13.0-14.3 ms spinning (ORT
// 13.1-14.4), bert_base in 245-490 ms against 160-170 (ORT 184-225); the demo took 5.3-6.2 s
// against 4.3-4.7. A short spin is not enough: GOMP_SPINCOUNT=10000 still gave bert_base 220
// ms (a worker done early falls asleep at the barrier while the other finishes its share). With
// 1e6 pause loops a worker spins for tens of milliseconds after the last region, then sleeps,
// instead of holding a core forever as OMP_WAIT_POLICY=active alone would. (An earlier note here
// saw spinning make the demo 10x slower on a machine shared with busy builds; that is what a
// user on a loaded machine may still want OMP_WAIT_POLICY=passive for.)
void default_to_bounded_openmp_spinning(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "active", 1);
  setenv("GOMP_SPINCOUNT", "1000000", 1);
  execv("/proc/self/exe", argv);  // only returns on failure: then run with the default policy
}

}  // namespace

int main(int argc, char** argv) {
  default_to_bounded_openmp_spinning(argv);
  CLI::App app{"opfuse: an operator-fusing inference compiler and CPU runtime for ONNX models"};
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, opfuse::cli::Action>> commands;
  for (auto add : {opfuse::cli::add_info_command, opfuse::cli::add_run_command,
                   opfuse::cli::add_bench_command, opfuse::cli::add_demo_command,
                   opfuse::cli::add_report_command, opfuse::cli::add_viz_command,
                   opfuse::cli::add_profile_command, opfuse::cli::add_validate_command,
                   opfuse::cli::add_optimize_command, opfuse::cli::add_tune_command,
                   opfuse::cli::add_serve_command}) {
    const size_t before = app.get_subcommands({}).size();
    opfuse::cli::Action action = add(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(action));
  }
  std::vector<std::string> custom_op_libs;  // every command takes --custom-op-lib and --target
  std::string target;
  for (auto& command : commands) {
    opfuse::cli::add_custom_op_lib_flag(command.first, custom_op_libs);
    opfuse::cli::add_target_flag(command.first, target);
    // A copy of the action, not a capture of the binding: clang 14 cannot capture those.
    command.second = [action = command.second, &custom_op_libs, &target]() -> opfuse::Status {
      OPFUSE_TRY(opfuse::cli::apply_target_flag(target));
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
