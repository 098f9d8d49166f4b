#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli_common.h"
#include "commands.h"
#include "core/file_io.h"
#include "core/npy.h"
#include "pipelines/pipeline.h"
#include "runtime/session.h"

namespace opfuse::cli {
namespace {

struct RunArgs {
  std::string model;
  SessionFlags session;
  InputFlags inputs;
  std::string output_dir;
  bool force = false;
  double time_limit_ms = 0;  // 0: none
  int64_t max_loop_iterations = RunLimits::kDefaultMaxLoopIterations;
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
  OPFUSE_ASSIGN_OR_RETURN(Session session, open_session(args.model, args.session));
  OPFUSE_ASSIGN_OR_RETURN(TensorMap inputs, gather_inputs(session, args.inputs));

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
      OPFUSE_TRY(check_can_write(path, args.force));
      files[sig.name] = path;
    }
  }

  const auto start = std::chrono::steady_clock::now();
  RunLimits limits;
  limits.max_loop_iterations = args.max_loop_iterations;
  if (args.time_limit_ms > 0) {
    limits.deadline = start + std::chrono::microseconds(static_cast<int64_t>(args.time_limit_ms * 1000));
  }
  OPFUSE_ASSIGN_OR_RETURN(TensorMap outputs, session.run(inputs, limits));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("ran %s (%s", args.model.c_str(), execution_mode_name(session.options().mode).data());
  if (session.options().mode == ExecutionMode::kGraph) {
    std::printf(" %s", opt_level_name(session.options().level).data());
  }
  std::printf(") in %.2f ms\noutputs:\n", ms);
  for (const TensorSignature& sig : session.outputs()) {
    const Tensor& t = outputs.at(sig.name);
    print_tensor_summary(sig.name, t);
    if (files.count(sig.name)) {
      // Checked above, but a file may have appeared during the run: without --force the write
      // still refuses (atomically) rather than replace it.
      OPFUSE_TRY(write_npy(files[sig.name], t, args.force));
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
  add_session_flags(cmd, args->session);
  add_input_flags(cmd, args->inputs, /*random_by_default=*/false);
  cmd->add_option("--output-dir", args->output_dir,
                  "write each output to DIR/<name>.npy (characters outside [A-Za-z0-9._-] become _)");
  cmd->add_flag("--force", args->force, "overwrite existing output files");
  cmd->add_option("--time-limit", args->time_limit_ms,
                  "MS: stop the run (between kernels, and between a Loop's iterations) once it has taken this long; an error")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-loop-iterations", args->max_loop_iterations,
                  "N: a Loop running more iterations than this fails instead (a trip count of 2^62 with a "
                  "condition that stays true)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  return [args] { return run(*args); };
}

}  // namespace opfuse::cli
