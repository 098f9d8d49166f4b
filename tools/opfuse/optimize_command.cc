// `opfuse optimize MODEL -o OUT.onnx --level L [--standard-only]`: the optimised graph as ONNX
// (frontend/onnx/exporter.h). Fused ops are written in the "opfuse" domain (docs/opfuse-domain.md),
// which opfuse loads back; --standard-only keeps only folds and fusions into standard ops so
// other runtimes can load the file. Inputs get static shapes (symbolic dims from --dim, else 1),
// as graph mode compiles per shape.
#include <cstdio>
#include <map>

#include "cli_common.h"
#include "commands.h"
#include "frontend/onnx/exporter.h"
#include "frontend/onnx/importer.h"
#include "pipelines/pipeline.h"

namespace opfuse::cli {
namespace {

struct OptimizeArgs {
  std::string model;
  SessionFlags session;
  std::vector<std::string> dims;
  std::vector<std::string> binds;
  std::string output;
  bool standard_only = false;
  bool force = false;
};

Status optimize(const OptimizeArgs& args) {
  OPFUSE_TRY(check_can_write_output(args.output, args.force));
  OPFUSE_ASSIGN_OR_RETURN(SessionOptions options, session_options(args.session));
  OPFUSE_ASSIGN_OR_RETURN(auto symbols, parse_dims(args.dims));
  OPFUSE_ASSIGN_OR_RETURN(Graph graph, load_model(args.model, args.session.limits));
  OPFUSE_ASSIGN_OR_RETURN(TensorMap values, parse_binds(graph, args.binds));
  std::vector<std::string> disabled;
  FusionAnalysis analysis;
  if (args.standard_only) {
    OPFUSE_ASSIGN_OR_RETURN(analysis, analyze_fusion_standard_only(graph, options.level, options.pipeline, symbols, disabled, values));
  } else {
    OPFUSE_ASSIGN_OR_RETURN(analysis, analyze_fusion(graph, options.level, options.pipeline, symbols, values));
  }
  OnnxExportOptions export_options;
  export_options.standard_only = args.standard_only;
  export_options.target = std::string(isa_tier_name(active_target().isa));
  OPFUSE_ASSIGN_OR_RETURN(std::string bytes, export_onnx(analysis.after, export_options));
  OPFUSE_TRY(write_output(args.output, bytes, args.force));
  std::map<std::string, int> domains;
  for (const Node* n : analysis.after.nodes()) ++domains[n->domain().empty() ? "ai.onnx" : n->domain()];
  std::string counts;
  for (const auto& [d, c] : domains) counts += str_cat(counts.empty() ? "" : ", ", c, " ", d);
  std::printf("optimized %s at %s: %zu nodes -> %zu (%s)\n", args.model.c_str(), opt_level_name(options.level).data(),
              analysis.before.num_nodes(), analysis.after.num_nodes(), counts.empty() ? "none" : counts.c_str());
  if (!disabled.empty()) {
    std::string rules;
    for (const std::string& r : disabled) rules += (rules.empty() ? "" : ", ") + r;
    std::printf("--standard-only: rules producing opfuse ops left out: %s\n", rules.c_str());
  }
  std::printf("wrote %s (%.2f MB)\n", args.output.c_str(), static_cast<double>(bytes.size()) / 1e6);
  return Status::ok();
}

}  // namespace

Action add_optimize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("optimize", "Write the optimised graph of a level as ONNX (fused ops in the "
                                             "'opfuse' domain, or --standard-only)");
  auto args = std::make_shared<OptimizeArgs>();
  cmd->add_option("MODEL", args->model, "ONNX model file")->required();
  add_session_flags(cmd, args->session, "O2");
  cmd->add_option("--dim", args->dims, "SYMBOL=N: size of a symbolic dim (default 1)");
  add_bind_flag(cmd, args->binds);
  cmd->add_option("-o,--output", args->output, "the ONNX file to write")->required();
  cmd->add_flag("--standard-only", args->standard_only, "emit only standard ONNX ops (folds, standard fusions)");
  cmd->add_flag("--force", args->force, "overwrite the output file");
  return [args] { return optimize(*args); };
}

}  // namespace opfuse::cli
