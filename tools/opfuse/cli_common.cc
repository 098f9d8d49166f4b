#include "cli_common.h"

#include <iostream>
#include <map>
#include <sstream>

#include "core/file_io.h"
#include "core/npy.h"
#include "runtime/random_inputs.h"
#include "passes/tuning_record.h"
#include "frontend/onnx/importer.h"
#include "kernels/target_caps.h"
#include "passes/fusion_config_json.h"
#include "pipelines/pipeline.h"
#include "plugin/plugin_loader.h"

namespace opfuse::cli {
namespace {

Result<std::pair<std::string, std::string>> split_assignment(const std::string& text,
                                                              const std::string& flag) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return Status::user_error(str_cat(flag, " expects NAME=VALUE, got '", text, "'"));
  }
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

}  // namespace

void add_limit_flags(CLI::App* cmd, LimitFlags& flags) {
  cmd->add_option("--max-weight-bytes", flags.max_weight_bytes,
                  "refuse models whose weights together need more bytes (0: no cap)");
  cmd->add_option("--max-alloc-bytes", flags.max_alloc_bytes,
                  "refuse any single tensor or arena above this many bytes, when loading and "
                  "running (0: the default cap, 16 GiB)");
}

Result<Graph> load_model(const std::string& path, const LimitFlags& flags) {
  if (flags.max_alloc_bytes != 0) set_max_allocation_bytes(flags.max_alloc_bytes);
  OnnxLoadOptions options;
  options.max_weight_bytes = flags.max_weight_bytes;
  options.max_tensor_bytes = flags.max_alloc_bytes;
  return load_onnx_file(path, options);
}

void add_session_flags(CLI::App* cmd, SessionFlags& flags, std::string_view default_level) {
  cmd->add_option("--mode", flags.mode, "eager (op by op, reference kernels) or graph (compiled)")
      ->default_val("graph");
  flags.level = std::string(default_level);
  flags.level_option = cmd->add_option("--level", flags.level, "graph-mode optimisation level: O0, O1, O2, O3")
                           ->default_val(std::string(default_level));
  auto* group = cmd->add_option_group("fusion", "What the fusion passes may do (docs/cli.md)");
  group->add_option("--disable", flags.disable, "switch off a fusion rule by name (repeatable)");
  group->add_option("--enable-only", flags.enable_only, "run only these fusion rules (repeatable)");
  group->add_option("--disable-op", flags.disable_op, "never fuse nodes of this op type (repeatable)");
  group->add_option("--exclude", flags.exclude,
                    "never fuse nodes whose name matches this glob, e.g. '/fc/*' (repeatable)");
  group->add_option("--region-threshold", flags.region_threshold,
                    "region fusion: min fraction of memory traffic saved (default 0.3)");
  group->add_option("--max-region-nodes", flags.max_region_nodes, "region fusion: max nodes per region (default 64)");
  group->add_option("--region-table-budget", flags.region_table_budget, "bytes of index tables one generated region kernel may precompute, e.g. 16MiB (0: the default, 64MiB)");
  group->add_flag("--measure-layouts", flags.measure_layouts,
                  "O3: time each conv in nChw16c and nhwc while compiling and choose per conv");
  group->add_option("--fusion-config", flags.fusion_config, "JSON fusion config file (flags add to it)");
  group->add_option("--tuning", flags.tuning,
                    "tuning record from 'opfuse tune' for this model and target: replay its measured choices");
  cmd->add_option("--threads", flags.threads, "OpenMP threads (0: all cores)")->default_val(0);
  cmd->add_flag("--flush-denormals", flags.flush_denormals,
                "graph mode: run with denormal floats flushed to zero (an error below 1.2e-38; "
                "denormals cost a microcode assist per instruction on Intel cores)");
  cmd->add_flag("--print-after-all", flags.print_after_all,
                "print the graph (text IR) after every pass that changed it, to stderr");
  cmd->add_option("--passes", flags.passes, "run exactly these passes (comma-separated) instead of the level's pipeline");
  add_limit_flags(cmd, flags.limits);
}

Result<FusionSettings> fusion_settings(const SessionFlags& flags) {
  FusionConfig config;
  std::optional<std::string> file_level;
  if (!flags.fusion_config.empty()) {
    OPFUSE_ASSIGN_OR_RETURN(FusionConfigFile file, load_fusion_config_file(flags.fusion_config));
    config = std::move(file.fusion);
    file_level = std::move(file.level);
  }
  // --level wins over the file's level; the command's default (in flags.level) comes last.
  const bool level_given = flags.level_option != nullptr && flags.level_option->count() > 0;
  OPFUSE_ASSIGN_OR_RETURN(OptLevel fallback, parse_opt_level(flags.level));
  OPFUSE_ASSIGN_OR_RETURN(OptLevel level,
                          choose_opt_level(level_given ? std::optional(flags.level) : std::nullopt, file_level,
                                           str_cat("fusion config '", flags.fusion_config, "'"), fallback));
  config.disabled_rules.insert(flags.disable.begin(), flags.disable.end());
  config.enabled_rules.insert(flags.enable_only.begin(), flags.enable_only.end());
  config.disabled_op_types.insert(flags.disable_op.begin(), flags.disable_op.end());
  config.excluded_node_globs.insert(config.excluded_node_globs.end(), flags.exclude.begin(), flags.exclude.end());
  if (!flags.region_threshold.empty()) {
    char* end = nullptr;
    config.region_min_traffic_saving = std::strtod(flags.region_threshold.c_str(), &end);
    if (*end != '\0') {
      return Status::user_error(str_cat("--region-threshold '", flags.region_threshold,
                                        "' is not a number (a fraction in [0, 1])"));
    }
  }
  if (!flags.max_region_nodes.empty()) {
    char* end = nullptr;
    const long long n = std::strtoll(flags.max_region_nodes.c_str(), &end, 10);
    if (*end != '\0' || n > 1000000) {
      return Status::user_error(str_cat("--max-region-nodes '", flags.max_region_nodes, "' is not a node count"));
    }
    config.max_region_nodes = static_cast<int>(n);
  }
  if (!flags.region_table_budget.empty()) {
    auto bytes = parse_byte_size(flags.region_table_budget);
    if (!bytes.is_ok()) return Status::user_error(str_cat("--region-table-budget: ", bytes.status().message()));
    config.region_table_budget_bytes = *bytes;
  }
  if (flags.measure_layouts) config.measure_layouts = true;
  if (!flags.tuning.empty()) {
    OPFUSE_ASSIGN_OR_RETURN(TuningRecord record, load_tuning_record(flags.tuning));
    config.tuning = std::make_shared<const TuningRecord>(std::move(record));
  }
  // Validated once, where it is used (run_pipeline; Session::create in eager mode).
  return FusionSettings{level, std::move(config)};
}

Result<std::map<std::string, int64_t>> parse_dims(const std::vector<std::string>& dims) {
  std::map<std::string, int64_t> symbols;
  for (const std::string& d : dims) {
    OPFUSE_ASSIGN_OR_RETURN(auto kv, split_assignment(d, "--dim"));
    char* end = nullptr;
    const long long n = std::strtoll(kv.second.c_str(), &end, 10);
    if (*end != '\0' || n < 0) {
      return Status::user_error(str_cat("--dim ", d, ": '", kv.second, "' is not a size"));
    }
    symbols[kv.first] = n;
  }
  return symbols;
}

Status write_output(const std::string& path, std::string_view bytes, bool force) {
  return write_file_atomically(path, bytes, force);
}

Status check_can_write_output(const std::string& path, bool force) { return check_can_write(path, force); }

Result<SessionOptions> session_options(const SessionFlags& flags) {
  SessionOptions options;
  OPFUSE_ASSIGN_OR_RETURN(options.mode, parse_execution_mode(flags.mode));
  OPFUSE_ASSIGN_OR_RETURN(FusionSettings fusion, fusion_settings(flags));
  options.level = fusion.level;
  options.pipeline.fusion = std::move(fusion.config);
  if (flags.threads < 0) return Status::user_error("--threads must be 0 or more");
  options.threads = flags.threads;
  options.flush_denormals = flags.flush_denormals;
  if (flags.print_after_all) options.pipeline.print_after_all = &std::cerr;
  if (!flags.passes.empty()) {
    std::vector<std::string> names;
    std::stringstream stream(flags.passes);
    std::string name;
    while (std::getline(stream, name, ',')) {
      if (!name.empty()) names.push_back(name);
    }
    options.pipeline.passes = std::move(names);
  }
  return options;
}

void add_input_flags(CLI::App* cmd, InputFlags& flags, bool random_by_default) {
  cmd->add_option("--input", flags.inputs, "NAME=FILE.npy, one per model input (repeatable)");
  if (random_by_default) {
    flags.random = true;
  } else {
    cmd->add_flag("--random", flags.random, "fill inputs not given with seeded random data");
  }
  cmd->add_option("--seed", flags.seed, "seed for random inputs")->default_val(0);
  cmd->add_option("--dim", flags.dims, "SYMBOL=N: size of a symbolic dim for random inputs (default 1)");
}

Result<TensorMap> gather_inputs(const Session& session, const InputFlags& flags) {
  TensorMap inputs;
  for (const std::string& spec : flags.inputs) {
    OPFUSE_ASSIGN_OR_RETURN(auto kv, split_assignment(spec, "--input"));
    OPFUSE_ASSIGN_OR_RETURN(Tensor t, read_npy(kv.second));
    inputs[kv.first] = std::move(t);
  }
  if (!flags.random) return inputs;
  OPFUSE_ASSIGN_OR_RETURN(auto symbols, parse_dims(flags.dims));
  return random_inputs(session, flags.seed, symbols, std::move(inputs));
}

Result<TensorMap> parse_binds(const Graph& graph, const std::vector<std::string>& binds) {
  TensorMap values;
  for (const std::string& b : binds) {
    OPFUSE_ASSIGN_OR_RETURN(auto kv, split_assignment(b, "--bind"));
    const std::string& name = kv.first;
    char* end = nullptr;
    const long long value = std::strtoll(kv.second.c_str(), &end, 10);
    if (kv.second.empty() || *end != '\0') {
      return Status::user_error(str_cat("--bind ", b, ": '", kv.second, "' is not an integer"));
    }
    const Value* in = graph.find_value(name);
    if (in == nullptr || !in->is_graph_input()) {
      return Status::user_error(str_cat("--bind ", name, ": the model has no input '", name, "'"));
    }
    if (!in->shape || !in->shape->empty() ||
        (in->dtype != DType::kI64 && in->dtype != DType::kI32 && in->dtype != DType::kBool)) {
      return Status::user_error(str_cat("--bind ", name, ": input '", name, "' is ", in->type_string(),
                                        "; only scalar integer or bool inputs can be bound"));
    }
    OPFUSE_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(in->dtype, {}));
    t.set_double(0, static_cast<double>(value));
    values[name] = std::move(t);
  }
  return values;
}

Result<FusionAnalysis> analyze_model(const std::string& model, const SessionFlags& flags,
                                     const std::vector<std::string>& dims, const std::vector<std::string>& binds) {
  OPFUSE_ASSIGN_OR_RETURN(SessionOptions options, session_options(flags));
  OPFUSE_ASSIGN_OR_RETURN(auto symbols, parse_dims(dims));
  OPFUSE_ASSIGN_OR_RETURN(Graph graph, load_model(model, flags.limits));
  if (const auto& tuning = options.pipeline.fusion.tuning) {
    OPFUSE_TRY(check_tuning_record(*tuning, graph, active_target()));
  }
  OPFUSE_ASSIGN_OR_RETURN(TensorMap values, parse_binds(graph, binds));
  return analyze_fusion(graph, options.level, options.pipeline, symbols, values);
}

void add_bind_flag(CLI::App* cmd, std::vector<std::string>& binds) {
  cmd->add_option("--bind", binds,
                  "NAME=VALUE: analyse with a scalar integer or bool input fixed to this value, as graph mode "
                  "compiles a plan per value of an input an If depends on (a sample rate)");
}

void add_custom_op_lib_flag(CLI::App* cmd, std::vector<std::string>& libs) {
  cmd->add_option("--custom-op-lib", libs, "PATH: load custom ops from this plugin library (repeatable)");
}

Status load_custom_op_libs(const std::vector<std::string>& libs) {
  for (const std::string& lib : libs) OPFUSE_TRY(load_custom_op_library(lib).status());
  return Status::ok();
}

void add_target_flag(CLI::App* cmd, std::string& target) {
  std::string tiers = "native";
  for (IsaTier t : all_isa_tiers()) tiers += str_cat(", ", isa_tier_name(t));
  cmd->add_option("--target", target, str_cat("CPU tier to compile and run for: ", tiers, " (default: this CPU)"));
}

Status apply_target_flag(const std::string& target) {
  if (target.empty()) {
    apply_target_caps();
    return Status::ok();
  }
  return select_target(target).status().with_context("--target");
}

Result<Session> open_session(const std::string& model, const SessionFlags& flags) {
  OPFUSE_ASSIGN_OR_RETURN(SessionOptions options, session_options(flags));
  return open_session(model, options, flags.limits);
}

Result<Session> open_session(const std::string& model, const SessionOptions& options, const LimitFlags& limits) {
  OPFUSE_ASSIGN_OR_RETURN(Graph graph, load_model(model, limits));
  return Session::create(std::move(graph), options);
}

}  // namespace opfuse::cli
