#include "core/core_distance.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace opfuse {
namespace {

using Clock = std::chrono::steady_clock;

bool pin_this_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// The bounced line, alone on its cache line, and the flags that end a measurement early.
struct alignas(64) Bounce {
  std::atomic<int> line{0};
  alignas(64) std::atomic<bool> abandoned{false};
  std::atomic<int> pinned{0};
};

// Spins until `line` holds `value`; false when the measurement was abandoned meanwhile (checking
// the clock only every few thousand spins keeps it out of the timed path).
bool await(Bounce& b, int value, Clock::time_point deadline) {
  for (unsigned spins = 1; b.line.load(std::memory_order_acquire) != value; ++spins) {
    if (spins % 4096 == 0) {
      if (b.abandoned.load(std::memory_order_relaxed)) return false;
      if (Clock::now() > deadline) {
        b.abandoned.store(true, std::memory_order_relaxed);
        return false;
      }
    }
  }
  return true;
}

}  // namespace

std::vector<int> allowed_cpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  return cpus;
}

std::vector<double> core_round_trips_ns(int cpu_a, int cpu_b, int rounds, int bounces, double deadline_ms) {
  Bounce b;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(deadline_ms));
  // Both sides start bouncing only once both are pinned, so no round times a thread's start-up.
  const auto start = [&](int cpu) {
    if (!pin_this_thread(cpu)) b.abandoned.store(true);
    b.pinned.fetch_add(1);
    while (b.pinned.load() < 2) {
    }
    return !b.abandoned.load();
  };
  const int total = (rounds + 1) * bounces;  // the first round untimed
  std::thread answerer([&] {
    if (!start(cpu_b)) return;
    for (int i = 0; i < total; ++i) {
      if (!await(b, 2 * i + 1, deadline)) return;
      b.line.store(2 * i + 2, std::memory_order_release);
    }
  });
  std::vector<double> ns;
  std::thread asker([&] {
    if (!start(cpu_a)) return;
    for (int r = 0, i = 0; r <= rounds; ++r) {
      const auto t0 = Clock::now();
      for (int end = i + bounces; i < end; ++i) {
        b.line.store(2 * i + 1, std::memory_order_release);
        if (!await(b, 2 * i + 2, deadline)) return;
      }
      if (r > 0) ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / bounces);
    }
  });
  asker.join();
  answerer.join();
  return ns;
}

}  // namespace opfuse
