#include "core/run_limits.h"

namespace opfuse {
namespace {

const RunLimits kNoLimits;
thread_local const RunLimits* active = nullptr;

}  // namespace

bool RunLimits::stop_requested() const {
  return (cancel && cancel->load(std::memory_order_relaxed)) ||
         (deadline && std::chrono::steady_clock::now() > *deadline);
}

Status RunLimits::stopped(const std::string& where) const {
  const bool late = deadline && std::chrono::steady_clock::now() > *deadline;
  return Status::user_error(str_cat("run ", late ? "stopped at its time limit" : "cancelled", " ", where));
}

const RunLimits& current_run_limits() { return active ? *active : kNoLimits; }

ScopedRunLimits::ScopedRunLimits(const RunLimits& limits) : previous_(active) { active = &limits; }

ScopedRunLimits::~ScopedRunLimits() { active = previous_; }

}  // namespace opfuse
