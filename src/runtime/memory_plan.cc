#include "runtime/memory_plan.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <queue>
#include <set>

namespace opfuse {
namespace {

int64_t round_up(int64_t n, int64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

// The placed buffers, indexed so that the ones alive at the same time as a new buffer are found
// without scanning all of them: those alive at its first step (a segment tree over steps, each
// buffer stored at the O(log steps) nodes that tile its lifetime, stabbed at one step), and those
// first written later within its lifetime (by first step). The two sets are disjoint.
class PlacedBuffers {
 public:
  explicit PlacedBuffers(const std::vector<BufferRequest>& requests) : requests_(requests) {
    for (const BufferRequest& r : requests) {
      min_step_ = std::min(min_step_, r.first_step);
      steps_ = std::max(steps_, r.last_step + 1);
    }
    steps_ = std::max(steps_ - min_step_, 1);
    while (leaves_ < steps_) leaves_ *= 2;
    nodes_.resize(2 * static_cast<size_t>(leaves_));
  }

  void add(size_t id) {
    const BufferRequest& r = requests_[id];
    for (int l = r.first_step - min_step_ + leaves_, h = r.last_step - min_step_ + leaves_ + 1; l < h; l /= 2, h /= 2) {
      if (l & 1) nodes_[l++].push_back(id);
      if (h & 1) nodes_[--h].push_back(id);
    }
    by_first_step_.emplace(r.first_step, id);
  }

  // Appends to `out` every placed buffer whose lifetime overlaps request `id`'s.
  void alive_with(size_t id, std::vector<size_t>& out) const {
    const BufferRequest& r = requests_[id];
    for (int n = r.first_step - min_step_ + leaves_; n >= 1; n /= 2) {
      out.insert(out.end(), nodes_[n].begin(), nodes_[n].end());
    }
    const auto end = by_first_step_.upper_bound(r.last_step);
    for (auto it = by_first_step_.upper_bound(r.first_step); it != end; ++it) out.push_back(it->second);
  }

 private:
  const std::vector<BufferRequest>& requests_;
  int min_step_ = std::numeric_limits<int>::max();
  int steps_ = 0;
  int leaves_ = 1;
  std::vector<std::vector<size_t>> nodes_;
  std::multimap<int, size_t> by_first_step_;
};

}  // namespace

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, int64_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].bytes > requests[b].bytes;
  });
  PlacedBuffers placed(requests);
  std::vector<size_t> live;
  for (size_t i : order) {
    const int64_t size = round_up(std::max<int64_t>(requests[i].bytes, 1), alignment);
    plan.total_bytes += requests[i].bytes;
    // Placed buffers alive at the same time, by offset.
    live.clear();
    placed.alive_with(i, live);
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
    placed.add(i);
  }
  return plan;
}

// A sweep over steps: the buffers alive at a step, kept by offset, are disjoint so far, so a
// buffer written at that step overlaps one of them only if it overlaps its neighbours by offset.
bool memory_plan_is_valid(const std::vector<BufferRequest>& requests, const MemoryPlan& plan) {
  std::vector<size_t> order;
  for (size_t a = 0; a < requests.size(); ++a) {
    if (plan.offsets[a] + requests[a].bytes > plan.arena_bytes) return false;
    if (requests[a].bytes > 0) order.push_back(a);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].first_step < requests[b].first_step; });
  std::set<std::pair<int64_t, size_t>> alive;  // offset, request
  using Expiry = std::pair<int, size_t>;          // last step, request
  std::priority_queue<Expiry, std::vector<Expiry>, std::greater<>> expiries;
  for (size_t a : order) {
    while (!expiries.empty() && expiries.top().first < requests[a].first_step) {
      alive.erase({plan.offsets[expiries.top().second], expiries.top().second});
      expiries.pop();
    }
    const int64_t begin = plan.offsets[a], end = begin + requests[a].bytes;
    auto next = alive.lower_bound({begin, 0});
    if (next != alive.end() && next->first < end) return false;
    if (next != alive.begin()) {
      const size_t b = std::prev(next)->second;
      if (plan.offsets[b] + requests[b].bytes > begin) return false;
    }
    alive.emplace(begin, a);
    expiries.emplace(requests[a].last_step, a);
  }
  return true;
}

}  // namespace opfuse
