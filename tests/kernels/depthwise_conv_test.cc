// "cpu.dwconv" (kernels/cpu/depthwise_conv_kernel.cc): depthwise BlockedConvs on the vector's
// block against the reference BlockedConv: 3x3, 5x5 and 5x3 windows, strides 1 and 2, symmetric,
// asymmetric and no padding, odd channel counts (garbage in X's padded lanes), rows narrower and
// wider than a tile, several images, Relu and Clip in registers, other epilogues and a residual
// after, NaN / Inf / denormal inputs, on one thread and two; what it declines; where the table
// picks it; and a depthwise net at every level.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "core/target.h"
#include "graph_test_util.h"
#include "kernels/cpu/depthwise_conv_kernel.h"
#include "kernels/kernel.h"
#include "kernels/omp_threads.h"
#include "kernels/onednn_test_util.h"
#include "kernels/packed_weight_cache.h"

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
  int64_t n, c, h, w, kh, kw, stride;
  Ints pads;  // top, left, bottom, right
  std::vector<std::string> epilogue;
};

TEST(DepthwiseConv, MatchesTheReference) {
  std::mt19937 gen(41);
  const std::vector<Case> cases = {
      {1, 64, 16, 16, 3, 3, 1, {1, 1, 1, 1}, {"relu"}},               // 16 = 8 + 8, parallel on two threads
      {1, 12, 9, 13, 3, 3, 2, {1, 1, 1, 1}, {"clip:0:6"}},            // odd channels, stride 2, 7 = a 7-wide tile
      {2, 16, 7, 7, 5, 5, 1, {2, 2, 2, 2}, {"hardswish"}},            // 5x5, two images, epilogue after
      {1, 24, 6, 11, 5, 5, 2, {2, 1, 1, 2}, {"add", "relu"}},         // asymmetric pads, a residual
      {1, 8, 4, 4, 3, 3, 1, {0, 0, 0, 0}, {}},                        // no padding
      {1, 32, 20, 3, 3, 3, 1, {1, 1, 1, 1}, {"sigmoid_mul"}},         // rows narrower than a tile
      {1, 16, 10, 21, 5, 3, 1, {2, 1, 2, 1}, {}},                     // 5x3, 21 = 8 + 8 + 5
      {1, 16, 8, 37, 3, 3, 2, {1, 1, 1, 1}, {"relu"}},                // stride 2, 19 = 8 + 8 + 3
      {3, 40, 9, 10, 3, 3, 1, {1, 1, 1, 1}, {"relu"}},                // images x blocks x bands in each order
      {1, 24, 58, 60, 3, 3, 1, {1, 1, 1, 1}, {"relu"}},               // a wide map: two bands a thread at most
      {1, 16, 115, 113, 3, 3, 2, {1, 1, 1, 1}, {"sigmoid_mul"}},      // wide, stride 2, epilogue after
  };
  int tested = 0;
  for (const int threads : {1, 2}) {
    const ScopedOmpThreads scoped(threads);
    for (const Case& c : cases) {
      for (int64_t block : {int64_t{8}, int64_t{16}}) {
        const bool residual = !c.epilogue.empty() && c.epilogue[0] == "add";
        const int64_t oh = (c.h + c.pads[0] + c.pads[2] - c.kh) / c.stride + 1;
        const int64_t ow = (c.w + c.pads[1] + c.pads[3] - c.kw) / c.stride + 1;
        const Ints x = blocked_dims(c.n, c.c, c.h, c.w, block), y = blocked_dims(c.n, c.c, oh, ow, block);
        std::vector<Arg> args = {in(random_f32(x, gen)), cst(random_f32({c.c, 1, c.kh, c.kw}, gen, 0.5f)),
                                 cst(random_f32({c.c}, gen))};
        if (residual) args.push_back(in(random_f32(y, gen)));
        float* xv = args[0].tensor.data<float>();
        // X's padded lanes may hold any finite value (ops/layout_ops.cc): their weights are zero.
        for (int64_t i = 0; i < args[0].tensor.numel(); ++i) {
          if ((i / (c.h * c.w * block)) % x[1] * block + i % block >= c.c) xv[i] = 1e30f;
        }
        // NaN and Inf in real channels (the Relu and Clip in registers keep NaN), and denormals.
        xv[5 * block + 1] = std::numeric_limits<float>::quiet_NaN();
        xv[(c.w + 2) * block + 3] = -std::numeric_limits<float>::infinity();
        for (int64_t i = 9 * block; i < 12 * block; ++i) {
          if (i % block < c.c) xv[i] = 1e-40f;
        }
        const Attributes attrs = {{"kernel_shape", Ints{c.kh, c.kw}}, {"strides", Ints{c.stride, c.stride}},
                                  {"pads", c.pads},  {"group", c.c},
                                  {"epilogue", c.epilogue},         {"block", block}};
        SCOPED_TRACE(str_cat(threads, " threads, block ", block, " x", dims_to_string(x), " k", c.kh, "x", c.kw,
                             " stride ", c.stride));
        auto node = make_node("BlockedConv", args, attrs);
        ASSERT_NE(node, nullptr);
        // The block must be the dispatched vector's.
        if (!depthwise_conv_kernel().supports(node->context())) continue;
        auto kernel = depthwise_conv_kernel().create(node->context());
        ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();
        EXPECT_EQ((*kernel)->name(), "cpu.dwconv");
        const Tensor want = node->run(*make_reference_kernel(*node->node));
        const Tensor got = node->run(**kernel);
        EXPECT_LE(blocked_relative_error(got, want, y, c.c), 1e-5) << (*kernel)->implementation();
        ++tested;
        auto table = create_kernel(node->context());
        ASSERT_TRUE(table.is_ok());
        EXPECT_EQ((*table)->name() == "cpu.dwconv", depthwise_conv_preferred(active_target(), node->context()))
            << (*table)->name();
      }
    }
  }
  EXPECT_EQ(tested, vector_is_a_block() ? 2 * static_cast<int>(cases.size()) : 0);  // one block per case is the vector's
}

// Declined: a channel multiplier above 1, grouped (not depthwise) convs, 1-, 4- and 7-wide
// windows, stride 3, unequal strides, dilation, another block. Then where the table prefers it.
TEST(DepthwiseConv, DeclinesOtherConvs) {
  std::mt19937 gen(42);
  const int64_t block = active_target().channel_block();
  const auto supported = [&](Ints w, int64_t c, int64_t hw, Attributes attrs, int64_t group, int64_t b = 0) {
    const int64_t lanes = b == 0 ? block : b;
    attrs["block"] = lanes;
    attrs["group"] = group;
    if (!attrs.count("pads")) attrs["pads"] = Ints{w[2] / 2, w[3] / 2, w[2] / 2, w[3] / 2};
    auto node = make_node("BlockedConv", {in(random_f32(blocked_dims(1, c, hw, hw, lanes), gen)), cst(random_f32(w, gen))},
                          attrs);
    EXPECT_NE(node, nullptr);
    return node != nullptr && depthwise_conv_kernel().supports(node->context());
  };
  EXPECT_EQ(supported({32, 1, 3, 3}, 32, 8, {}, 32), vector_is_a_block());
  EXPECT_EQ(supported({32, 1, 5, 5}, 32, 8, {{"strides", Ints{2, 2}}}, 32), vector_is_a_block());
  EXPECT_FALSE(supported({64, 1, 3, 3}, 32, 8, {}, 32));  // two outputs per channel
  EXPECT_FALSE(supported({32, 2, 3, 3}, 32, 8, {}, 16));  // groups of two channels
  EXPECT_FALSE(supported({32, 1, 1, 1}, 32, 8, {}, 32));
  EXPECT_FALSE(supported({32, 1, 4, 4}, 32, 8, {{"pads", Ints{0, 0, 0, 0}}}, 32));
  EXPECT_FALSE(supported({32, 1, 7, 7}, 32, 8, {}, 32));
  EXPECT_FALSE(supported({32, 1, 3, 3}, 32, 9, {{"strides", Ints{3, 3}}}, 32));
  EXPECT_FALSE(supported({32, 1, 3, 3}, 32, 8, {{"strides", Ints{1, 2}}}, 32));
  EXPECT_FALSE(supported({32, 1, 3, 3}, 32, 8, {{"dilations", Ints{2, 2}}, {"pads", Ints{2, 2, 2, 2}}}, 32));
  const int64_t other = block == 8 ? 16 : 8;
  EXPECT_FALSE(supported({32, 1, 3, 3}, 32, 8, {}, 32, other));
  EXPECT_EQ(supported({64, 1, 3, 3}, 64, 112, {}, 64), vector_is_a_block());  // any size

  // Preferred below AVX-512 up to 2^18 multiply-adds (64 channels x 3x3 on 21x21 is 254016, on
  // 22x22 more); from AVX-512 up at stride 1 with four channel blocks or more (64 channels; not
  // 24) on output maps of 56x56 or more, or whatever the map when oneDNN would run part of the
  // epilogue as a pass of its own.
  const auto preferred = [&](IsaTier tier, int64_t hw, int64_t stride, std::vector<std::string> epilogue = {},
                             bool exact_non_finite = false, int64_t c = 64) {
    Target target = active_target();
    target.isa = tier;
    auto node = make_node("BlockedConv",
                          {in(random_f32(blocked_dims(1, c, hw, hw, block), gen)), cst(random_f32({c, 1, 3, 3}, gen))},
                          {{"block", block},
                           {"group", c},
                           {"pads", Ints{1, 1, 1, 1}},
                           {"strides", Ints{stride, stride}},
                           {"epilogue", epilogue}});
    EXPECT_NE(node, nullptr);
    if (node == nullptr) return false;
    KernelCompileContext ctx = node->context();
    ctx.exact_non_finite = exact_non_finite;
    return depthwise_conv_preferred(target, ctx);
  };
  const bool b = vector_is_a_block();
  EXPECT_EQ(preferred(IsaTier::kAvx2, 21, 1), b);
  EXPECT_FALSE(preferred(IsaTier::kAvx2, 22, 1));
  EXPECT_FALSE(preferred(IsaTier::kAvx2, 56, 1, {"sigmoid_mul"}));
  EXPECT_FALSE(preferred(IsaTier::kAvx512Core, 55, 1, {"relu"}));
  EXPECT_EQ(preferred(IsaTier::kAvx512Core, 56, 1, {"relu"}), b);
  EXPECT_EQ(preferred(IsaTier::kAvx512CoreBf16, 112, 1), b);
  EXPECT_FALSE(preferred(IsaTier::kAvx512Core, 112, 2));  // a 56x56 output, but stride 2
  EXPECT_FALSE(preferred(IsaTier::kAvx512Core, 112, 1, {}, false, 24));  // 2 or 3 blocks
  EXPECT_EQ(preferred(IsaTier::kAvx512Core, 14, 1, {"sigmoid_mul"}), b);  // oneDNN: conv, then a pass
  EXPECT_EQ(preferred(IsaTier::kAvx512Core, 14, 1, {"relu"}, true), b);   // its relu would drop NaN
  EXPECT_FALSE(preferred(IsaTier::kAvx512Core, 14, 2, {"sigmoid_mul"}));
  EXPECT_FALSE(preferred(IsaTier::kAvx512Core, 14, 1, {"sigmoid_mul"}, false, 24));
}

// Plans for other map sizes (a session's plan per input shape) share the packed filters and
// bias through the session's cache (kernels/packed_weight_cache.h) and still compute the reference.
TEST(DepthwiseConv, KernelsForOtherMapSizesShareThePackedFilters) {
  if (!vector_is_a_block()) GTEST_SKIP() << "no cpu.dwconv on this target";
  std::mt19937 gen(7);
  const int64_t block = active_target().channel_block(), c = 40;
  const Tensor w = random_f32({c, 1, 3, 3}, gen, 0.5f), bias = random_f32({c}, gen);
  PackedWeightCache cache;
  const ScopedPackedWeightCache scope(&cache);
  for (int64_t hw : {9, 14}) {
    SCOPED_TRACE(str_cat(hw, "x", hw));
    auto node = make_node("BlockedConv",
                          {in(random_f32(blocked_dims(1, c, hw, hw, block), gen)), cst(w.clone()), cst(bias.clone())},
                          {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"group", c}, {"block", block}});
    ASSERT_NE(node, nullptr);
    auto kernel = depthwise_conv_kernel().create(node->context());
    ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();
    const Tensor want = node->run(*make_reference_kernel(*node->node));
    EXPECT_LE(blocked_relative_error(node->run(**kernel), want, blocked_dims(1, c, hw, hw, block), c), 1e-5);
  }
  EXPECT_EQ(cache.size(), 2u);   // the filters and the bias, packed once
  EXPECT_EQ(cache.reused(), 2);  // and found by the second kernel
}

// MobileNet-style blocks (1x1 expand + ReLU6, 3x3 depthwise + ReLU6, 1x1 project, a residual
// add; a stride-2 depthwise conv; a 5x5 one with HardSwish) at every level against eager mode,
// on random inputs and with a NaN and an Inf pixel.
TEST(DepthwiseConv, DepthwiseNetAtEveryLevelMatchesEagerMode) {
  const std::string text = R"(graph @main opset 13 (%x: f32[1,16,12,12]) {
  %lo: f32[] = const splat 0
  %hi: f32[] = const splat 6
  %we: f32[48,16,1,1] = const splat 0.05
  %e0: f32[1,48,12,12] = Conv(%x, %we) {kernel_shape = [1, 1]}
  %e: f32[1,48,12,12] = Clip(%e0, %lo, %hi)
  %wd: f32[48,1,3,3] = const splat 0.1
  %bd: f32[48] = const splat 0.02
  %d0: f32[1,48,12,12] = Conv(%e, %wd, %bd) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], group = 48}
  %d: f32[1,48,12,12] = Clip(%d0, %lo, %hi)
  %wp: f32[16,48,1,1] = const splat -0.03
  %p: f32[1,16,12,12] = Conv(%d, %wp) {kernel_shape = [1, 1]}
  %s: f32[1,16,12,12] = Add(%p, %x)
  %ws: f32[16,1,3,3] = const splat 0.07
  %t0: f32[1,16,6,6] = Conv(%s, %ws) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2], group = 16}
  %t: f32[1,16,6,6] = Relu(%t0)
  %w5: f32[16,1,5,5] = const splat 0.04
  %f0: f32[1,16,6,6] = Conv(%t, %w5) {kernel_shape = [5, 5], pads = [2, 2, 2, 2], group = 16}
  %f: f32[1,16,6,6] = HardSwish(%f0)
  return %f
})";
  const float inf = std::numeric_limits<float>::infinity();
  for (const auto& r : testing_graphs::compile_at_every_level(text, 9, 45, 12 * 12 * 3 + 7, inf)) {
    SCOPED_TRACE(str_cat("level ", static_cast<int>(r.level), r.specials ? " with NaN and Inf" : ""));
    EXPECT_LE(r.run.diff, 1e-5);
    // Small maps (12x12, 6x6) and few channel blocks: preferred below AVX-512 only.
    const bool expected = r.level == OptLevel::kO3 && vector_is_a_block() && active_target().isa < IsaTier::kAvx512Core;
    EXPECT_EQ(r.run.steps_running("cpu.dwconv") > 0, expected) << ::testing::PrintToString(r.run.steps);
  }
}

// Not a test: cpu.dwconv against oneDNN's blocked conv on the depthwise convs of MobileNetV2,
// MobileNetV3-Large, EfficientNet-B0 and BlazeFace (depthwise_conv_preferred's figures), oneDNN
// with the post-ops it takes in a plan for finite inputs. Each shape runs on
// eight inputs in turn (read from L2 or L3, as after the conv before), the two kernels
// alternating over 11 rounds of 25 passes; medians in microseconds:
//   ./build/tests/opfuse_tests --gtest_also_run_disabled_tests --gtest_filter='DepthwiseConvBench*'
TEST(DepthwiseConvBench, DISABLED_ModelShapes) {
  std::mt19937 gen(7);
  struct Shape {
    const char* what;
    int64_t c, h, k, stride;
    std::vector<std::string> epilogue;
  };
  const std::vector<Shape> shapes = {
      {"mv3 f1 16@112 k3s1 relu", 16, 112, 3, 1, {"relu"}},
      {"mv3 f2 64@112 k3s2 relu", 64, 112, 3, 2, {"relu"}},
      {"mv3 f3 72@56 k3s1 relu", 72, 56, 3, 1, {"relu"}},
      {"mv3 f4 72@56 k5s2 relu", 72, 56, 5, 2, {"relu"}},
      {"mv3 f5 120@28 k5s1 relu", 120, 28, 5, 1, {"relu"}},
      {"mv3 f7 240@28 k3s2 hsw", 240, 28, 3, 2, {"hardswish"}},
      {"mv3 f8 200@14 k3s1 hsw", 200, 14, 3, 1, {"hardswish"}},
      {"mv3 f11 480@14 k3s1 hsw", 480, 14, 3, 1, {"hardswish"}},
      {"mv3 f12 672@14 k3s1 hsw", 672, 14, 3, 1, {"hardswish"}},
      {"mv3 f13 672@14 k5s2 hsw", 672, 14, 5, 2, {"hardswish"}},
      {"mv3 f14 960@7 k5s1 hsw", 960, 7, 5, 1, {"hardswish"}},
      {"mv2 f1 32@112 k3s1 clip", 32, 112, 3, 1, {"clip:0:6"}},
      {"mv2 f3 144@56 k3s1 clip", 144, 56, 3, 1, {"clip:0:6"}},
      {"mv2 f4 144@56 k3s2 clip", 144, 56, 3, 2, {"clip:0:6"}},
      {"mv2 f5 192@28 k3s1 clip", 192, 28, 3, 1, {"clip:0:6"}},
      {"mv2 f8 384@14 k3s1 clip", 384, 14, 3, 1, {"clip:0:6"}},
      {"mv2 f15 960@7 k3s1 clip", 960, 7, 3, 1, {"clip:0:6"}},
      {"eff f2.1 144@56 k3s1 silu", 144, 56, 3, 1, {"sigmoid_mul"}},
      {"eff f3.1 240@28 k5s1 silu", 240, 28, 5, 1, {"sigmoid_mul"}},
      {"eff f4.1 480@14 k3s1 silu", 480, 14, 3, 1, {"sigmoid_mul"}},
      {"eff f5.1 672@14 k5s1 silu", 672, 14, 5, 1, {"sigmoid_mul"}},
      {"eff f6.1 1152@7 k5s1 silu", 1152, 7, 5, 1, {"sigmoid_mul"}},
      {"blazeface 24@128 k3s1", 24, 128, 3, 1, {}},
      {"blazeface 24@64 k3s1", 24, 64, 3, 1, {}},
      {"blazeface 48@32 k3s1", 48, 32, 3, 1, {}},
      {"blazeface 96@16 k3s1", 96, 16, 3, 1, {}},
  };
  if (!vector_is_a_block()) GTEST_SKIP() << "cpu.dwconv needs the layout's block to be one vector";
  const int64_t block = active_target().channel_block();
  for (const Shape& s : shapes) {
    const int64_t p = s.k / 2, o = (s.h + 2 * p - s.k) / s.stride + 1;
    const Ints x = blocked_dims(1, s.c, s.h, s.h, block);
    const Attributes attrs = {{"kernel_shape", Ints{s.k, s.k}}, {"strides", Ints{s.stride, s.stride}},
                              {"pads", Ints{p, p, p, p}},           {"group", s.c},
                              {"epilogue", s.epilogue},             {"block", block}};
    // Eight distinct inputs in turn: each run reads its X from L2 or L3, as after the conv before.
    std::vector<std::unique_ptr<onednn_test::OneNode>> nodes;
    const Tensor w = random_f32({s.c, 1, s.k, s.k}, gen, 0.5f), b = random_f32({s.c}, gen);
    for (int i = 0; i < 8; ++i) {
      nodes.push_back(make_node("BlockedConv", {in(random_f32(x, gen)), cst(w), cst(b)}, attrs));
    }
    KernelCompileContext ctx = nodes[0]->context();
    ctx.exact_non_finite = false;  // as in a model's plan for finite inputs
    auto ours = depthwise_conv_kernel().create(ctx);
    ctx.kernel = "onednn.blocked_conv";
    auto theirs = create_kernel(ctx);
    ASSERT_TRUE(ours.is_ok() && theirs.is_ok());
    std::vector<Tensor> outs = nodes[0]->make_outputs();
    Tensor* y = &outs[0];
    auto time = [&](const Kernel& k) { return onednn_test::us_per_run(k, nodes, y, 25); };
    time(**ours), time(**theirs);
    std::vector<double> a, t;
    for (int round = 0; round < 11; ++round) a.push_back(time(**ours)), t.push_back(time(**theirs));
    std::sort(a.begin(), a.end());
    std::sort(t.begin(), t.end());
    std::printf("%-28s out %3lld  cpu.dwconv %7.1f us | %s %7.1f us  ratio %.2f\n", s.what, static_cast<long long>(o),
                a[5], (*theirs)->implementation().c_str(), t[5], a[5] / t[5]);
  }
}

}  // namespace
}  // namespace opfuse
