#include "runtime/memory_plan.h"

#include <gtest/gtest.h>

#include "core/random.h"

namespace opfuse {
namespace {

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
    std::vector<BufferRequest> requests;
    const int n = 1 + static_cast<int>(rng.uniform(0, 40));
    for (int i = 0; i < n; ++i) {
      const int first = static_cast<int>(rng.uniform(0, 30));
      requests.push_back({static_cast<int64_t>(rng.uniform(0, 5000)), first,
                          first + static_cast<int>(rng.uniform(0, 10))});
    }
    MemoryPlan plan = plan_memory(requests);
    ASSERT_TRUE(memory_plan_is_valid(requests, plan)) << "trial " << trial;
    int64_t padded_sum = 0;
    for (const auto& r : requests) padded_sum += (std::max<int64_t>(r.bytes, 1) + 63) / 64 * 64;
    EXPECT_LE(plan.arena_bytes, padded_sum);
    for (int64_t offset : plan.offsets) EXPECT_EQ(offset % 64, 0);
  }
}

}  // namespace
}  // namespace opfuse
