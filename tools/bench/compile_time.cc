// Compile time over graph size: a chain of N alternating Relu/Sigmoid nodes on a small tensor,
// compiled at each level (Session::create + the first plan_for: pipeline, kernel creation and
// memory planning), beside one eager run of the same chain. Median of --rounds per size.
//
//   ninja -C build opfuse_compile_time
//   ./build/opfuse_compile_time [--sizes 2000,8000,32000,128000,200000] [--levels O1,O2,O3]
//                               [--rounds 3] [--limit-seconds 60]
//
// A size whose compile at a level exceeds the limit is not repeated at larger sizes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "pipelines/pipeline.h"
#include "runtime/session.h"

namespace {

using Clock = std::chrono::steady_clock;
using opfuse::Graph;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = std::min(s.find(',', start), s.size());
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

Graph make_chain(int64_t nodes) {
  Graph g;
  opfuse::Value* v = g.add_input("x", opfuse::DType::kF32, opfuse::make_shape({1, 64}));
  for (int64_t i = 0; i < nodes; ++i) {
    auto node = g.add_node(i % 2 == 0 ? "Relu" : "Sigmoid", {v}, {opfuse::str_cat("v", i)}, {},
                           opfuse::str_cat("n", i));
    if (!node.is_ok()) {
      std::fprintf(stderr, "%s\n", node.status().message().c_str());
      std::exit(1);
    }
    v = (*node)->output(0);
  }
  g.add_output(v);
  return g;
}

opfuse::TensorMap chain_inputs() {
  return {{"x", opfuse::Tensor::from_vector<float>({1, 64}, std::vector<float>(64, 0.5f))}};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds to compile the chain at `level` and plan it for its input; negative on failure.
double compile_seconds(int64_t nodes, opfuse::OptLevel level) {
  Graph g = make_chain(nodes);
  const auto t0 = Clock::now();
  opfuse::SessionOptions options;
  options.level = level;
  auto session = opfuse::Session::create(std::move(g), options);
  if (!session.is_ok()) {
    std::fprintf(stderr, "create: %s\n", session.status().message().c_str());
    return -1;
  }
  auto plan = session->plan_for(chain_inputs());
  if (!plan.is_ok()) {
    std::fprintf(stderr, "plan: %s\n", plan.status().message().c_str());
    return -1;
  }
  return seconds_since(t0);
}

double eager_seconds(int64_t nodes) {
  opfuse::SessionOptions options;
  options.mode = opfuse::ExecutionMode::kEager;
  auto session = opfuse::Session::create(make_chain(nodes), options);
  if (!session.is_ok()) return -1;
  const auto t0 = Clock::now();
  if (!session->run(chain_inputs()).is_ok()) return -1;
  return seconds_since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  std::string sizes = "2000,8000,32000,128000,200000";
  std::string levels = "O1,O2,O3";
  int rounds = 3;
  double limit = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--sizes") sizes = argv[i + 1];
    else if (flag == "--levels") levels = argv[i + 1];
    else if (flag == "--rounds") rounds = std::max(1, std::atoi(argv[i + 1]));
    else if (flag == "--limit-seconds") limit = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  std::vector<opfuse::OptLevel> parsed;
  std::printf("%10s %12s", "nodes", "eager run s");
  for (const std::string& name : split(levels)) {
    auto level = opfuse::parse_opt_level(name);
    if (!level.is_ok()) {
      std::fprintf(stderr, "%s\n", level.status().message().c_str());
      return 2;
    }
    parsed.push_back(*level);
    std::printf(" %12s", (name + " compile s").c_str());
  }
  std::printf("\n");
  std::vector<bool> over_limit(parsed.size(), false);
  for (const std::string& size : split(sizes)) {
    const int64_t nodes = std::atoll(size.c_str());
    std::printf("%10lld %12.3f", static_cast<long long>(nodes), eager_seconds(nodes));
    for (size_t l = 0; l < parsed.size(); ++l) {
      if (over_limit[l]) {
        std::printf(" %12s", "-");
        continue;
      }
      std::vector<double> s;
      for (int r = 0; r < rounds; ++r) {
        s.push_back(compile_seconds(nodes, parsed[l]));
        if (s.back() < 0 || s.back() > limit) break;  // a failure or a compile over the limit is not repeated
      }
      const double m = median(s);
      over_limit[l] = m < 0 || m > limit;
      std::printf(" %12.3f", m);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}
