#include "runtime/memory_plan.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace opfuse {
namespace {

bool lifetimes_overlap(const BufferRequest& a, const BufferRequest& b) {
  return a.first_step <= b.last_step && b.first_step <= a.last_step;
}

int64_t round_up(int64_t n, int64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

}  // namespace

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, int64_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].bytes > requests[b].bytes;
  });
  std::vector<size_t> placed;
  for (size_t i : order) {
    const int64_t size = round_up(std::max<int64_t>(requests[i].bytes, 1), alignment);
    plan.total_bytes += requests[i].bytes;
    // Placed buffers alive at the same time, by offset.
    std::vector<size_t> live;
    for (size_t j : placed) {
      if (lifetimes_overlap(requests[i], requests[j])) live.push_back(j);
    }
    std::sort(live.begin(), live.end(), [&](size_t a, size_t b) { return plan.offsets[a] < plan.offsets[b]; });
    int64_t best_offset = -1;
    int64_t best_gap = std::numeric_limits<int64_t>::max();
    int64_t cursor = 0;  // lowest free address above the live buffers scanned so far
    for (size_t j : live) {
      const int64_t gap = plan.offsets[j] - cursor;
      if (gap >= size && gap < best_gap) {
        best_gap = gap;
        best_offset = cursor;
      }
      cursor = std::max(cursor, plan.offsets[j] + round_up(std::max<int64_t>(requests[j].bytes, 1), alignment));
    }
    plan.offsets[i] = best_offset >= 0 ? best_offset : cursor;
    plan.arena_bytes = std::max(plan.arena_bytes, plan.offsets[i] + size);
    placed.push_back(i);
  }
  return plan;
}

bool memory_plan_is_valid(const std::vector<BufferRequest>& requests, const MemoryPlan& plan) {
  for (size_t a = 0; a < requests.size(); ++a) {
    if (plan.offsets[a] + requests[a].bytes > plan.arena_bytes) return false;
    for (size_t b = a + 1; b < requests.size(); ++b) {
      if (!lifetimes_overlap(requests[a], requests[b])) continue;
      const bool disjoint = plan.offsets[a] + requests[a].bytes <= plan.offsets[b] ||
                            plan.offsets[b] + requests[b].bytes <= plan.offsets[a];
      if (!disjoint && requests[a].bytes > 0 && requests[b].bytes > 0) return false;
    }
  }
  return true;
}

}  // namespace opfuse
