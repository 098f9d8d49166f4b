#include "runtime/memory_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "core/random.h"

namespace opfuse {
namespace {

// 1..max_count requests, each first written at a step in [0, max_first), alive for [0, max_span)
// more steps, of `bytes(rng)` bytes.
template <class Bytes>
std::vector<BufferRequest> random_requests(Random& rng, int max_count, int max_first, int max_span, Bytes bytes) {
  std::vector<BufferRequest> requests;
  const int n = 1 + static_cast<int>(rng.uniform(0, max_count));
  for (int i = 0; i < n; ++i) {
    const int first = static_cast<int>(rng.uniform(0, max_first));
    const int64_t size = bytes(rng);
    requests.push_back({size, first, first + static_cast<int>(rng.uniform(0, max_span))});
  }
  return requests;
}

TEST(MemoryPlanTest, BuffersAliveTogetherNeverOverlap) {
  // A chain a -> b -> c where a dies when c is written: c reuses a's memory.
  std::vector<BufferRequest> requests = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}};
  MemoryPlan plan = plan_memory(requests);
  ASSERT_TRUE(memory_plan_is_valid(requests, plan));
  EXPECT_EQ(plan.offsets[0], plan.offsets[2]);
  EXPECT_NE(plan.offsets[0], plan.offsets[1]);
  EXPECT_EQ(plan.arena_bytes, 2 * 1024);  // two 64-byte-aligned 1000-byte buffers
  EXPECT_EQ(plan.total_bytes, 3000);
}

TEST(MemoryPlanTest, BestFitPicksTheSmallestGapThatFits) {
  // Two long-lived buffers with a gap of 64 bytes and one of 256 between/above them.
  std::vector<BufferRequest> requests = {
      {4096, 0, 10},  // placed first at 0
      {2048, 0, 2},   // placed at 4096
      {1024, 0, 10},  // placed at 6144
      {64, 3, 4},     // after step 2 the 2048 gap at 4096 is free: a small buffer goes there
  };
  MemoryPlan plan = plan_memory(requests);
  ASSERT_TRUE(memory_plan_is_valid(requests, plan));
  EXPECT_EQ(plan.offsets[3], plan.offsets[1]);
  EXPECT_EQ(plan.arena_bytes, 4096 + 2048 + 1024);
}

TEST(MemoryPlanTest, RandomLifetimesAreAlwaysValidAndNoWorseThanTheSum) {
  Random rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<BufferRequest> requests =
        random_requests(rng, 40, 30, 10, [](Random& r) { return static_cast<int64_t>(r.uniform(0, 5000)); });
    MemoryPlan plan = plan_memory(requests);
    ASSERT_TRUE(memory_plan_is_valid(requests, plan)) << "trial " << trial;
    int64_t padded_sum = 0;
    for (const auto& r : requests) padded_sum += (std::max<int64_t>(r.bytes, 1) + 63) / 64 * 64;
    EXPECT_LE(plan.arena_bytes, padded_sum);
    for (int64_t offset : plan.offsets) EXPECT_EQ(offset % 64, 0);
  }
}

// The definitions, pair by pair (what plan_memory and memory_plan_is_valid index and sweep to
// stay near-linear): buffers alive together overlap in memory.
bool has_overlap_by_pairs(const std::vector<BufferRequest>& requests, const std::vector<int64_t>& offsets) {
  for (size_t a = 0; a < requests.size(); ++a) {
    for (size_t b = a + 1; b < requests.size(); ++b) {
      const bool together = requests[a].first_step <= requests[b].last_step &&
                            requests[b].first_step <= requests[a].last_step;
      const bool overlap = offsets[a] < offsets[b] + requests[b].bytes && offsets[b] < offsets[a] + requests[a].bytes;
      if (together && overlap && requests[a].bytes > 0 && requests[b].bytes > 0) return true;
    }
  }
  return false;
}

// Best fit over the buffers alive together, found pair by pair: the plan plan_memory must match.
std::vector<int64_t> best_fit_by_pairs(const std::vector<BufferRequest>& requests) {
  auto padded = [](int64_t bytes) { return (std::max<int64_t>(bytes, 1) + 63) / 64 * 64; };
  std::vector<size_t> order(requests.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });
  std::vector<int64_t> offsets(requests.size(), 0);
  std::vector<size_t> placed;
  for (size_t i : order) {
    std::vector<size_t> live;
    for (size_t j : placed) {
      if (requests[i].first_step <= requests[j].last_step && requests[j].first_step <= requests[i].last_step) {
        live.push_back(j);
      }
    }
    std::sort(live.begin(), live.end(), [&](size_t a, size_t b) { return offsets[a] < offsets[b]; });
    int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
    for (size_t j : live) {
      const int64_t gap = offsets[j] - cursor;
      if (gap >= padded(requests[i].bytes) && gap < best_gap) {
        best_gap = gap;
        best = cursor;
      }
      cursor = std::max(cursor, offsets[j] + padded(requests[j].bytes));
    }
    offsets[i] = best >= 0 ? best : cursor;
    placed.push_back(i);
  }
  return offsets;
}

TEST(MemoryPlanTest, MatchesBestFitFoundPairByPair) {
  Random rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    // Few distinct sizes: many ties in size and in offset; short and long lifetimes.
    const std::vector<BufferRequest> requests = random_requests(
        rng, 60, 40, trial % 2 == 0 ? 3 : 30, [](Random& r) { return 64 * static_cast<int64_t>(r.uniform(0, 4)); });
    const MemoryPlan plan = plan_memory(requests);
    EXPECT_EQ(plan.offsets, best_fit_by_pairs(requests)) << "trial " << trial;
  }
}

TEST(MemoryPlanTest, ValidityAgreesWithThePairwiseDefinition) {
  Random rng(11);
  int invalid = 0;
  for (int trial = 0; trial < 500; ++trial) {
    const std::vector<BufferRequest> requests =
        random_requests(rng, 12, 10, 4, [](Random& r) { return 32 * static_cast<int64_t>(r.uniform(0, 4)); });
    MemoryPlan plan;
    for (size_t i = 0; i < requests.size(); ++i) {
      plan.offsets.push_back(32 * static_cast<int64_t>(rng.uniform(0, 8)));  // random: often invalid
    }
    plan.arena_bytes = 512;
    const bool pairwise_valid = !has_overlap_by_pairs(requests, plan.offsets);
    invalid += !pairwise_valid;
    EXPECT_EQ(memory_plan_is_valid(requests, plan), pairwise_valid) << "trial " << trial;
  }
  EXPECT_GT(invalid, 50);  // both answers were exercised
  EXPECT_LT(invalid, 450);
}

}  // namespace
}  // namespace opfuse
