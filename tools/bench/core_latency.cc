// How far apart this machine's CPUs are: a cache line bounced between two threads pinned to CPUs
// a and b (one writes, the other waits to see it and answers), the median round trip over a few
// rounds, for every pair. On one CCD of a Zen or one Xeon die a round trip takes well under
// 100 ns; across CCDs or sockets several hundred. A cloud guest may get either, and it decides
// what data handed from one thread to the other costs: on a Zen 5 guest with 455 ns between its
// two vCPUs, depthwise convs reading what the previous kernel wrote ran twice their in-cache
// time inside the models (docs/benchmarks.md, wave 26). Quote it beside a session's figures.
//   ninja -C build opfuse_core_latency && ./build/opfuse_core_latency
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

constexpr int kBounces = 200'000;
constexpr int kRounds = 5;

alignas(64) std::atomic<int> line{0};

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// Nanoseconds per round trip between the calling thread on CPU a and a helper on CPU b.
double round_trip_ns(int a, int b) {
  line.store(0);
  std::thread other([b] {
    pin(b);
    for (int i = 0; i < kBounces; ++i) {
      while (line.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      line.store(2 * i + 2, std::memory_order_release);
    }
  });
  pin(a);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kBounces; ++i) {
    line.store(2 * i + 1, std::memory_order_release);
    while (line.load(std::memory_order_acquire) != 2 * i + 2) {
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  other.join();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / kBounces;
}

}  // namespace

int main() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  sched_getaffinity(0, sizeof(allowed), &allowed);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  if (cpus.size() < 2) {
    std::printf("one CPU: nothing to measure\n");
    return 0;
  }
  for (size_t i = 0; i < cpus.size(); ++i) {
    for (size_t j = i + 1; j < cpus.size(); ++j) {
      std::vector<double> ns;
      for (int r = 0; r < kRounds; ++r) ns.push_back(round_trip_ns(cpus[i], cpus[j]));
      std::sort(ns.begin(), ns.end());
      std::printf("CPU %d <-> CPU %d: %.0f ns a round trip (median of %d rounds of %d; min %.0f, max %.0f)\n", cpus[i],
                  cpus[j], ns[kRounds / 2], kRounds, kBounces, ns.front(), ns.back());
    }
  }
  return 0;
}
