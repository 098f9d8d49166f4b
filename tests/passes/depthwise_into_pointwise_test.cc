// The depthwise_into_pointwise pass (passes/depthwise_into_pointwise.cc) and the kernels of
// opfuse::BlockedConvDepthwise (kernels/cpu/onednn_blocked.cc, depthwise_stages_kernel.cc) on a
// MobileNetV2 block: pointwise expansion + ReLU6, 3x3 depthwise conv + ReLU6, projection.
#include <gtest/gtest.h>

#include <cmath>

#include "graph_test_util.h"
#include "kernels/omp_threads.h"

namespace opfuse {
namespace {

using testing_graphs::count_op;
using testing_graphs::decided;

constexpr std::string_view kPass = "depthwise_into_pointwise";

// `n` weights that differ per element (splat weights would hide a channel mix-up).
std::string weights(int64_t n, int64_t period, float scale) {
  std::string s = "[";
  for (int64_t i = 0; i < n; ++i) s += str_cat(i ? ", " : "", ((i * 7) % period - period / 2) * scale);
  return s + "]";
}

// [1, c, hw, hw] -> expand to m channels (1x1) -> ReLU6 -> depthwise 3x3 stride s -> ReLU6 -> 1x1 to 8.
std::string block(int64_t c, int64_t m, int64_t hw, int64_t s, bool residual_on_expansion = false) {
  const int64_t ho = (hw - 1) / s + 1;
  std::string t = str_cat("graph @main opset 13 (%x: f32[1,", c, ",", hw, ",", hw, "]) {\n");
  t += str_cat("  %w: f32[", m, ",", c, ",1,1] = const ", weights(m * c, 13, 0.05f), "\n");
  t += str_cat("  %b: f32[", m, "] = const ", weights(m, 5, 0.1f), "\n");
  t += str_cat("  %wd: f32[", m, ",1,3,3] = const ", weights(m * 9, 11, 0.04f), "\n");
  t += str_cat("  %bd: f32[", m, "] = const ", weights(m, 3, 0.2f), "\n");
  t += str_cat("  %wp: f32[8,", m, ",1,1] = const ", weights(8 * m, 7, 0.02f), "\n");
  t += "  %lo: f32[] = const [0]\n  %hi: f32[] = const [6]\n";
  const std::string e = str_cat("f32[1,", m, ",", hw, ",", hw, "]"), d = str_cat("f32[1,", m, ",", ho, ",", ho, "]");
  t += str_cat("  %e: ", e, " = Conv(%x, %w, %b) {kernel_shape = [1, 1]}\n");
  if (residual_on_expansion) {
    t += str_cat("  %we: f32[", m, ",", c, ",1,1] = const splat 0.01\n");
    t += str_cat("  %e2: ", e, " = Conv(%x, %we) {kernel_shape = [1, 1]}\n");
    t += str_cat("  %e3: ", e, " = Add(%e, %e2)\n");
    t += str_cat("  %er: ", e, " = Clip(%e3, %lo, %hi)\n");
  } else {
    t += str_cat("  %er: ", e, " = Clip(%e, %lo, %hi)\n");
  }
  t += str_cat("  %d: ", d, " = Conv(%er, %wd, %bd) {group = ", m, ", kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [",
               s, ", ", s, "]}\n");
  t += str_cat("  %dr: ", d, " = Clip(%d, %lo, %hi)\n");
  t += str_cat("  %y: f32[1,8,", ho, ",", ho, "] = Conv(%dr, %wp) {kernel_shape = [1, 1]}\n");
  return t + "  return %y\n}\n";
}

// A target whose two cores have 1 MiB of L2 each: the pass fuses above 4 MiB of expanded tensor.
PassContext context_for(IsaTier isa) {
  PassContext ctx;
  ctx.target.isa = isa;
  ctx.target.cores = 2;
  ctx.target.l2_bytes = 1 << 20;
  return ctx;
}

TEST(DepthwiseIntoPointwise, FusesAnExpansionThatLeavesL2) {
  for (int64_t stride : {1, 2}) {
    SCOPED_TRACE(stride);
    PassContext ctx = context_for(IsaTier::kAvx512Core);
    const Graph g = testing_graphs::pipeline_at(block(16, 96, 112, stride), OptLevel::kO3, ctx);  // 4.8 MB
    EXPECT_EQ(count_op(g, "BlockedConvDepthwise"), 1);
    EXPECT_EQ(count_op(g, "BlockedConv"), 1);  // the projection
    EXPECT_TRUE(decided(ctx, kPass, true, "as one kernel"));
  }
}

TEST(DepthwiseIntoPointwise, RefusesWhatWouldNotGain) {
  struct Case {
    std::string graph;
    IsaTier isa;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {block(16, 96, 56, 1), IsaTier::kAvx512Core, "fits in twice the cores' L2"},  // 1.2 MB
      {block(16, 96, 112, 1), IsaTier::kSse41, "below AVX2"},
      {block(16, 72, 128, 1), IsaTier::kAvx512Core, "72 channels do not fill whole blocks of 16"},
      {block(16, 96, 112, 1, true), IsaTier::kAvx512Core, "adds a residual"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.reason);
    PassContext ctx = context_for(c.isa);
    const Graph g = testing_graphs::pipeline_at(c.graph, OptLevel::kO3, ctx);
    EXPECT_EQ(count_op(g, "BlockedConvDepthwise"), 0);
    EXPECT_TRUE(decided(ctx, kPass, false, c.reason));
  }
  // The same block as in the first test is fused at AVX2 in nChw8c, where 72 channels are 9 blocks.
  PassContext ctx = context_for(IsaTier::kAvx2);
  EXPECT_EQ(count_op(testing_graphs::pipeline_at(block(16, 72, 128, 1), OptLevel::kO3, ctx), "BlockedConvDepthwise"), 1);
}

TEST(DepthwiseIntoPointwise, MatchesEagerModeWithNanAndInfAtEveryLevel) {
  // One thread: oneDNN then runs the pair as one jit kernel from 2 x its L2 guess (under 4.5 MB
  // on the CPUs we know); 16 -> 96 channels at 160x160 is 9.8 MB.
  ScopedOmpThreads one(1);
  const std::string text = block(16, 96, 160, 2);
  for (const auto& r : testing_graphs::compile_at_every_level(text, 5, 1234, 98765, -INFINITY)) {
    SCOPED_TRACE(str_cat(opt_level_name(r.level), r.specials ? " with NaN and -Inf" : ""));
    ASSERT_FALSE(r.run.steps.empty());
    EXPECT_LE(r.run.diff, 1e-5);
    if (r.level != OptLevel::kO3 || r.run.steps_running("BlockedConvDepthwise") == 0) continue;
    for (const std::string& step : r.run.steps) {
      if (step.find("BlockedConvDepthwise") == std::string::npos) continue;
      if (r.specials) {
        // Clip drops NaN inside oneDNN, so the convs run apart with our clip between them.
        EXPECT_NE(step.find("-> stages ["), std::string::npos) << step;
      } else {
        // One oneDNN kernel: its 1x1 conv with the depthwise conv as a post-op, never the
        // ref_fused_convolution that runs them apart.
        EXPECT_NE(step.find("-> onednn.blocked_conv [jit_1x1"), std::string::npos) << step;
      }
    }
  }
}

}  // namespace
}  // namespace opfuse
