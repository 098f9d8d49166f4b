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

Status demo(const DemoArgs& args) {
  if (args.image_size < 8 || args.image_size > 1024) {
    return Status::user_error(str_cat("--size must be between 8 and 1024, got ", args.image_size));
  }
  if (args.runs < 1) return Status::user_error("--runs must be at least 1");
  std::printf("opfuse demo: a small CNN built in code (fixed-seed random weights, no files)\n\n");
  OPFUSE_ASSIGN_OR_RETURN(Graph graph, build_demo_cnn(args.image_size, /*seed=*/42));
  const ModelSummary summary = summarize(graph);
  std::cout << format_summary(graph, summary) << "\n";

  OPFUSE_ASSIGN_OR_RETURN(Session session, Session::create(std::move(graph)));
  Tensor image = Tensor::zeros(DType::kF32, {1, 3, args.image_size, args.image_size}).value();
  Random rng(7);
  fill_uniform(image, rng, -1.0, 1.0);

  std::vector<double> times;
  TensorMap first;
  for (int i = 0; i < args.runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    OPFUSE_ASSIGN_OR_RETURN(TensorMap out, session.run({{"image", image}}));
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    if (i == 0) {
      first = std::move(out);
    } else if (std::memcmp(out.begin()->second.raw_data(), first.begin()->second.raw_data(),
                           first.begin()->second.nbytes()) != 0) {
      return Status::internal_error("eager mode gave different results for the same input");
    }
  }
  const Tensor& probs = first.begin()->second;
  const double ms = median(times);
  std::printf("eager mode (reference kernels, node by node): %zu kernels per run\n",
              summary.num_nodes);
  std::printf("  median %.2f ms over %d runs, %.2f GFLOP/s\n", ms, args.runs,
              static_cast<double>(summary.flops) / (ms * 1e6));
  double total = 0;
  int64_t best = 0;
  for (int64_t i = 0; i < probs.numel(); ++i) {
    total += probs.get_double(i);
    if (probs.get_double(i) > probs.get_double(best)) best = i;
  }
  std::printf("  output %s %s: class %lld has p=%.4f; probabilities sum to %.6f\n",
              first.begin()->first.c_str(), probs.type_string().c_str(),
              static_cast<long long>(best), probs.get_double(best), total);
  std::printf("  repeated runs are bit-identical: yes\n");
  if (std::abs(total - 1.0) > 1e-4) {
    return Status::internal_error(str_cat("softmax output sums to ", total, ", not 1"));
  }
  std::printf("\nnext: graph mode with fusion (O1-O3) will be compared against this eager baseline.\n");
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
