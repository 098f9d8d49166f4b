#include "cli_common.h"

#include <iostream>
#include <map>
#include <sstream>

#include "core/npy.h"
#include "core/random.h"
#include "frontend/onnx/importer.h"

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

void add_session_flags(CLI::App* cmd, SessionFlags& flags) {
  cmd->add_option("--mode", flags.mode, "eager (op by op, reference kernels) or graph (compiled)")
      ->default_val("graph");
  cmd->add_option("--level", flags.level, "graph-mode optimisation level: O0, O1, O2, O3")->default_val("O1");
  cmd->add_option("--threads", flags.threads, "OpenMP threads (0: all cores)")->default_val(0);
  cmd->add_flag("--print-after-all", flags.print_after_all,
                "print the graph (text IR) after every pass that changed it, to stderr");
  cmd->add_option("--passes", flags.passes, "run exactly these passes (comma-separated) instead of the level's pipeline");
  add_limit_flags(cmd, flags.limits);
}

Result<SessionOptions> session_options(const SessionFlags& flags) {
  SessionOptions options;
  OPFUSE_ASSIGN_OR_RETURN(options.mode, parse_execution_mode(flags.mode));
  OPFUSE_ASSIGN_OR_RETURN(options.level, parse_opt_level(flags.level));
  if (flags.threads < 0) return Status::user_error("--threads must be 0 or more");
  options.threads = flags.threads;
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
  std::map<std::string, int64_t> symbols;
  for (const std::string& d : flags.dims) {
    OPFUSE_ASSIGN_OR_RETURN(auto kv, split_assignment(d, "--dim"));
    char* end = nullptr;
    const long long n = std::strtoll(kv.second.c_str(), &end, 10);
    if (*end != '\0' || n < 0) {
      return Status::user_error(str_cat("--dim ", d, ": '", kv.second, "' is not a size"));
    }
    symbols[kv.first] = n;
  }
  Random rng(flags.seed);
  for (const TensorSignature& sig : session.inputs()) {
    if (inputs.count(sig.name)) continue;
    if (!sig.shape) {
      return Status::user_error(str_cat("input '", sig.name,
                                        "' has unknown rank; give it with --input NAME=FILE.npy"));
    }
    std::vector<int64_t> dims;
    for (const Dim& d : *sig.shape) {
      if (d.is_known()) {
        dims.push_back(d.value());
      } else if (d.is_symbolic() && symbols.count(d.symbol_name())) {
        dims.push_back(symbols[d.symbol_name()]);
      } else {
        dims.push_back(1);
      }
    }
    OPFUSE_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(sig.dtype, dims, str_cat("input '", sig.name, "'")));
    fill_uniform(t, rng, is_float(sig.dtype) ? -1.0 : 0.0, is_float(sig.dtype) ? 1.0 : 2.0);
    inputs[sig.name] = std::move(t);
  }
  return inputs;
}

Result<Session> open_session(const std::string& model, const SessionFlags& flags) {
  OPFUSE_ASSIGN_OR_RETURN(SessionOptions options, session_options(flags));
  OPFUSE_ASSIGN_OR_RETURN(Graph graph, load_model(model, flags.limits));
  return Session::create(std::move(graph), options);
}

}  // namespace opfuse::cli
