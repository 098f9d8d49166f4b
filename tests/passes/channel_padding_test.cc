// A TensorFlow export's channel padding end to end (passes/layout.cc: a Concat on channels whose
// inputs do not fill whole blocks runs blocked as one ChannelGather). Two BlazeFace blocks: the
// residual of 24 channels padded with 4 zero channels to meet a 28-channel conv, then a stride-2
// block whose residual is MaxPool'd before its padding to 32. At every level the outputs agree
// with eager mode, also with a NaN and an infinity in the input; at O3 on a blocked target the
// paddings run blocked and nothing goes back to the plain layout before the end.
#include <gtest/gtest.h>

#include <limits>

#include "core/target.h"
#include "graph_test_util.h"

namespace opfuse {
namespace {

constexpr const char* kBlazeBlocks = R"(graph @main opset 13 (%x: f32[1,3,16,16]) {
  %w0: f32[24,3,3,3] = const splat 0.1
  %b0: f32[24] = const splat 0.05
  %wd1: f32[24,1,3,3] = const splat 0.2
  %w1: f32[28,24,1,1] = const splat -0.03
  %b1: f32[28] = const splat 0.01
  %z1: f32[1,4,16,16] = const splat 0
  %wd2: f32[28,1,3,3] = const splat 0.15
  %w2: f32[32,28,1,1] = const splat 0.02
  %z2: f32[1,4,8,8] = const splat 0
  %c0: f32[1,24,16,16] = Conv(%x, %w0, %b0) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]}
  %r0: f32[1,24,16,16] = Relu(%c0)
  %d1: f32[1,24,16,16] = Conv(%r0, %wd1) {group = 24, kernel_shape = [3, 3], pads = [1, 1, 1, 1]}
  %p1: f32[1,28,16,16] = Conv(%d1, %w1, %b1) {kernel_shape = [1, 1]}
  %pad1: f32[1,28,16,16] = Concat(%r0, %z1) {axis = 1} #pad1
  %s1: f32[1,28,16,16] = Add(%p1, %pad1)
  %r1: f32[1,28,16,16] = Relu(%s1)
  %d2: f32[1,28,8,8] = Conv(%r1, %wd2) {group = 28, kernel_shape = [3, 3], pads = [0, 0, 1, 1], strides = [2, 2]}
  %p2: f32[1,32,8,8] = Conv(%d2, %w2) {kernel_shape = [1, 1]}
  %m2: f32[1,28,8,8] = MaxPool(%r1) {kernel_shape = [2, 2], strides = [2, 2]}
  %pad2: f32[1,32,8,8] = Concat(%m2, %z2) {axis = 1} #pad2
  %s2: f32[1,32,8,8] = Add(%p2, %pad2)
  %y: f32[1,32,8,8] = Relu(%s2)
  return %y
})";

TEST(ChannelPadding, PaddedResidualsRunBlockedAndMatchEager) {
  for (const auto& [level, specials, run] : testing_graphs::compile_at_every_level(
           kBlazeBlocks, 3, 40, 300, -std::numeric_limits<float>::infinity())) {
    SCOPED_TRACE(std::string(opt_level_name(level)) + (specials ? " with NaN and -inf" : ""));
    ASSERT_FALSE(run.steps.empty());
    EXPECT_LE(run.diff, 1e-5);
    if (level == OptLevel::kO3 && active_target().channel_block() > 0) {
      // A padding whose first input fills whole blocks (24 channels in blocks of 8) runs in place.
      const int64_t b = active_target().channel_block();
      EXPECT_EQ(run.steps_running("ChannelGather"), static_cast<size_t>((24 % b != 0) + (28 % b != 0)));
      EXPECT_EQ(run.steps_running("FromBlocked"), 1u) << "a padding went through the plain layout";
    }
  }
}

}  // namespace
}  // namespace opfuse
