// simplify's conv_pad_rule end to end: a TensorFlow "SAME" stride-2 conv (Pad one row and column
// at the end, then an unpadded conv) and a Pad on all sides before a stride-1 conv, each followed
// by ReLU so O2/O3 fuse the epilogue too. At every level the Pads are gone and the outputs agree
// with eager mode, also with a NaN and an infinity in the input (tests/golden/simplify/conv_pad.ir
// checks the rewrite and its refusals).
#include <gtest/gtest.h>

#include <limits>

#include "graph_test_util.h"

namespace opfuse {
namespace {

constexpr const char* kPaddedConvs = R"(graph @main opset 13 (%x: f32[1,16,15,15]) {
  %w1: f32[24,16,3,3] = const splat 0.03
  %w2: f32[16,24,3,3] = const splat -0.02
  %end: i64[8] = const [0, 0, 0, 0, 0, 0, 1, 1]
  %sides: i64[8] = const [0, 0, 2, 1, 0, 0, 0, 1]
  %p1: f32[1,16,16,16] = Pad(%x, %end) #same_pad
  %c1: f32[1,24,7,7] = Conv(%p1, %w1) {kernel_shape = [3, 3], strides = [2, 2]} #strided_conv
  %r1: f32[1,24,7,7] = Relu(%c1)
  %p2: f32[1,24,9,9] = Pad(%r1, %sides) #sides_pad
  %c2: f32[1,16,7,7] = Conv(%p2, %w2) {kernel_shape = [3, 3]} #conv
  %y: f32[1,16,7,7] = Relu(%c2)
  return %y
})";

TEST(ConvPadTest, PadsFoldIntoTheConvsAtEveryLevel) {
  for (const auto& [level, specials, run] : testing_graphs::compile_at_every_level(
           kPaddedConvs, 5, 17, 200, std::numeric_limits<float>::infinity())) {
    SCOPED_TRACE(std::string(opt_level_name(level)) + (specials ? " with NaN and inf" : ""));
    ASSERT_FALSE(run.steps.empty());
    EXPECT_EQ(run.steps_running("Pad"), 0u);
    EXPECT_LE(run.diff, 1e-5);
  }
}

}  // namespace
}  // namespace opfuse
