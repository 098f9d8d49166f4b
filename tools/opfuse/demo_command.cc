#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "commands.h"
#include "core/random.h"
#include "frontend/builder/demo_model.h"
#include "report/model_summary.h"
#include "runtime/compare.h"
#include "runtime/session.h"

namespace opfuse::cli {
namespace {

struct DemoArgs {
  int64_t image_size = 224;
  int runs = 5;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Measured {
  std::string config;
  double median_ms = 0;
  size_t kernels = 0;
  int64_t memory_bytes = 0;  // graph: arena; eager: peak of live intermediates
  int64_t all_intermediates = 0;
  TensorMap outputs;
};

Result<Measured> measure(const Graph& model, SessionOptions options, const Tensor& image, int runs) {
  Measured m;
  m.config = options.mode == ExecutionMode::kEager ? "eager"
                                                   : str_cat("graph ", opt_level_name(options.level));
  OPFUSE_ASSIGN_OR_RETURN(Session session, Session::create(model.clone(), options));
  const TensorMap inputs = {{"image", image}};
  if (options.mode == ExecutionMode::kGraph) {
    OPFUSE_ASSIGN_OR_RETURN(auto plan, session.plan_for(inputs));
    m.kernels = plan->kernels_per_run();
    m.memory_bytes = plan->arena_bytes();
    m.all_intermediates = plan->intermediate_bytes();
  }
  std::vector<double> times;
  for (int i = 0; i < runs + 1; ++i) {  // one warm-up run
    EagerStats stats;
    const auto start = std::chrono::steady_clock::now();
    Result<TensorMap> out = options.mode == ExecutionMode::kEager
                                ? session.run_eager_with_stats(inputs, stats)
                                : session.run(inputs);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    OPFUSE_TRY(out.status());
    if (options.mode == ExecutionMode::kEager) {
      m.kernels = stats.kernels;
      m.memory_bytes = stats.peak_live_bytes;
      m.all_intermediates = stats.allocated_bytes;
    }
    if (i > 0) times.push_back(ms);
    if (i == 0) {
      m.outputs = std::move(*out);
    } else if (std::memcmp(out->begin()->second.raw_data(), m.outputs.begin()->second.raw_data(),
                           m.outputs.begin()->second.nbytes()) != 0) {
      return Status::internal_error(m.config + " gave different results for the same input");
    }
  }
  m.median_ms = median(times);
  return m;
}

Status demo(const DemoArgs& args) {
  if (args.image_size < 8 || args.image_size > 1024) {
    return Status::user_error(str_cat("--size must be between 8 and 1024, got ", args.image_size));
  }
  if (args.runs < 1) return Status::user_error("--runs must be at least 1");
  std::printf("opfuse demo: a small CNN built in code (fixed-seed random weights, no files)\n\n");
  OPFUSE_ASSIGN_OR_RETURN(Graph graph, build_demo_cnn(args.image_size, /*seed=*/42));
  const ModelSummary summary = summarize(graph);
  std::cout << format_summary(graph, summary) << "\n";

  Tensor image = Tensor::zeros(DType::kF32, {1, 3, args.image_size, args.image_size}).value();
  Random rng(7);
  fill_uniform(image, rng, -1.0, 1.0);

  std::vector<Measured> results;
  SessionOptions eager;
  eager.mode = ExecutionMode::kEager;
  OPFUSE_ASSIGN_OR_RETURN(Measured reference, measure(graph, eager, image, args.runs));
  results.push_back(std::move(reference));
  for (OptLevel level : {OptLevel::kO0, OptLevel::kO1, OptLevel::kO2}) {
    SessionOptions options;
    options.mode = ExecutionMode::kGraph;
    options.level = level;
    OPFUSE_ASSIGN_OR_RETURN(Measured m, measure(graph, options, image, args.runs));
    results.push_back(std::move(m));
  }

  std::printf("%-10s %10s %9s %8s %12s %18s %14s\n", "config", "median ms", "vs eager", "kernels",
              "memory MB", "all intermed. MB", "max rel diff");
  const Tensor& want = results[0].outputs.begin()->second;
  double worst = 0;
  for (const Measured& m : results) {
    const double diff = max_relative_difference(m.outputs.begin()->second, want);
    worst = std::max(worst, diff);
    std::printf("%-10s %10.2f %8.2fx %8zu %12.3f %18.3f %14.2e\n", m.config.c_str(), m.median_ms,
                results[0].median_ms / m.median_ms, m.kernels, static_cast<double>(m.memory_bytes) / 1e6,
                static_cast<double>(m.all_intermediates) / 1e6, diff);
  }
  std::printf("(median of %d runs each after one warm-up; eager's memory is its peak of live "
              "intermediates, graph mode's is its planned arena)\n\n", args.runs);

  const Tensor& probs = want;
  double total = 0;
  int64_t best = 0;
  for (int64_t i = 0; i < probs.numel(); ++i) {
    total += probs.get_double(i);
    if (probs.get_double(i) > probs.get_double(best)) best = i;
  }
  std::printf("output %s %s: class %lld has p=%.4f; probabilities sum to %.6f\n",
              results[0].outputs.begin()->first.c_str(), probs.type_string().c_str(),
              static_cast<long long>(best), probs.get_double(best), total);
  std::printf("repeated runs are bit-identical: yes\n");
  std::printf("graph mode matches eager: %s (worst max rel diff %.2e, tolerance 1e-4)\n",
              worst <= 1e-4 ? "yes" : "NO", worst);
  if (std::abs(total - 1.0) > 1e-4) {
    return Status::internal_error(str_cat("softmax output sums to ", total, ", not 1"));
  }
  if (worst > 1e-4) return Status::internal_error("graph mode differs from eager beyond 1e-4");
  return Status::ok();
}

}  // namespace

Action add_demo_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("demo", "Build a small CNN in code and run it, printing what "
                                         "opfuse did (no files or network needed)");
  auto args = std::make_shared<DemoArgs>();
  cmd->add_option("--size", args->image_size, "input image size")->default_val(224);
  cmd->add_option("--runs", args->runs, "timed runs")->default_val(5);
  return [args] { return demo(*args); };
}

}  // namespace opfuse::cli
