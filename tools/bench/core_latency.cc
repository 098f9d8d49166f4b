// How far apart this machine's CPUs are: for every pair, the median cache-line round trip over a
// few rounds (core/core_distance.h). On one CCD of a Zen or one Xeon die a round trip takes well
// under 100 ns; across CCDs or sockets several hundred. A cloud guest may get either, and it
// decides what data handed from one thread to the other costs: on a Zen 5 guest with 455 ns
// between its two vCPUs, depthwise convs reading what the previous kernel wrote ran twice their
// in-cache time inside the models (docs/benchmarks.md, wave 26). Quote it beside a session's
// figures; the Target's own figure (`opfuse info`) is the fastest of a few short rounds.
//   ninja -C build opfuse_core_latency && ./build/opfuse_core_latency
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "core/core_distance.h"

namespace {
constexpr int kRounds = 5;
constexpr double kDeadlineMs = 10'000;
}  // namespace

// Options: --bounces N (round trips per round, default 200000), --first-pair (only the first two
// CPUs: the pair opfuse's Target measures; tools/bench/run_bench.py probes it around every process).
int main(int argc, char** argv) {
  int bounces = 200'000;
  bool first_pair = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--bounces" && i + 1 < argc) {
      bounces = std::atoi(argv[++i]);
    } else if (arg == "--first-pair") {
      first_pair = true;
    } else {
      std::fprintf(stderr, "usage: %s [--bounces N] [--first-pair]\n", argv[0]);
      return 2;
    }
  }
  if (bounces <= 0) {
    std::fprintf(stderr, "--bounces must be a positive count\n");
    return 2;
  }
  const std::vector<int> cpus = opfuse::allowed_cpus();
  if (cpus.size() < 2) {
    std::printf("one CPU: nothing to measure\n");
    return 0;
  }
  std::vector<std::pair<int, int>> pairs;
  for (size_t i = 0; i < cpus.size(); ++i) {
    for (size_t j = i + 1; j < cpus.size(); ++j) pairs.emplace_back(cpus[i], cpus[j]);
  }
  if (first_pair) pairs.resize(1);
  for (const auto& [a, b] : pairs) {
    std::vector<double> ns = opfuse::core_round_trips_ns(a, b, kRounds, bounces, kDeadlineMs);
    if (ns.empty()) {
      std::printf("CPU %d <-> CPU %d: no round finished within %.0f s\n", a, b, kDeadlineMs / 1000);
      continue;
    }
    std::sort(ns.begin(), ns.end());
    std::printf("CPU %d <-> CPU %d: %.0f ns a round trip (median of %zu rounds of %d; min %.0f, max %.0f)\n", a, b,
                ns[ns.size() / 2], ns.size(), bounces, ns.front(), ns.back());
  }
  return 0;
}
