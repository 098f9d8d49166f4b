// `opfuse tune MODEL -o tuning.json`: measures the target-dependent choices on this machine
// (runtime/tuner.h) and writes a tuning record that run, bench, profile, validate, info and report
// replay with --tuning.
#include <iostream>

#include "cli_common.h"
#include "commands.h"
#include "runtime/tuner.h"

namespace opfuse::cli {
namespace {

struct TuneArgs {
  std::string model;
  std::string output;
  bool force = false;
  SessionFlags session;
  InputFlags inputs;
  double budget = 300;
  int rounds = 3;
  int runs = 10;
};

Status tune(const TuneArgs& args) {
  if (args.budget <= 0 || args.rounds < 1 || args.runs < 1) {
    return Status::user_error("--budget must be > 0, --rounds and --runs >= 1");
  }
  if (!args.session.tuning.empty()) return Status::user_error("tune makes a tuning record; it does not take --tuning");
  OPFUSE_TRY(check_can_write_output(args.output, args.force));
  TuneOptions options;
  OPFUSE_ASSIGN_OR_RETURN(options.session, session_options(args.session));
  options.budget_seconds = args.budget;
  options.rounds = args.rounds;
  options.runs_per_round = args.runs;
  options.progress = &std::cerr;
  OPFUSE_ASSIGN_OR_RETURN(Graph graph, load_model(args.model, args.session.limits));
  // The inputs follow the model's signature, read from an eager session (which compiles nothing);
  // random unless --input is given.
  SessionOptions signature_only = options.session;
  signature_only.mode = ExecutionMode::kEager;
  OPFUSE_ASSIGN_OR_RETURN(Session signature, Session::create(graph.clone(), signature_only));
  OPFUSE_ASSIGN_OR_RETURN(TensorMap inputs, gather_inputs(signature, args.inputs));
  OPFUSE_ASSIGN_OR_RETURN(TuningRecord record, tune_model(graph, inputs, options));
  OPFUSE_TRY(write_output(args.output, tuning_record_to_json(record), args.force));
  std::cout << "tuning record for target " << record.target << " written to " << args.output << " ("
            << record.kernels.size() << " kernel choices, " << record.epilogues.size() << " epilogue placements, layouts "
            << (record.use_layouts ? "measured" : "estimated") << ")\n";
  return Status::ok();
}

}  // namespace

Action add_tune_command(CLI::App& app) {
  auto args = std::make_shared<TuneArgs>();
  auto* cmd = app.add_subcommand("tune", "Measure the target-dependent choices on this machine; write a tuning record");
  cmd->add_option("MODEL", args->model, "ONNX model file")->required();
  cmd->add_option("-o,--output", args->output, "the tuning record to write (JSON)")->required();
  cmd->add_flag("--force", args->force, "overwrite an existing output file");
  add_session_flags(cmd, args->session);
  add_input_flags(cmd, args->inputs, /*random_by_default=*/true);
  cmd->add_option("--budget", args->budget, "seconds of measuring at most (the rest keeps the defaults)")
      ->default_val(300);
  cmd->add_option("--rounds", args->rounds, "alternating rounds per comparison")->default_val(3);
  cmd->add_option("--runs", args->runs, "timed runs of each plan per round")->default_val(10);
  return [args] { return tune(*args); };
}

}  // namespace opfuse::cli
