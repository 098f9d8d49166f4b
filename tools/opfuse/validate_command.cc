// `opfuse validate MODEL --level L [--input ...] [--rtol --atol] [--bisect]`: eager (the oracle)
// vs the level on the same inputs; exit 1 when an output is outside tolerance. Without --rtol the
// tolerance follows the model's own sensitivity to rounding (report/validation.h), so a model
// that amplifies float rounding is not failed for an equally valid order of operations. With --bisect, a
// failing level is narrowed to the fusion rule, then the fused kernel, that breaks it.
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>

#include "cli_common.h"
#include "commands.h"
#include "frontend/onnx/importer.h"
#include "pipelines/pipeline.h"
#include "report/validation.h"

namespace opfuse::cli {
namespace {

struct ValidateArgs {
  std::string model;
  SessionFlags session;
  InputFlags inputs;
  std::optional<double> rtol;  // unset: from eager mode's rounding sensitivity
  double atol = 1e-6;
  bool bisect = false;
};

Status validate(const ValidateArgs& args) {
  if (args.session.mode != "graph") return Status::user_error("validate compares graph mode with eager; --mode must be graph");
  if ((args.rtol && !(*args.rtol >= 0)) || !(args.atol >= 0)) {
    return Status::user_error("--rtol and --atol must be 0 or more");
  }
  OPFUSE_ASSIGN_OR_RETURN(SessionOptions options, session_options(args.session));
  OPFUSE_ASSIGN_OR_RETURN(Graph graph, load_model(args.model, args.session.limits));
  SessionOptions eager_options = options;
  eager_options.mode = ExecutionMode::kEager;
  OPFUSE_ASSIGN_OR_RETURN(Session eager, Session::create(graph.clone(), eager_options));
  OPFUSE_ASSIGN_OR_RETURN(TensorMap inputs, gather_inputs(eager, args.inputs));
  OPFUSE_ASSIGN_OR_RETURN(TensorMap reference, eager.run(inputs));
  Tolerance tol{args.rtol.value_or(0), args.atol};
  if (!args.rtol) {
    OPFUSE_ASSIGN_OR_RETURN(const double sensitivity, rounding_sensitivity(eager, inputs, reference));
    tol.rtol = tolerance_for_sensitivity(sensitivity).rtol;
    std::printf("eager's rounding sensitivity: one ulp of its inputs and weights moves its outputs by %.3g; rtol %g (max(1e-4, 10x); "
                "--rtol sets it)\n", sensitivity, tol.rtol);
  }
  OPFUSE_ASSIGN_OR_RETURN(ValidationResult result, validate_against(graph, options, inputs, reference, tol));
  const std::string level(opt_level_name(options.level));
  std::printf("eager vs %s (rtol %g, atol %g)\n", level.c_str(), tol.rtol, tol.atol);
  std::printf("  %-32s %12s %12s\n", "output", "max abs", "max rel");
  for (const OutputDiff& d : result.outputs) {
    std::printf("  %-32s %12.3g %12.3g  %s\n", d.name.c_str(), d.max_abs, d.max_rel, d.ok ? "ok" : "FAIL");
  }
  if (result.ok) {
    std::printf("%s agrees with eager\n", level.c_str());
    return Status::ok();
  }
  if (args.bisect) {
    std::printf("bisecting:\n");
    std::ostringstream log;
    OPFUSE_ASSIGN_OR_RETURN(BisectResult b, bisect_fusion(graph, options, inputs, tol, &log));
    std::printf("%s", log.str().c_str());
    std::printf("culprit: %s (%d compilations)\n", b.summary.c_str(), b.compilations);
  }
  return Status::user_error(str_cat(level, " differs from eager beyond tolerance",
                                    args.bisect ? "" : " (--bisect finds the fusion responsible)"));
}

}  // namespace

Action add_validate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("validate", "Compare a level with eager mode on the same inputs; exit 1 "
                                             "beyond tolerance; --bisect names the fusion at fault");
  auto args = std::make_shared<ValidateArgs>();
  cmd->add_option("MODEL", args->model, "ONNX model file")->required();
  add_session_flags(cmd, args->session);
  add_input_flags(cmd, args->inputs, /*random_by_default=*/true);
  cmd->add_option("--rtol", args->rtol,
                  "tolerance relative to the largest reference value (default: max(1e-4, 10x eager's own change when "
                  "every float input moves by one ulp))");
  cmd->add_option("--atol", args->atol, "absolute tolerance")->default_val(1e-6);
  cmd->add_flag("--bisect", args->bisect, "when the level fails, find the rule and fused kernel responsible");
  return [args] { return validate(*args); };
}

}  // namespace opfuse::cli
