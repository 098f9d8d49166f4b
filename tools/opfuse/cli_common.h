// Flags and helpers shared by the commands that run a model (run, bench, ...).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "runtime/session.h"

namespace opfuse::cli {

// --mode --level --threads --print-after-all --passes: how every running command builds its
// Session.
struct SessionFlags {
  std::string mode = "graph";
  std::string level = "O1";
  int threads = 0;
  bool print_after_all = false;
  std::string passes;
};
void add_session_flags(CLI::App* cmd, SessionFlags& flags);
Result<SessionOptions> session_options(const SessionFlags& flags);

// --input NAME=FILE.npy, --random, --seed, --dim SYMBOL=N: where a command's inputs come from.
struct InputFlags {
  std::vector<std::string> inputs;
  std::vector<std::string> dims;
  bool random = false;
  uint64_t seed = 0;
};
void add_input_flags(CLI::App* cmd, InputFlags& flags, bool random_by_default);
// Reads the .npy inputs, then fills the rest with seeded random data when `random` is set.
Result<TensorMap> gather_inputs(const Session& session, const InputFlags& flags);

// --custom-op-lib PATH (repeatable), added to every command by main.cc: plugins whose ops
// models may use (plugin/opfuse_plugin.h). Loaded before the command runs.
void add_custom_op_lib_flag(CLI::App* cmd, std::vector<std::string>& libs);
Status load_custom_op_libs(const std::vector<std::string>& libs);

// Loads an ONNX model and creates a session for it.
Result<Session> open_session(const std::string& model, const SessionFlags& flags);

}  // namespace opfuse::cli
