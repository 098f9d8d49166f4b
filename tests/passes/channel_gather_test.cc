// The channel_gather pass (passes/channel_gather.cc) on a ShuffleNetV2 stage: three units, each
// splitting its input into halves, convolving one and shuffling the concatenation. Compiled at O2
// and O3 it must agree with eager mode and run the shuffles as ChannelGathers (blocked at O3),
// with no Reshape, Transpose or generated region left of them.
#include <gtest/gtest.h>

#include <algorithm>

#include "graph_test_util.h"

namespace opfuse {
namespace {

// A stage on [1, 2c, 6, 6]: like ShuffleNet's, its first unit convolves the image in two
// branches and shuffles them; `units` units split, convolve and shuffle after it. c = 12 leaves
// padded lanes in every block layout.
std::string shufflenet_stage(int units, int64_t c) {
  std::string s = "graph @main opset 13 (%x: f32[1,3,6,6]) {\n";
  s += str_cat("  %halves: i64[2] = const [", c, ", ", c, "]\n");
  s += str_cat("  %groups: i64[5] = const [1, 2, ", c, ", 6, 6]\n");
  s += str_cat("  %flat: i64[4] = const [1, ", 2 * c, ", 6, 6]\n");
  s += str_cat("  %w1: f32[", c, ",", c, ",1,1] = const splat 0.125\n");
  s += str_cat("  %wd: f32[", c, ",1,3,3] = const splat 0.25\n");
  s += str_cat("  %w0: f32[", c, ",3,3,3] = const splat 0.1\n");
  s += str_cat("  %p: f32[1,", c, ",6,6] = Conv(%x, %w0) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]}\n");
  s += str_cat("  %q: f32[1,", c, ",6,6] = Conv(%x, %w0) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]}\n");
  s += str_cat("  %pq: f32[1,", 2 * c, ",6,6] = Concat(%p, %q) {axis = 1}\n");
  s += str_cat("  %pq_g: f32[1,2,", c, ",6,6] = Reshape(%pq, %groups)\n");
  s += str_cat("  %pq_t: f32[1,", c, ",2,6,6] = Transpose(%pq_g) {perm = [0, 2, 1, 3, 4]}\n");
  s += str_cat("  %pq_s: f32[1,", 2 * c, ",6,6] = Reshape(%pq_t, %flat)\n");
  std::string in = "pq_s";
  for (int u = 0; u < units; ++u) {
    const std::string p = str_cat("u", u, "_");
    const std::string t = str_cat("f32[1,", c, ",6,6]");
    s += str_cat("  %", p, "l: ", t, ", %", p, "r: ", t, " = Split(%", in, ", %halves) {axis = 1}\n");
    s += str_cat("  %", p, "a: ", t, " = Conv(%", p, "r, %w1) {kernel_shape = [1, 1]}\n");
    s += str_cat("  %", p, "ar: ", t, " = Relu(%", p, "a)\n");
    s += str_cat("  %", p, "d: ", t, " = Conv(%", p, "ar, %wd) {group = ", c, ", kernel_shape = [3, 3], pads = [1, 1, 1, 1]}\n");
    s += str_cat("  %", p, "b: ", t, " = Conv(%", p, "d, %w1) {kernel_shape = [1, 1]}\n");
    s += str_cat("  %", p, "br: ", t, " = Relu(%", p, "b)\n");
    s += str_cat("  %", p, "cat: f32[1,", 2 * c, ",6,6] = Concat(%", p, "l, %", p, "br) {axis = 1}\n");
    s += str_cat("  %", p, "g: f32[1,2,", c, ",6,6] = Reshape(%", p, "cat, %groups)\n");
    s += str_cat("  %", p, "t: f32[1,", c, ",2,6,6] = Transpose(%", p, "g) {perm = [0, 2, 1, 3, 4]}\n");
    s += str_cat("  %", p, "s: f32[1,", 2 * c, ",6,6] = Reshape(%", p, "t, %flat)\n");
    in = p + "s";
  }
  // The stage's output goes on into a conv (a gather) and, as it is, out of the graph.
  s += str_cat("  %w2: f32[4,", 2 * c, ",1,1] = const splat 0.5\n");
  s += str_cat("  %head: f32[1,4,6,6] = Conv(%", in, ", %w2) {kernel_shape = [1, 1]}\n");
  s += str_cat("  return %head, %", in, "\n}\n");
  return s;
}

TEST(ChannelGatherPass, ShuffleNetStageRunsGathersAndMatchesEager) {
  for (OptLevel level : {OptLevel::kO2, OptLevel::kO3}) {
    SCOPED_TRACE(opt_level_name(level));
    const testing_graphs::CompiledRun run = testing_graphs::compile_and_compare(shufflenet_stage(3, 12), level);
    ASSERT_FALSE(run.steps.empty());
    EXPECT_LE(run.diff, 1e-5);
    auto count = [&](const std::string& prefix) {
      return std::count_if(run.steps.begin(), run.steps.end(),
                           [&](const std::string& s) { return s.find(prefix) != std::string::npos; });
    };
    // Every unit reads its convolved half through a gather, the head reads the stage's output
    // through one; the graph output keeps its own chain (it is returned plain).
    EXPECT_EQ(count("ChannelGather"), 4);
    if (level == OptLevel::kO3) {
      EXPECT_EQ(count("ToBlocked"), 0) << "the gathers run blocked";
    }
  }
}

}  // namespace
}  // namespace opfuse
