// "onednn.tap_regions" (kernels/cpu/onednn_tap_regions.cc): padded dilated BlockedConvs split
// into regions of in-range taps, against the reference BlockedConv on every layout, with
// epilogues, a residual, several images, odd channel counts and NaN / Inf / denormal inputs;
// and where it is chosen.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "core/target.h"
#include "kernels/cpu/onednn_tap_regions.h"
#include "kernels/kernel.h"
#include "graph_test_util.h"
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

struct Case {
  int64_t n, c, m, h, w, k, dilation;
  std::vector<std::string> epilogue;
};

TEST(TapRegions, DilatedPaddedConvsMatchTheReference) {
  std::mt19937 gen(21);
  const std::vector<Case> cases = {
      {1, 16, 16, 16, 16, 3, 6, {"relu"}},              // ASPP-like: 3x3 bands per axis
      {1, 24, 40, 12, 10, 3, 8, {}},                    // odd channel counts, 12x10 map
      {2, 16, 8, 9, 9, 3, 6, {"add", "relu"}},          // two images, a residual
      {1, 8, 16, 7, 11, 5, 3, {"hardswish"}},           // 5x5 taps
      {1, 32, 16, 20, 20, 3, 16, {"sigmoid_mul"}},      // dilation 16 on 20: one tap in the middle band
  };
  int chosen = 0, tested = 0;
  for (int64_t block : {int64_t{0}, int64_t{8}, int64_t{16}}) {
    for (const Case& c : cases) {
      const int64_t pad = c.dilation * (c.k / 2);
      const bool residual = !c.epilogue.empty() && c.epilogue[0] == "add";
      const Ints y = blocked_dims(c.n, c.m, c.h, c.w, block);
      std::vector<Arg> args = {in(random_f32(blocked_dims(c.n, c.c, c.h, c.w, block), gen)),
                               cst(random_f32({c.m, c.c, c.k, c.k}, gen, 0.3f)), cst(random_f32({c.m}, gen))};
      if (residual) args.push_back(in(random_f32(y, gen)));
      // NaN, Inf (in real channels: padded lanes hold finite values) and a run of denormals in X.
      float* xv = args[0].tensor.data<float>();
      const int64_t x_lanes = args[0].tensor.dims()[4];
      xv[5 * x_lanes + 1] = std::numeric_limits<float>::quiet_NaN();
      xv[x_lanes + 3] = std::numeric_limits<float>::infinity();
      for (int i = 100; i < 140; ++i) xv[i] = 1e-40f;
      const Attributes attrs = {{"kernel_shape", Ints{c.k, c.k}}, {"dilations", Ints{c.dilation, c.dilation}},
                                {"pads", Ints{pad, pad, pad, pad}}, {"epilogue", c.epilogue}, {"block", block}};
      SCOPED_TRACE(str_cat("block ", block, " x", dims_to_string(args[0].tensor.dims()), " m", c.m, " k", c.k,
                           " dilation ", c.dilation));
      auto node = make_node("BlockedConv", args, attrs);
      ASSERT_NE(node, nullptr);
      // Every region must run a direct kernel: the target's own block always has one; others
      // (nChw16c below AVX-512, nhwc on some tiers) may have only reference loops, and are declined.
      if (!onednn::onednn_tap_regions_kernel().supports(node->context())) {
        EXPECT_NE(block, active_target().channel_block());
        continue;
      }
      auto kernel = onednn::onednn_tap_regions_kernel().create(node->context());
      ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();
      EXPECT_EQ((*kernel)->name(), "onednn.tap_regions");
      const Tensor want = node->run(*make_reference_kernel(*node->node));
      const Tensor got = node->run(**kernel);
      EXPECT_LE(blocked_relative_error(got, want, y, c.m), 1e-5) << (*kernel)->implementation();
      ++tested;
      auto table = create_kernel(node->context());
      ASSERT_TRUE(table.is_ok());
      chosen += (*table)->name() == "onednn.tap_regions";
    }
  }
  EXPECT_GE(tested, static_cast<int>(cases.size()));  // at least the target's block, every case
  EXPECT_EQ(chosen, tested);                          // and the table takes it wherever it applies
}

// Not split: no dilation (even a 5x5 conv on a 6x6 map, which reads much padding), stride 2,
// groups, and a dilated conv whose taps mostly stay on the map.
TEST(TapRegions, DeclinesConvsThatReadLittlePadding) {
  std::mt19937 gen(22);
  const auto supported = [&](Ints w, Attributes attrs, int64_t hw = 16, int64_t group = 1) {
    attrs["block"] = int64_t{0};
    attrs["group"] = group;
    const Ints x = {1, 1, hw, hw, w[1] * group};
    auto node = make_node("BlockedConv", {in(random_f32(x, gen)), cst(random_f32(w, gen))}, attrs);
    EXPECT_NE(node, nullptr);
    return node != nullptr && onednn::onednn_tap_regions_kernel().supports(node->context());
  };
  EXPECT_TRUE(supported({8, 8, 3, 3}, {{"dilations", Ints{6, 6}}, {"pads", Ints{6, 6, 6, 6}}}));
  EXPECT_FALSE(supported({8, 8, 3, 3}, {{"pads", Ints{1, 1, 1, 1}}}));
  EXPECT_FALSE(supported({8, 8, 5, 5}, {{"pads", Ints{2, 2, 2, 2}}}, 6));  // 64% in range, but undilated
  EXPECT_FALSE(supported({8, 8, 3, 3}, {{"dilations", Ints{2, 2}}, {"pads", Ints{2, 2, 2, 2}}}, 64));
  EXPECT_FALSE(supported({8, 8, 3, 3}, {{"dilations", Ints{6, 6}}, {"pads", Ints{6, 6, 6, 6}}, {"strides", Ints{2, 2}}}));
  EXPECT_FALSE(supported({8, 4, 3, 3}, {{"dilations", Ints{6, 6}}, {"pads", Ints{6, 6, 6, 6}}}, 16, 2));
}

// An ASPP branch (dilated 3x3 conv + ReLU on a small map) at every level against eager mode, on
// random inputs and with a NaN and an Inf pixel: at O3 it runs split into tap regions.
TEST(TapRegions, AsppBranchAtEveryLevelMatchesEagerMode) {
  const std::string text = R"(graph @main opset 13 (%x: f32[1,16,16,16]) {
  %w: f32[16,16,3,3] = const splat 0.02
  %b: f32[16] = const splat 0.1
  %c: f32[1,16,16,16] = Conv(%x, %w, %b) {kernel_shape = [3, 3], dilations = [6, 6], pads = [6, 6, 6, 6]} #aspp
  %y: f32[1,16,16,16] = Relu(%c) #relu
  return %y
})";
  const float inf = -std::numeric_limits<float>::infinity();
  for (const auto& r : testing_graphs::compile_at_every_level(text, 5, 3, 16 * 16 + 40, inf)) {
    SCOPED_TRACE(str_cat("level ", static_cast<int>(r.level), r.specials ? " with NaN and Inf" : ""));
    EXPECT_LE(r.run.diff, 1e-5);
    const bool expected = r.level == OptLevel::kO3;
    EXPECT_EQ(r.run.steps_running("onednn.tap_regions") > 0, expected) << ::testing::PrintToString(r.run.steps);
  }
}

}  // namespace
}  // namespace opfuse
