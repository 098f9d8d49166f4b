// Flags and helpers shared by the commands that run a model (run, bench, ...).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "runtime/session.h"

namespace opfuse::cli {

// --max-weight-bytes --max-alloc-bytes: caps that make a hostile model (or a huge symbolic dim)
// an error instead of exhausting memory. Every command that loads a model takes them.
struct LimitFlags {
  uint64_t max_weight_bytes = 0;  // all weights of the model together; 0: no cap
  uint64_t max_alloc_bytes = 0;   // any one tensor or arena, at load and run time; 0: the default
};
void add_limit_flags(CLI::App* cmd, LimitFlags& flags);
// Applies the allocation cap (process-wide) and loads the model with the weight caps.
Result<Graph> load_model(const std::string& path, const LimitFlags& flags);

// --mode --level --threads --print-after-all --passes (and the limit flags): how every running
// command builds its Session.
struct SessionFlags {
  std::string mode = "graph";
  std::string level = "O1";
  int threads = 0;
  bool print_after_all = false;
  std::string passes;
  LimitFlags limits;
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

// Loads an ONNX model and creates a session for it.
Result<Session> open_session(const std::string& model, const SessionFlags& flags);

}  // namespace opfuse::cli
