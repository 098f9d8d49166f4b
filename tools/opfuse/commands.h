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

}  // namespace opfuse::cli
