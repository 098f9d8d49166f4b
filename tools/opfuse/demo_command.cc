// `opfuse demo`: builds a ResNet-50 and a DeepLabV3-style segmentation net in code (fixed-seed
// random weights; no files, no network) and shows what opfuse does to them: eager vs graph
// O1/O2/O3 latency, kernels and memory before/after, what was fused or refused, whether every
// level still matches eager, and the graph before/after as pictures.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "commands.h"
#include "core/file_io.h"
#include "core/random.h"
#include "frontend/builder/models.h"
#include "pipelines/pipeline.h"
#include "report/fusion_analysis.h"
#include "report/fusion_report.h"
#include "report/graph_render.h"
#include "report/model_summary.h"
#include "runtime/compare.h"
#include "runtime/session.h"

namespace opfuse::cli {
namespace {

constexpr double kTolerance = 1e-4;

struct DemoArgs {
  int64_t resnet_size = 224;
  int64_t seg_size = 256;
  int runs = 3;
  bool quick = false;
  std::string out_dir = "opfuse-demo";
  bool force = false;
  std::vector<std::string> models = {"deeplabv3", "resnet50"};
};

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string mb(int64_t bytes) { return str_cat(std::round(static_cast<double>(bytes) / 1e4) / 100.0); }

struct Measured {
  std::string config;
  double median_ms = 0;
  double compile_ms = 0;
  size_t kernels = 0;
  int64_t memory_bytes = 0;  // eager: peak of live intermediates; graph: the planned arena
  double max_diff = 0;
  TensorMap outputs;
  std::shared_ptr<const CompiledPlan> plan;
};

Result<Measured> run_eager_once(const Graph& model, const TensorMap& inputs) {
  Measured m;
  m.config = "eager";
  SessionOptions options;
  options.mode = ExecutionMode::kEager;
  OPFUSE_ASSIGN_OR_RETURN(Session session, Session::create(model.clone(), options));
  EagerStats stats;
  const auto start = Clock::now();
  OPFUSE_ASSIGN_OR_RETURN(m.outputs, session.run_eager_with_stats(inputs, stats));
  m.median_ms = ms_since(start);
  m.kernels = stats.kernels;
  m.memory_bytes = stats.peak_live_bytes;
  return m;
}

Result<Measured> run_graph(const Graph& model, OptLevel level, const TensorMap& inputs, int runs) {
  Measured m;
  m.config = str_cat("graph ", opt_level_name(level));
  SessionOptions options;
  options.level = level;
  // A model with static input shapes is compiled when its session is created.
  auto start = Clock::now();
  OPFUSE_ASSIGN_OR_RETURN(Session session, Session::create(model.clone(), options));
  OPFUSE_ASSIGN_OR_RETURN(m.plan, session.plan_for(inputs));
  m.compile_ms = ms_since(start);
  m.kernels = m.plan->kernels_per_run();
  m.memory_bytes = m.plan->arena_bytes();
  std::vector<double> times;
  for (int i = 0; i <= runs; ++i) {  // run 0 warms up (and is the output we compare)
    start = Clock::now();
    OPFUSE_ASSIGN_OR_RETURN(TensorMap out, session.run(inputs));
    if (i > 0) times.push_back(ms_since(start));
    if (i == 0) m.outputs = std::move(out);
  }
  m.median_ms = median(times);
  return m;
}

// Applied and refused decisions per pass or rule, and the most common refusal reasons.
std::string fusion_summary(const std::vector<PassDecision>& decisions) {
  struct Counts { int applied = 0, refused = 0; };
  std::map<std::string, Counts> by_rule;
  std::map<std::string, int> reasons;
  int64_t bytes_saved = 0;
  for (const PassDecision& d : decisions) {
    Counts& c = by_rule[d.rule.empty() ? d.pass : d.rule];
    if (d.applied) {
      ++c.applied;
      bytes_saved += d.bytes_saved;
    } else {
      ++c.refused;
      ++reasons[str_cat(d.rule.empty() ? d.pass : d.rule, ": ", d.reason)];
    }
  }
  std::ostringstream out;
  for (const auto& [rule, c] : by_rule) {
    out << str_cat("     ", rule, ": ", c.applied, " applied, ", c.refused, " refused\n");
  }
  std::vector<std::pair<int, std::string>> top;
  for (const auto& [r, n] : reasons) top.emplace_back(n, r);
  std::sort(top.rbegin(), top.rend());
  for (size_t i = 0; i < top.size() && i < 3; ++i) out << str_cat("     refused x", top[i].first, " (", top[i].second, ")\n");
  if (bytes_saved > 0) out << str_cat("     estimated memory traffic saved per run: ", mb(bytes_saved), " MB\n");
  if (by_rule.empty()) out << "     (no rewrites recorded)\n";
  return out.str();
}

struct DemoModel {
  std::string key;    // file names
  std::string title;  // what the user reads
  Result<Graph> (*build)(int64_t size);
  int64_t size;
};

Result<Graph> build_resnet50(int64_t size) { return build_resnet({.image_size = size}); }
Result<Graph> build_deeplab(int64_t size) { return build_deeplabv3({.image_size = size}); }

Status demo_one(const DemoModel& model, const DemoArgs& args, bool* all_match) {
  const auto build_start = Clock::now();
  OPFUSE_ASSIGN_OR_RETURN(Graph graph, model.build(model.size));
  const double build_ms = ms_since(build_start);
  const ModelSummary summary = summarize(graph);
  const Value* in = graph.inputs()[0];
  const Value* out = graph.outputs()[0];
  std::printf("== %s: %s %s -> %s %s\n   %zu nodes, %s parameters, %sFLOPs; built in code in %.0f ms\n\n",
              model.title.c_str(), in->name().c_str(), in->type_string().c_str(), out->name().c_str(),
              out->type_string().c_str(), summary.num_nodes, human_count(static_cast<double>(summary.parameters)).c_str(),
              human_count(static_cast<double>(summary.flops)).c_str(), build_ms);

  Tensor image = Tensor::zeros(DType::kF32, *static_dims(*in->shape)).value();
  Random rng(7);
  fill_uniform(image, rng, -1.0, 1.0);
  const TensorMap inputs = {{in->name(), image}};

  std::vector<Measured> results;
  OPFUSE_ASSIGN_OR_RETURN(Measured eager, run_eager_once(graph, inputs));
  results.push_back(std::move(eager));
  for (OptLevel level : {OptLevel::kO1, OptLevel::kO2, OptLevel::kO3}) {
    OPFUSE_ASSIGN_OR_RETURN(Measured m, run_graph(graph, level, inputs, args.runs));
    results.push_back(std::move(m));
  }
  const Tensor& want = results[0].outputs.at(out->name());
  std::printf("   %-9s %11s %9s %8s %10s %11s %13s\n", "config", "latency ms", "vs eager", "kernels",
              "memory MB", "compile ms", "max rel diff");
  double worst = 0;
  for (Measured& m : results) {
    m.max_diff = max_relative_difference(m.outputs.at(out->name()), want);
    worst = std::max(worst, m.max_diff);
    const bool is_eager = m.plan == nullptr;
    char diff[32];
    std::snprintf(diff, sizeof diff, "%.2e", m.max_diff);
    const std::string compile = is_eager ? "-" : str_cat(static_cast<int64_t>(m.compile_ms));
    std::printf("   %-9s %11.2f %8.1fx %8zu %10s %11s %13s\n", m.config.c_str(), m.median_ms,
                results[0].median_ms / m.median_ms, m.kernels, mb(m.memory_bytes).c_str(),
                compile.c_str(), is_eager ? "(reference)" : diff);
  }
  std::printf("   (eager: one run, its memory is the peak of live intermediates; graph: median of %d "
              "runs after a warm-up, its memory is the planned arena)\n\n", args.runs);

  const Measured& best = results.back();
  std::printf("   fusion report (%s):\n%s", best.config.c_str(), fusion_summary(best.plan->pass_decisions()).c_str());
  std::printf("   kernels: %zu nodes run eagerly -> %zu kernels at %s (%.1fx fewer); memory %s MB -> %s MB\n",
              results[0].kernels, best.kernels, best.config.c_str(),
              static_cast<double>(results[0].kernels) / static_cast<double>(std::max<size_t>(best.kernels, 1)),
              mb(results[0].memory_bytes).c_str(), mb(best.memory_bytes).c_str());
  const bool match = worst <= kTolerance;
  *all_match = *all_match && match;
  std::printf("   validation: every level %s eager (worst max rel diff %.2e, tolerance %.0e)\n",
              match ? "matches" : "DOES NOT match", worst, kTolerance);

  // The pictures come from the same analysis `opfuse viz` renders: the graph before fusion and
  // at the best level side by side (SVG), and one HTML page with both and the full report.
  OPFUSE_ASSIGN_OR_RETURN(FusionAnalysis analysis, analyze_fusion(graph, OptLevel::kO3, PipelineOptions{}));
  const FusionReport report = make_fusion_report(analysis);
  const RenderedViews views = prepare_views(analysis, report);
  const std::filesystem::path dir(args.out_dir);
  const std::string svg_path = (dir / (model.key + ".svg")).string();
  const std::string html_path = (dir / (model.key + ".html")).string();
  const std::vector<std::string> pages = side_by_side_pages(views);
  OPFUSE_ASSIGN_OR_RETURN(std::string svg, run_graphviz(pages.at(0), "svg"));
  OPFUSE_ASSIGN_OR_RETURN(std::string html, render_html(views, report, model.title));
  OPFUSE_TRY(write_file_atomically(svg_path, svg, args.force));
  OPFUSE_TRY(write_file_atomically(html_path, html, args.force));
  const std::string page_note = pages.size() > 1 ? str_cat(", page 1 of ", pages.size()) : "";
  std::printf("   pictures: %s (before and after side by side%s), %s (both graphs and the full report)\n\n",
              svg_path.c_str(), page_note.c_str(), html_path.c_str());
  return Status::ok();
}

Status demo(DemoArgs args) {
  if (args.quick) {
    args.resnet_size = 64;
    args.seg_size = 64;
    args.runs = 1;
  }
  for (int64_t size : {args.resnet_size, args.seg_size}) {
    if (size < 32 || size > 1024) {
      return Status::user_error(str_cat("--resnet-size and --seg-size must be between 32 and 1024, got ", size));
    }
  }
  if (args.runs < 1) return Status::user_error("--runs must be at least 1");
  std::vector<DemoModel> models;
  for (const std::string& name : args.models) {
    if (name == "resnet50") {
      models.push_back({"resnet50", "ResNet-50", build_resnet50, args.resnet_size});
    } else if (name == "deeplabv3") {
      models.push_back({"deeplabv3", "DeepLabV3 (MobileNetV2 backbone, dilated, ASPP)", build_deeplab, args.seg_size});
    } else {
      return Status::user_error(str_cat("--models: unknown model '", name, "' (resnet50, deeplabv3)"));
    }
  }
  // Refuse to clobber before spending a minute computing.
  std::error_code ec;
  std::filesystem::create_directories(args.out_dir, ec);
  if (ec) return Status::user_error(str_cat("cannot create output directory '", args.out_dir, "': ", ec.message()));
  for (const DemoModel& m : models) {
    for (const char* suffix : {".svg", ".html"}) {
      OPFUSE_TRY(check_can_write((std::filesystem::path(args.out_dir) / (m.key + suffix)).string(), args.force));
    }
  }
  std::printf("opfuse demo: models built in code with fixed-seed random weights (no files, no network)\n\n");
  const auto start = Clock::now();
  bool all_match = true;
  for (const DemoModel& m : models) OPFUSE_TRY(demo_one(m, args, &all_match));
  std::printf("demo finished in %.1f s; graph mode %s eager on every model and level\n",
              ms_since(start) / 1000.0, all_match ? "matches" : "DOES NOT match");
  if (!all_match) return Status::internal_error("graph mode differs from eager beyond tolerance");
  return Status::ok();
}

}  // namespace

Action add_demo_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("demo", "Build ResNet-50 and a DeepLabV3-style net in code and show what "
                                         "opfuse does to them (no files or network needed)");
  auto args = std::make_shared<DemoArgs>();
  cmd->add_option("--resnet-size", args->resnet_size, "ResNet-50 input image size")->default_val(224);
  cmd->add_option("--seg-size", args->seg_size, "DeepLabV3 input image size")->default_val(256);
  cmd->add_option("--runs", args->runs, "timed graph-mode runs per level (eager runs once)")->default_val(3);
  cmd->add_flag("--quick", args->quick, "small inputs and one timed run (a smoke test, a few seconds)");
  cmd->add_option("--models", args->models, "which models: resnet50, deeplabv3")->delimiter(',');
  cmd->add_option("--out", args->out_dir, "directory for the pictures")->default_val("opfuse-demo");
  cmd->add_flag("--force", args->force, "overwrite existing pictures");
  return [args] { return demo(*args); };
}

}  // namespace opfuse::cli
