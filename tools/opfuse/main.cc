#include <cstdio>
#include <exception>
#include <vector>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"opfuse: an operator-fusing inference compiler and CPU runtime for ONNX models"};
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, opfuse::cli::Action>> commands;
  for (auto add : {opfuse::cli::add_info_command, opfuse::cli::add_run_command,
                   opfuse::cli::add_demo_command}) {
    const size_t before = app.get_subcommands({}).size();
    opfuse::cli::Action action = add(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(action));
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
