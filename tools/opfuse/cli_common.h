// Flags and helpers shared by the commands that run a model (run, bench, ...).
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

#include "pipelines/pipeline.h"
#include "report/fusion_analysis.h"
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

// --mode --level --threads --flush-denormals --print-after-all --passes (and the limit flags): how every running
// command builds its Session.
// The fusion flags (--disable RULE, --enable-only RULE, --disable-op TYPE, --exclude GLOB,
// --region-threshold, --max-region-nodes, --region-table-budget, --fusion-config FILE, --tuning FILE) fill
// SessionOptions::pipeline.fusion; flags add to (and numbers override) the config file's values.
struct SessionFlags {
  std::string mode = "graph";
  std::string level;  // set by add_session_flags to the command's default
  int threads = 0;
  bool flush_denormals = false;
  bool print_after_all = false;
  std::string passes;
  std::vector<std::string> disable, enable_only, disable_op, exclude;
  std::string region_threshold, max_region_nodes, region_table_budget;  // empty: not given
  bool measure_layouts = false;
  std::string fusion_config;  // JSON file (passes/fusion_config_json.h)
  std::string tuning;         // tuning record (passes/tuning_record.h)
  const CLI::Option* level_option = nullptr;  // set by add_session_flags: was --level given?
  LimitFlags limits;
};
void add_session_flags(CLI::App* cmd, SessionFlags& flags,
                       std::string_view default_level = opt_level_name(kDefaultOptLevel));
Result<SessionOptions> session_options(const SessionFlags& flags);
// The level (--level, else the fusion config file's, else the command's default) and the fusion
// config (the file's, then the flags over it, validated), the file read once.
struct FusionSettings {
  OptLevel level;
  FusionConfig config;
};
Result<FusionSettings> fusion_settings(const SessionFlags& flags);

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

// --dim SYMBOL=N flags as a map (the report, viz and export commands bind symbolic dims with it).
Result<std::map<std::string, int64_t>> parse_dims(const std::vector<std::string>& dims);

// Writes a file the user asked for (write_file_atomically: no overwrite without --force).
Status write_output(const std::string& path, std::string_view bytes, bool force);
// The same check up front, so a command fails before expensive work.
Status check_can_write_output(const std::string& path, bool force);

// Loads the model and runs analyze_fusion at the flags' level with their fusion config. `binds`
// ("NAME=VALUE") give scalar integer or bool inputs values, as graph mode binds a setting an If
// depends on.
Result<FusionAnalysis> analyze_model(const std::string& model, const SessionFlags& flags,
                                     const std::vector<std::string>& dims, const std::vector<std::string>& binds = {});
// The values --bind NAME=VALUE gives, each a scalar of its input's dtype; errors name the input.
Result<TensorMap> parse_binds(const Graph& graph, const std::vector<std::string>& binds);
// --bind NAME=VALUE (repeatable), for the commands that analyse without running.
void add_bind_flag(CLI::App* cmd, std::vector<std::string>& binds);

// --custom-op-lib PATH (repeatable), added to every command by main.cc: plugins whose ops
// models may use (plugin/opfuse_plugin.h). Loaded before the command runs.
void add_custom_op_lib_flag(CLI::App* cmd, std::vector<std::string>& libs);
Status load_custom_op_libs(const std::vector<std::string>& libs);

// --target native|avx2|avx512_core|... (every command, added by main.cc): the CPU tier to compile
// and run for (core/target.h), capping oneDNN and Highway. Empty: OPFUSE_TARGET or oneDNN's
// ONEDNN_MAX_CPU_ISA if set, else the host.
void add_target_flag(CLI::App* cmd, std::string& target);
Status apply_target_flag(const std::string& target);

// Loads an ONNX model and creates a session for it.
Result<Session> open_session(const std::string& model, const SessionFlags& flags);
Result<Session> open_session(const std::string& model, const SessionOptions& options, const LimitFlags& limits);

}  // namespace opfuse::cli
