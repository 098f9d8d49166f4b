// Bounds on one run: a deadline, a flag another thread may set, and a cap on the iterations of
// any one Loop. Graph mode checks them between steps, eager mode between nodes, and Loop and
// Scan between iterations (a single kernel is never interrupted). Either of the first two ends
// the run with a user error saying where; a Loop reaching the cap ends it naming the Loop.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"

namespace opfuse {

struct RunLimits {
  std::optional<std::chrono::steady_clock::time_point> deadline;
  const std::atomic<bool>* cancel = nullptr;
  // A Loop whose trip count and condition would run it longer (a hostile or broken model: trip
  // count 2^62 with a condition that never turns false) fails instead of running for ever.
  int64_t max_loop_iterations = kDefaultMaxLoopIterations;

  static constexpr int64_t kDefaultMaxLoopIterations = 1'000'000;

  // Whether the deadline has passed or the flag is set.
  bool stop_requested() const;
  // The user error for a stopped run; `where` says how far it got ("after 3 of 58 steps ...").
  Status stopped(const std::string& where) const;
};

// The limits of the run this thread is executing, so that kernels which loop (Loop, Scan) can
// check them between iterations without every kernel's signature carrying them. Set for the
// duration of a run by ScopedRunLimits; without one, the defaults (no deadline, the default cap).
const RunLimits& current_run_limits();

class ScopedRunLimits {
 public:
  explicit ScopedRunLimits(const RunLimits& limits);
  ~ScopedRunLimits();
  ScopedRunLimits(const ScopedRunLimits&) = delete;
  ScopedRunLimits& operator=(const ScopedRunLimits&) = delete;

 private:
  const RunLimits* previous_;
};

}  // namespace opfuse
