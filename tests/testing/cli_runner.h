// Runs the `opfuse` binary (OPFUSE_CLI, set by tests/CMakeLists.txt) and captures what it says.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace opfuse::testing_cli {

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

inline CommandResult run_cli(const std::string& args) {
  const std::string command = std::string(OPFUSE_CLI) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) output.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace opfuse::testing_cli
