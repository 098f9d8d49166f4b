#include <algorithm>
#include <ostream>

#include "ir/text_format.h"
#include "ir/verifier.h"
#include "passes/extra_passes.h"
#include "passes/fusion_rules.h"
#include "passes/tuning_record.h"
#include "passes/pass.h"
#include "pipelines/pipeline.h"

namespace opfuse {

const PassDef* find_pass(std::string_view name) {
  for (const PassDef& p : all_passes()) {
    if (p.name == name) return &p;
  }
  return find_extra_pass(name);
}

std::string_view opt_level_name(OptLevel level) {
  switch (level) {
    case OptLevel::kO0: return "O0";
    case OptLevel::kO1: return "O1";
    case OptLevel::kO2: return "O2";
    case OptLevel::kO3: return "O3";
  }
  return "?";
}

Result<OptLevel> parse_opt_level(std::string_view name) {
  for (OptLevel l : {OptLevel::kO0, OptLevel::kO1, OptLevel::kO2, OptLevel::kO3}) {
    if (opt_level_name(l) == name) return l;
  }
  return Status::user_error(str_cat("unknown optimisation level '", name, "' (valid: O0, O1, O2, O3)"));
}

Result<OptLevel> choose_opt_level(const std::optional<std::string>& given, const std::optional<std::string>& from_config,
                                  std::string_view config_source, OptLevel fallback) {
  if (given) return parse_opt_level(*given);
  if (!from_config) return fallback;
  auto level = parse_opt_level(*from_config);
  if (!level.is_ok()) return Status::user_error(str_cat(config_source, ": ", level.status().message()));
  return level;
}

namespace {

std::string valid_pass_names() {
  std::string names;
  for (const PassDef& p : all_passes()) names += (names.empty() ? "" : ", ") + std::string(p.name);
  for (const PassDef& p : extra_passes()) names += ", " + std::string(p.name);
  return names;
}

Result<bool> run_one(const PassDef& pass, Graph& graph, const PipelineOptions& options,
                     PassContext& context) {
  OPFUSE_ASSIGN_OR_RETURN(bool changed, pass.run(graph, context));
  if (options.verify_after_each) {
    Status s = verify_graph(graph);
    if (!s.is_ok()) {
      return Status::internal_error(str_cat("pass ", pass.name, " left an invalid graph: ", s.message()));
    }
  }
  if (options.print_after_all && changed) {
    *options.print_after_all << "// ----- after " << pass.name << " -----\n"
                             << print_graph(graph) << "\n";
  }
  return changed;
}

}  // namespace

Status run_pipeline(Graph& graph, OptLevel level, const PipelineOptions& options,
                    PassContext& context) {
  // Unknown rule names or op types would silently switch nothing: an error listing the valid ones.
  OPFUSE_TRY(validate_fusion_config(options.fusion));
  context.fusion = options.fusion;
  context.layout_timer = options.layout_timer.get();
  // A tuning record's measured region threshold replaces the configured one.
  if (const auto& tuning = context.fusion.tuning; tuning && tuning->region_threshold) {
    context.fusion.region_min_traffic_saving = *tuning->region_threshold;
  }
  std::vector<PipelineStage> stages;
  if (options.passes) {
    for (const std::string& name : *options.passes) {
      if (!find_pass(name)) {
        return Status::user_error(str_cat("unknown pass '", name, "' (valid: ", valid_pass_names(), ")"));
      }
    }
    PipelineStage custom{{}, false, "--passes"};
    for (const std::string& name : *options.passes) custom.passes.push_back(find_pass(name)->name);
    stages.push_back(std::move(custom));
  } else {
    stages = pipeline_for(level);
    // Passes registered at run time (extra_passes.h) fuse too, ahead of the built-in fusion
    // stages: a user's rule sees the canonical graph before the generic fusers take its ops.
    if (level >= OptLevel::kO2 && !extra_passes().empty()) {
      PipelineStage extra{{}, false, "passes registered at run time"};
      for (const PassDef& p : extra_passes()) extra.passes.push_back(p.name);
      extra.passes.push_back("dce");
      auto first_fusion = std::find_if(stages.begin(), stages.end(), [](const PipelineStage& s) {
        return std::find(s.passes.begin(), s.passes.end(), "fuse_patterns") != s.passes.end();
      });
      stages.insert(first_fusion, std::move(extra));
    }
  }
  for (const PipelineStage& stage : stages) {
    for (int iteration = 0; iteration < std::max(1, options.max_iterations); ++iteration) {
      bool changed = false;
      for (std::string_view name : stage.passes) {
        const PassDef* pass = find_pass(name);
        if (pass == nullptr) return Status::internal_error(str_cat("pipeline names unknown pass ", name));
        OPFUSE_ASSIGN_OR_RETURN(bool c, run_one(*pass, graph, options, context));
        changed = changed || c;
      }
      if (!stage.to_fixpoint || !changed) break;
    }
  }
  return Status::ok();
}

}  // namespace opfuse
