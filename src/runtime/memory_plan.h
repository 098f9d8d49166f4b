// The memory plan: every intermediate tensor of a compiled plan gets an offset in one arena.
// Buffers whose lifetimes (first..last step that touches them) overlap never overlap in memory.
// Offsets come from the "greedy by size, best fit" heuristic (as in TFLite's arena planner):
// place the largest buffers first, each into the smallest gap left between already placed
// buffers that are alive at the same time, else above them.
#pragma once

#include <cstdint>
#include <vector>

namespace opfuse {

struct BufferRequest {
  int64_t bytes = 0;
  int first_step = 0;  // step that writes it
  int last_step = 0;   // last step that reads it
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // one per request, multiples of the alignment
  int64_t arena_bytes = 0;       // peak: the arena size
  int64_t total_bytes = 0;       // sum of all requests: what allocating each separately needs
};

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, int64_t alignment = 64);

// Checks that no two buffers alive at the same step overlap; for tests and debug builds.
bool memory_plan_is_valid(const std::vector<BufferRequest>& requests, const MemoryPlan& plan);

}  // namespace opfuse
