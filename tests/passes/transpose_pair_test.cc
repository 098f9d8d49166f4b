// Transpose pairs (simplify's transpose_pair_rule) as a TensorFlow export writes them: convs in
// NCHW, the ops between them in NHWC. At every level the compiled graph agrees with eager mode,
// and from O1 on no Transpose is left: the bias Add, the per-channel Mul, the spatial Pad, the
// Sigmoid and the channel padding Concat run on NCHW with their constants re-laid out.
#include <gtest/gtest.h>

#include <algorithm>

#include "graph_test_util.h"

namespace opfuse {
namespace {

constexpr const char* kNhwcStretch = R"(graph @main opset 13 (%x: f32[1,3,8,8]) {
  %w1: f32[6,3,3,3] = const splat 0.1
  %w2: f32[8,8,3,3] = const splat 0.05
  %bias: f32[6] = const [0.5, -1, 2, 0.25, -0.5, 1]
  %scale: f32[1,1,1,6] = const [1, 2, 3, 4, 5, 6]
  %pads: i64[8] = const [0, 1, 1, 0, 0, 1, 1, 0]
  %zeros: f32[1,10,10,2] = const splat 0
  %c: f32[1,6,8,8] = Conv(%x, %w1) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #conv1
  %t: f32[1,8,8,6] = Transpose(%c) {perm = [0, 2, 3, 1]} #to_nhwc
  %b: f32[1,8,8,6] = Add(%t, %bias) #bias_add
  %m: f32[1,8,8,6] = Mul(%b, %scale) #scale_mul
  %s: f32[1,8,8,6] = Sigmoid(%m) #sigmoid
  %p: f32[1,10,10,6] = Pad(%s, %pads) #pad_hw
  %k: f32[1,10,10,8] = Concat(%p, %zeros) {axis = -1} #pad_channels
  %u: f32[1,8,10,10] = Transpose(%k) {perm = [0, 3, 1, 2]} #to_nchw
  %y: f32[1,8,8,8] = Conv(%u, %w2) {kernel_shape = [3, 3]} #conv2
  return %y
})";

TEST(TransposePairTest, NhwcStretchBetweenConvsRunsOnNchw) {
  for (OptLevel level : {OptLevel::kO0, OptLevel::kO1, OptLevel::kO2, OptLevel::kO3}) {
    SCOPED_TRACE(opt_level_name(level));
    const testing_graphs::CompiledRun run = testing_graphs::compile_and_compare(kNhwcStretch, level);
    ASSERT_FALSE(run.steps.empty());
    EXPECT_LE(run.diff, 1e-5);
    const auto transposes = std::count_if(run.steps.begin(), run.steps.end(), [](const std::string& s) {
      return s.find("Transpose") != std::string::npos;
    });
    EXPECT_EQ(transposes, level == OptLevel::kO0 ? 2 : 0);
  }
}

}  // namespace
}  // namespace opfuse
