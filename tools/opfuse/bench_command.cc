#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "commands.h"
#include "pipelines/pipeline.h"

namespace opfuse::cli {
namespace {

struct BenchArgs {
  std::string model;
  SessionFlags session;
  InputFlags inputs;
  int iters = 20;
  int warmup = 3;
  bool json = false;
  // Paired comparison in one process: other models (a quantized or fp16 twin) at the same
  // level, and other levels ("eager", O0-O3) of MODEL.
  std::vector<std::string> versus_models, versus_levels;
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

int64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

// One model at one level, compiled once, for the paired comparison.
struct Variant {
  std::string model, level;
  Session session;
  TensorMap inputs;
  std::vector<double> times;
};

// Runs every variant once per round, in an order reversed every other round (ABBA), so that a
// slow phase of a shared machine, which lasts seconds, falls on all of them alike; each
// variant's ratio to the first is taken round by round. Separate processes measured minutes
// apart can differ by 1.5x on such a host; paired runs in one process resolve a few percent.
Status bench_versus(const BenchArgs& args) {
  OPFUSE_ASSIGN_OR_RETURN(SessionOptions base, session_options(args.session));
  std::vector<std::pair<std::string, std::string>> wanted = {{args.model, ""}};
  for (const std::string& m : args.versus_models) wanted.emplace_back(m, "");
  for (const std::string& l : args.versus_levels) wanted.emplace_back(args.model, l);
  std::vector<Variant> variants;
  for (const auto& [model, level] : wanted) {
    SessionOptions options = base;
    if (level == "eager") {
      options.mode = ExecutionMode::kEager;
    } else if (!level.empty()) {
      Result<OptLevel> parsed = parse_opt_level(level);
      if (!parsed.is_ok()) return Status::user_error(str_cat("--versus-level '", level, "': ", parsed.status().message()));
      options.mode = ExecutionMode::kGraph;
      options.level = *parsed;
    }
    const std::string shown =
        options.mode == ExecutionMode::kEager ? std::string("eager") : std::string(opt_level_name(options.level));
    OPFUSE_ASSIGN_OR_RETURN(Session session, open_session(model, options, args.session.limits));
    Result<TensorMap> inputs = gather_inputs(session, args.inputs);
    if (!inputs.is_ok()) return Status::user_error(str_cat(model, ": ", inputs.status().message()));
    variants.push_back(Variant{model, shown, std::move(session), std::move(*inputs), {}});
  }
  const auto run_once = [](Variant& v) -> Result<double> {
    const auto start = std::chrono::steady_clock::now();
    EagerStats stats;
    Result<TensorMap> out = v.session.options().mode == ExecutionMode::kGraph ? v.session.run(v.inputs)
                                                                              : v.session.run_eager_with_stats(v.inputs, stats);
    OPFUSE_TRY(out.status());
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  for (Variant& v : variants) {
    for (int i = 0; i < args.warmup; ++i) OPFUSE_TRY(run_once(v).status());
  }
  for (int r = 0; r < args.iters; ++r) {
    for (size_t k = 0; k < variants.size(); ++k) {
      Variant& v = variants[r % 2 == 0 ? k : variants.size() - 1 - k];
      OPFUSE_ASSIGN_OR_RETURN(double ms, run_once(v));
      v.times.push_back(ms);
    }
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const Variant& v : variants) {
    std::vector<double> ratios;
    for (int r = 0; r < args.iters; ++r) ratios.push_back(v.times[r] / variants[0].times[r]);
    rows.push_back({{"model", v.model},
                    {"level", v.level},
                    {"median_ms", percentile(v.times, 0.5)},
                    {"min_ms", *std::min_element(v.times.begin(), v.times.end())},
                    {"ratio_to_first", percentile(ratios, 0.5)},
                    {"ratio_p10", percentile(ratios, 0.1)},
                    {"ratio_p90", percentile(ratios, 0.9)}});
  }
  if (args.json) {
    const nlohmann::json j = {{"threads", args.session.threads},
                              {"target", std::string(isa_tier_name(active_target().isa))},
                              {"target_detail", active_target().describe()},
                              {"core_round_trip_ns", active_target().core_round_trip_ns},
                              {"rounds", args.iters},
                              {"variants", rows}};
    std::printf("%s\n", j.dump().c_str());
    return Status::ok();
  }
  std::printf("target     %s, %s, %d threads\n", active_target().describe().c_str(),
              active_target().describe_core_distance().c_str(), args.session.threads);
  std::printf("paired     %d rounds (ABBA order, %d warm-up runs each); ratio = median of per-round ratios to the first\n",
              args.iters, args.warmup);
  for (const nlohmann::json& row : rows) {
    std::printf("  %-5s median %9.3f ms  min %9.3f ms  ratio %.3f (p10 %.3f, p90 %.3f)  %s\n",
                row["level"].get<std::string>().c_str(), row["median_ms"].get<double>(), row["min_ms"].get<double>(),
                row["ratio_to_first"].get<double>(), row["ratio_p10"].get<double>(), row["ratio_p90"].get<double>(),
                row["model"].get<std::string>().c_str());
  }
  return Status::ok();
}

Status bench(const BenchArgs& args) {
  if (args.iters < 1 || args.warmup < 0) return Status::user_error("--iters must be >= 1 and --warmup >= 0");
  if (!args.versus_models.empty() || !args.versus_levels.empty()) return bench_versus(args);
  const auto compile_start = std::chrono::steady_clock::now();
  OPFUSE_ASSIGN_OR_RETURN(Session session, open_session(args.model, args.session));
  OPFUSE_ASSIGN_OR_RETURN(TensorMap inputs, gather_inputs(session, args.inputs));
  const bool graph_mode = session.options().mode == ExecutionMode::kGraph;
  int64_t arena_bytes = 0, intermediate_bytes = 0;
  size_t kernels = 0;
  if (graph_mode) {
    OPFUSE_ASSIGN_OR_RETURN(auto plan, session.plan_for(inputs));
    arena_bytes = plan->arena_bytes();
    intermediate_bytes = plan->intermediate_bytes();
    kernels = plan->kernels_per_run();
  }
  const double compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - compile_start).count();

  std::vector<double> times;
  for (int i = 0; i < args.warmup + args.iters; ++i) {
    EagerStats stats;
    const auto start = std::chrono::steady_clock::now();
    Result<TensorMap> out = graph_mode ? session.run(inputs) : session.run_eager_with_stats(inputs, stats);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    OPFUSE_TRY(out.status());
    if (!graph_mode) {
      // Eager allocates every intermediate afresh; its "arena" is its peak of live tensors.
      kernels = stats.kernels;
      intermediate_bytes = stats.allocated_bytes;
      arena_bytes = stats.peak_live_bytes;
    }
    if (i >= args.warmup) times.push_back(ms);
  }
  const double median = percentile(times, 0.5);
  nlohmann::json j = {
      {"model", args.model},
      {"mode", execution_mode_name(session.options().mode)},
      {"level", graph_mode ? std::string(opt_level_name(session.options().level)) : std::string("-")},
      {"threads", args.session.threads},
      {"target", std::string(isa_tier_name(active_target().isa))},
      {"target_detail", active_target().describe()},
      {"core_round_trip_ns", active_target().core_round_trip_ns},
      {"iters", args.iters},
      {"median_ms", median},
      {"min_ms", *std::min_element(times.begin(), times.end())},
      {"p90_ms", percentile(times, 0.9)},
      {"throughput_per_s", 1000.0 / median},
      {"arena_bytes", arena_bytes},
      {"intermediate_bytes", intermediate_bytes},
      {"peak_rss_bytes", peak_rss_bytes()},
      {"kernels", kernels},
      {"compile_ms", compile_ms},
  };
  if (args.json) {
    std::printf("%s\n", j.dump().c_str());
    return Status::ok();
  }
  std::printf("model      %s\n", args.model.c_str());
  std::printf("mode       %s%s%s, %d threads\n", j["mode"].get<std::string>().c_str(),
              graph_mode ? " " : "", graph_mode ? j["level"].get<std::string>().c_str() : "",
              args.session.threads);
  std::printf("target     %s, %s\n", active_target().describe().c_str(),
              active_target().describe_core_distance().c_str());
  std::printf("latency    median %.3f ms, min %.3f ms, p90 %.3f ms over %d runs (%d warm-up)\n",
              median, j["min_ms"].get<double>(), j["p90_ms"].get<double>(), args.iters, args.warmup);
  std::printf("throughput %.1f inferences/s\n", 1000.0 / median);
  std::printf("kernels    %zu per run\n", kernels);
  std::printf("memory     %s %.2f MB; all intermediates %.2f MB; peak RSS %.1f MB\n",
              graph_mode ? "arena" : "peak live", static_cast<double>(arena_bytes) / 1e6,
              static_cast<double>(intermediate_bytes) / 1e6, static_cast<double>(peak_rss_bytes()) / 1e6);
  if (graph_mode) std::printf("compile    %.1f ms (load + passes + kernels + memory plan)\n", compile_ms);
  return Status::ok();
}

}  // namespace

Action add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Time a model: median/min/p90 latency, throughput, memory, kernels per run");
  auto args = std::make_shared<BenchArgs>();
  cmd->add_option("MODEL", args->model, "ONNX model file")->required();
  add_session_flags(cmd, args->session);
  add_input_flags(cmd, args->inputs, /*random_by_default=*/true);
  cmd->add_option("--iters", args->iters, "timed runs")->default_val(20);
  cmd->add_option("--warmup", args->warmup, "untimed runs first")->default_val(3);
  cmd->add_flag("--json", args->json, "print one JSON object (median_ms, min_ms, p90_ms, arena_bytes, peak_rss_bytes, kernels, ...)");
  cmd->add_option("--versus", args->versus_models,
                  "also time this model (a quantized or fp16 twin), alternating run by run in this process; "
                  "--iters is then the number of rounds, and each variant's ratio to MODEL is the median of per-round ratios")
      ->check(CLI::ExistingFile);
  cmd->add_option("--versus-level", args->versus_levels,
                  "also time MODEL at this level (eager, O0-O3), alternating run by run as with --versus");
  return [args] { return bench(*args); };
}

}  // namespace opfuse::cli
