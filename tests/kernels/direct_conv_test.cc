// "cpu.conv" (kernels/cpu/direct_conv_kernel.cc): BlockedConvs computed directly on the vector's
// block, against the reference BlockedConv: strides, dilations, asymmetric and no padding, odd
// input channel counts (with garbage in X's padded lanes), panels of two and four output
// blocks, rows split into uneven tiles, several images, epilogues and a residual, NaN / Inf /
// denormal inputs, small 1x1 convs with their rows folded; what it declines; where the table
// picks it (3x3 convs of stride 1 go to cpu.winograd first); and a conv net at every level.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "core/target.h"
#include "graph_test_util.h"
#include "kernels/cpu/direct_conv_kernel.h"
#include "kernels/cpu/winograd_conv_kernel.h"
#include "kernels/kernel.h"
#include "kernels/omp_threads.h"
#include "kernels/onednn_test_util.h"

namespace opfuse {
namespace {

using Ints = std::vector<int64_t>;
using onednn_test::Arg;
using onednn_test::blocked_dims;
using onednn_test::blocked_relative_error;
using onednn_test::cst;
using onednn_test::in;
using onednn_test::make_node;
using onednn_test::random_f32;
using onednn_test::vector_is_a_block;

struct Case {
  int64_t n, c, m, h, w, kh, kw, stride, dilation;
  Ints pads;  // top, left, bottom, right
  std::vector<std::string> epilogue;
};

TEST(DirectConv, MatchesTheReference) {
  std::mt19937 gen(31);
  const std::vector<Case> cases = {
      {1, 16, 32, 14, 14, 3, 3, 1, 1, {1, 1, 1, 1}, {"relu"}},        // four output blocks per panel
      {1, 16, 16, 9, 13, 3, 3, 1, 1, {1, 1, 1, 1}, {}},               // two per panel, 13 = 5 + 4 + 4
      {1, 12, 32, 11, 11, 3, 3, 2, 1, {1, 1, 1, 1}, {"sigmoid_mul"}},  // stride 2, 12 input channels
      {1, 24, 16, 12, 12, 5, 5, 1, 2, {4, 4, 4, 4}, {"hardswish"}},    // dilation 2
      {2, 16, 32, 8, 7, 3, 3, 1, 1, {1, 1, 1, 1}, {"add", "relu"}},    // two images, a residual, 7 = 3 + 2 + 2
      {1, 16, 16, 10, 10, 3, 3, 1, 1, {0, 0, 0, 0}, {}},              // no padding: X read in place
      {1, 8, 32, 9, 17, 1, 3, 3, 1, {0, 2, 0, 1}, {"clip:0:6"}},       // 1x3, stride 3, asymmetric pads
      // Small 1x1 convs: 16x16 folded to 4 rows of 64, 6x6 to 2 of 18, 7x7 not folded.
      {1, 32, 16, 16, 16, 1, 1, 1, 1, {0, 0, 0, 0}, {"add", "relu"}},
      {2, 12, 16, 6, 6, 1, 1, 1, 1, {0, 0, 0, 0}, {"relu"}},
      {1, 24, 64, 7, 7, 1, 1, 1, 1, {0, 0, 0, 0}, {}},
  };
  // 1x1 convs run here on two threads or more only.
  const ScopedOmpThreads threads(2);
  int tested = 0;
  for (const Case& case8 : cases) {
    for (int64_t block : {int64_t{8}, int64_t{16}}) {
      // Channel counts are written for block 8; with block 16 they double, so that each case has
      // the same number of blocks (and padded lanes) on every tier.
      Case c = case8;
      c.c *= block / 8;
      c.m *= block / 8;
      const bool residual = !c.epilogue.empty() && c.epilogue[0] == "add";
      const int64_t oh = (c.h + c.pads[0] + c.pads[2] - (c.kh - 1) * c.dilation - 1) / c.stride + 1;
      const int64_t ow = (c.w + c.pads[1] + c.pads[3] - (c.kw - 1) * c.dilation - 1) / c.stride + 1;
      const Ints x = blocked_dims(c.n, c.c, c.h, c.w, block), y = blocked_dims(c.n, c.m, oh, ow, block);
      std::vector<Arg> args = {in(random_f32(x, gen)), cst(random_f32({c.m, c.c, c.kh, c.kw}, gen, 0.3f)),
                               cst(random_f32({c.m}, gen))};
      if (residual) args.push_back(in(random_f32(y, gen)));
      float* xv = args[0].tensor.data<float>();
      // X's padded lanes may hold any finite value (ops/layout_ops.cc): their weights are zero.
      for (int64_t i = 0; i < args[0].tensor.numel(); ++i) {
        if ((i / (c.h * c.w * block)) % x[1] * block + i % block >= c.c) xv[i] = 1e30f;
      }
      // NaN and Inf in real channels, and a run of denormals.
      xv[5 * block + 1] = std::numeric_limits<float>::quiet_NaN();
      xv[(c.w + 2) * block + 3] = -std::numeric_limits<float>::infinity();
      for (int i = 40 * static_cast<int>(block); i < 44 * static_cast<int>(block); ++i) {
        if (i % block < c.c) xv[i] = 1e-40f;
      }
      const Attributes attrs = {{"kernel_shape", Ints{c.kh, c.kw}},
                                {"strides", Ints{c.stride, c.stride}},
                                {"dilations", Ints{c.dilation, c.dilation}},
                                {"pads", c.pads},
                                {"epilogue", c.epilogue},
                                {"block", block}};
      SCOPED_TRACE(str_cat("block ", block, " x", dims_to_string(x), " m", c.m, " k", c.kh, "x", c.kw, " stride ",
                           c.stride, " dilation ", c.dilation));
      auto node = make_node("BlockedConv", args, attrs);
      ASSERT_NE(node, nullptr);
      // The block must be the dispatched vector's: 8 floats on AVX2, 16 with AVX-512.
      if (!direct_conv_kernel().supports(node->context())) continue;
      auto kernel = direct_conv_kernel().create(node->context());
      ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();
      EXPECT_EQ((*kernel)->name(), "cpu.conv");
      const Tensor want = node->run(*make_reference_kernel(*node->node));
      const Tensor got = node->run(**kernel);
      EXPECT_LE(blocked_relative_error(got, want, y, c.m), 1e-5) << (*kernel)->implementation();
      ++tested;
      // The table takes it exactly where the target prefers it to oneDNN, after the tap regions
      // of a dilated conv that reads much padding and Winograd's kernel for the 3x3 ones it takes.
      auto table = create_kernel(node->context());
      ASSERT_TRUE(table.is_ok());
      const bool winograd = winograd_conv_kernel().supports(node->context()) && winograd_conv_wins(active_target());
      if ((*table)->name() != "onednn.tap_regions" && !winograd) {
        EXPECT_EQ((*table)->name() == "cpu.conv", direct_conv_wins(active_target())) << (*table)->name();
      }
    }
  }
  EXPECT_EQ(tested, vector_is_a_block() ? static_cast<int>(cases.size()) : 0);  // one block per case is the vector's
}

// Declined: 1x1 windows (products) on one thread, large, strided or padded; groups, an odd
// number of output blocks, a block that is not the vector's, plain NCHW input.
TEST(DirectConv, DeclinesOtherConvs) {
  std::mt19937 gen(32);
  const int64_t block = active_target().channel_block();
  const auto supported = [&](Ints w, Ints x, Attributes attrs, int64_t group = 1, int64_t b = 0) {
    attrs["block"] = b == 0 ? block : b;
    attrs["group"] = group;
    auto node = make_node("BlockedConv", {in(random_f32(x, gen)), cst(random_f32(w, gen))}, attrs);
    EXPECT_NE(node, nullptr);
    return node != nullptr && direct_conv_kernel().supports(node->context());
  };
  const Attributes same = {{"pads", Ints{1, 1, 1, 1}}};
  // The vector's block: the only one the kernel takes (the test's target caps the dispatch too).
  const bool vector_block = supported({4 * block, 2 * block, 3, 3}, blocked_dims(1, 2 * block, 8, 8, block), same);
  EXPECT_EQ(vector_block, vector_is_a_block());
  const int64_t other = block == 8 ? 16 : 8;
  EXPECT_FALSE(supported({4 * other, 2 * other, 3, 3}, blocked_dims(1, 2 * other, 8, 8, other), same, 1, other));
  {
    const ScopedOmpThreads one(1);
    EXPECT_FALSE(supported({4 * block, 2 * block, 1, 1}, blocked_dims(1, 2 * block, 8, 8, block), {}));
  }
  const ScopedOmpThreads two(2);
  EXPECT_EQ(supported({4 * block, 2 * block, 1, 1}, blocked_dims(1, 2 * block, 8, 8, block), {}), vector_is_a_block());
  // 2^20 multiply-adds at most: 64 x 64 channels on 16 x 16 is 2^20, on 16 x 17 more.
  EXPECT_EQ(supported({64, 64, 1, 1}, blocked_dims(1, 64, 16, 16, block), {}), vector_is_a_block());
  EXPECT_FALSE(supported({64, 64, 1, 1}, blocked_dims(1, 64, 16, 17, block), {}));
  EXPECT_FALSE(
      supported({4 * block, 2 * block, 1, 1}, blocked_dims(1, 2 * block, 8, 8, block), {{"strides", Ints{2, 2}}}));
  EXPECT_FALSE(
      supported({4 * block, 2 * block, 1, 1}, blocked_dims(1, 2 * block, 8, 8, block), {{"pads", Ints{1, 1, 1, 1}}}));
  EXPECT_FALSE(supported({4 * block, block, 3, 3}, blocked_dims(1, 2 * block, 8, 8, block), same, 2));
  EXPECT_FALSE(supported({3 * block, 2 * block, 3, 3}, blocked_dims(1, 2 * block, 8, 8, block), same));
  EXPECT_FALSE(supported({4 * block, 3, 3, 3}, {1, 3, 8, 8}, same));
}

// A conv net (3x3 conv + BN + ReLU, a residual 3x3 conv, a 5x5 stride-2 conv, which cpu.winograd
// does not take) at every level against eager mode, on random inputs and with a NaN and an Inf
// pixel.
TEST(DirectConv, ConvNetAtEveryLevelMatchesEagerMode) {
  const std::string text = R"(graph @main opset 13 (%x: f32[1,16,20,20]) {
  %w1: f32[32,16,3,3] = const splat 0.03
  %b1: f32[32] = const splat 0.1
  %c1: f32[1,32,20,20] = Conv(%x, %w1, %b1) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]}
  %r1: f32[1,32,20,20] = Relu(%c1)
  %w2: f32[32,32,3,3] = const splat -0.02
  %c2: f32[1,32,20,20] = Conv(%r1, %w2) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]}
  %s: f32[1,32,20,20] = Add(%c2, %r1)
  %r2: f32[1,32,20,20] = Relu(%s)
  %w3: f32[16,32,5,5] = const splat 0.01
  %c3: f32[1,16,10,10] = Conv(%r2, %w3) {kernel_shape = [5, 5], pads = [2, 2, 2, 2], strides = [2, 2]}
  return %c3
})";
  const float inf = std::numeric_limits<float>::infinity();
  for (const auto& r : testing_graphs::compile_at_every_level(text, 7, 45, 20 * 20 * 3 + 100, inf)) {
    SCOPED_TRACE(str_cat("level ", static_cast<int>(r.level), r.specials ? " with NaN and Inf" : ""));
    EXPECT_LE(r.run.diff, 1e-5);
    const bool expected = r.level == OptLevel::kO3 && vector_is_a_block() && direct_conv_wins(active_target());
    EXPECT_EQ(r.run.steps_running("cpu.conv") > 0, expected) << ::testing::PrintToString(r.run.steps);
  }
}

}  // namespace
}  // namespace opfuse
