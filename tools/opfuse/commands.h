// The `opfuse` command-line tool: one file per command, each adding itself to the CLI11 app.
// A command's action returns a Status; main maps it to the exit code
// (0 success, 1 user error, 2 internal error).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>

#include "core/status.h"

namespace opfuse::cli {

using Action = std::function<Status()>;

// Each registers a subcommand on `app` and returns the action to run when it is chosen.
Action add_info_command(CLI::App& app);
Action add_run_command(CLI::App& app);
Action add_demo_command(CLI::App& app);
Action add_bench_command(CLI::App& app);
Action add_report_command(CLI::App& app);    // report_command.cc
Action add_viz_command(CLI::App& app);       // viz_command.cc
Action add_profile_command(CLI::App& app);   // profile_command.cc
Action add_validate_command(CLI::App& app);  // validate_command.cc
Action add_optimize_command(CLI::App& app);  // optimize_command.cc
Action add_tune_command(CLI::App& app);      // tune_command.cc
Action add_serve_command(CLI::App& app);     // serve_command.cc

}  // namespace opfuse::cli
