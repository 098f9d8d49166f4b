#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "core/npy.h"
#include "core/random.h"
#include "frontend/onnx/importer.h"
#include "runtime/session.h"

namespace opfuse::cli {
namespace {

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::vector<std::string> dims;    // SYMBOL=N, for --random
  bool random = false;
  uint64_t seed = 0;
  std::string output_dir;
  bool force = false;
};

// The file name an output is written to: every character outside [A-Za-z0-9._-] becomes '_'.
std::string output_file_name(const std::string& output_name) {
  std::string out = output_name;
  for (char& c : out) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return out + ".npy";
}

Result<std::pair<std::string, std::string>> split_assignment(const std::string& text,
                                                              const std::string& flag) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return Status::user_error(str_cat(flag, " expects NAME=VALUE, got '", text, "'"));
  }
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

// Random data for each input not given on the command line; symbolic dims come from --dim or 1.
Status add_random_inputs(const Session& session, const RunArgs& args, TensorMap& inputs) {
  std::map<std::string, int64_t> symbols;
  for (const std::string& d : args.dims) {
    OPFUSE_ASSIGN_OR_RETURN(auto kv, split_assignment(d, "--dim"));
    char* end = nullptr;
    const long long n = std::strtoll(kv.second.c_str(), &end, 10);
    if (*end != '\0' || n < 0) {
      return Status::user_error(str_cat("--dim ", d, ": '", kv.second, "' is not a size"));
    }
    symbols[kv.first] = n;
  }
  Random rng(args.seed);
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
  return Status::ok();
}

void print_tensor_summary(const std::string& name, const Tensor& t) {
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.get_double(i);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  std::printf("  %s: %s", name.c_str(), t.type_string().c_str());
  if (t.numel() > 0) {
    std::printf("  min %.6g  max %.6g  mean %.6g  first [", lo, hi, sum / static_cast<double>(t.numel()));
    for (int64_t i = 0; i < std::min<int64_t>(t.numel(), 5); ++i) {
      std::printf("%s%.6g", i ? ", " : "", t.get_double(i));
    }
    std::printf("%s]", t.numel() > 5 ? ", ..." : "");
  }
  std::printf("\n");
}

Status run(const RunArgs& args) {
  OPFUSE_ASSIGN_OR_RETURN(Graph graph, load_onnx_file(args.model));
  OPFUSE_ASSIGN_OR_RETURN(Session session, Session::create(std::move(graph)));
  TensorMap inputs;
  for (const std::string& spec : args.inputs) {
    OPFUSE_ASSIGN_OR_RETURN(auto kv, split_assignment(spec, "--input"));
    OPFUSE_ASSIGN_OR_RETURN(Tensor t, read_npy(kv.second));
    inputs[kv.first] = std::move(t);
  }
  if (args.random) OPFUSE_TRY(add_random_inputs(session, args, inputs));

  // Check the output files before running so a long run does not end in a refusal.
  std::map<std::string, std::string> files;
  if (!args.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.output_dir, ec);
    if (ec) return Status::user_error(str_cat("cannot create '", args.output_dir, "': ", ec.message()));
    std::map<std::string, std::string> owner;
    for (const TensorSignature& sig : session.outputs()) {
      const std::string file = output_file_name(sig.name);
      if (owner.count(file)) {
        return Status::user_error(str_cat("outputs '", owner[file], "' and '", sig.name,
                                          "' would both be written to ", file));
      }
      owner[file] = sig.name;
      const std::string path = (std::filesystem::path(args.output_dir) / file).string();
      if (std::filesystem::exists(path) && !args.force) {
        return Status::user_error(str_cat("'", path, "' exists; pass --force to overwrite it"));
      }
      files[sig.name] = path;
    }
  }

  const auto start = std::chrono::steady_clock::now();
  OPFUSE_ASSIGN_OR_RETURN(TensorMap outputs, session.run(inputs));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("ran %s (eager) in %.2f ms\noutputs:\n", args.model.c_str(), ms);
  for (const TensorSignature& sig : session.outputs()) {
    const Tensor& t = outputs.at(sig.name);
    print_tensor_summary(sig.name, t);
    if (files.count(sig.name)) {
      OPFUSE_TRY(write_npy(files[sig.name], t));
      std::printf("    -> %s\n", files[sig.name].c_str());
    }
  }
  return Status::ok();
}

}  // namespace

Action add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Run a model on inputs from .npy files or random data");
  auto args = std::make_shared<RunArgs>();
  cmd->add_option("MODEL", args->model, "ONNX model file")->required();
  cmd->add_option("--input", args->inputs, "NAME=FILE.npy, one per model input (repeatable)");
  cmd->add_flag("--random", args->random, "fill inputs not given with seeded random data");
  cmd->add_option("--seed", args->seed, "seed for --random")->default_val(0);
  cmd->add_option("--dim", args->dims, "SYMBOL=N: size of a symbolic dim for --random (default 1)");
  cmd->add_option("--output-dir", args->output_dir,
                  "write each output to DIR/<name>.npy (characters outside [A-Za-z0-9._-] become _)");
  cmd->add_flag("--force", args->force, "overwrite existing output files");
  return [args] { return run(*args); };
}

}  // namespace opfuse::cli
