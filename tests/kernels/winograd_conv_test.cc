// "cpu.winograd" (kernels/cpu/winograd_conv_kernel.cc): 3x3 stride-1 BlockedConvs by F(2x2, 3x3)
// against the reference BlockedConv: padded and unpadded, odd output sides, odd input channel
// counts (with large values in X's padded lanes), panels of two and four output blocks, several
// chunks of tile rows and a shorter last one, small images split by panels instead of chunks,
// several images, epilogues and a residual; NaN, Inf
// and denormals in one chunk (computed by cpu.conv's loop, the other chunks by the transforms)
// and everywhere; what it declines; and where the table picks it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>

#include "core/target.h"
#include "kernels/cpu/direct_conv_kernel.h"
#include "kernels/cpu/winograd_conv_kernel.h"
#include "kernels/kernel.h"
#include "kernels/omp_threads.h"
#include "kernels/onednn_test_util.h"
#include "passes/layout_measure.h"

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
  int64_t n, c, m, h, w;
  Ints pads;  // top, left, bottom, right
  std::vector<std::string> epilogue;
  int64_t stride = 1;
};

enum class Specials { kNone, kOneChunk, kLastRow, kAll };

// The kernel's output on the case against the reference's; false when the kernel declines it.
bool check_case(const Case& case8, Specials specials, std::mt19937& gen, std::string* implementation = nullptr) {
  const int64_t block = active_target().channel_block();
  // Channel counts are written for block 8; they scale with the block, so that each case has the
  // same number of blocks (and padded lanes) on every tier.
  Case c = case8;
  c.c *= std::max<int64_t>(1, block / 8);
  c.m *= std::max<int64_t>(1, block / 8);
  const bool residual = !c.epilogue.empty() && c.epilogue[0] == "add";
  const int64_t oh = (c.h + c.pads[0] + c.pads[2] - 3) / c.stride + 1;
  const int64_t ow = (c.w + c.pads[1] + c.pads[3] - 3) / c.stride + 1;
  const Ints x = blocked_dims(c.n, c.c, c.h, c.w, block), y = blocked_dims(c.n, c.m, oh, ow, block);
  std::vector<Arg> args = {in(random_f32(x, gen)), cst(random_f32({c.m, c.c, 3, 3}, gen, 0.3f)),
                           cst(random_f32({c.m}, gen))};
  if (residual) args.push_back(in(random_f32(y, gen)));
  float* xv = args[0].tensor.data<float>();
  const int64_t plane = c.h * c.w * block;
  for (int64_t i = 0; i < args[0].tensor.numel(); ++i) {
    const bool padded_lane = (i / plane) % x[1] * block + i % block >= c.c;
    // X's padded lanes may hold any finite value (ops/layout_ops.cc): their filters are zero.
    if (padded_lane) xv[i] = 1e30f;
    if (specials == Specials::kAll && !padded_lane) xv[i] = std::numeric_limits<float>::quiet_NaN();
  }
  if (specials == Specials::kLastRow) {
    // An infinity in the last row: the last chunk falls back, its tiles hanging over the image.
    xv[((c.h - 2) * c.w + c.w / 3) * block] = std::numeric_limits<float>::infinity();
  }
  if (specials == Specials::kOneChunk) {
    // NaN, Inf and denormals in the first rows only: one chunk falls back, the others do not.
    xv[5 * block + 1] = std::numeric_limits<float>::quiet_NaN();
    xv[(c.w + 2) * block + 3] = -std::numeric_limits<float>::infinity();
    for (int64_t i = 40 * block; i < 44 * block; ++i) {
      if (i % block < c.c) xv[i] = 1e-40f;
    }
  }
  const Attributes attrs = {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{c.stride, c.stride}}, {"pads", c.pads},
                            {"epilogue", c.epilogue}, {"block", block}};
  auto node = make_node("BlockedConv", args, attrs);
  EXPECT_NE(node, nullptr);
  if (node == nullptr || !winograd_conv_kernel().supports(node->context())) return false;
  auto kernel = winograd_conv_kernel().create(node->context());
  EXPECT_TRUE(kernel.is_ok()) << kernel.status().message();
  if (!kernel.is_ok()) return false;
  EXPECT_EQ((*kernel)->name(), "cpu.winograd");
  if (implementation != nullptr) *implementation = (*kernel)->implementation();
  const Tensor want = node->run(*make_reference_kernel(*node->node));
  const Tensor got = node->run(**kernel);
  // F(2x2, 3x3) rounds a little differently from the direct sum: a few ulp of the largest output.
  EXPECT_LE(blocked_relative_error(got, want, y, c.m), 1e-5) << (*kernel)->implementation();
  // Padded output lanes are zero, as the reference's, also where cpu.conv's loop computed them
  // from a NaN or Inf (their zero weights times it are NaN, which the next conv would spread).
  int64_t nonzero_padding = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    if ((i / (oh * ow * block)) % y[1] * block + i % block >= c.m && got.data<float>()[i] != 0.0f) ++nonzero_padding;
  }
  EXPECT_EQ(nonzero_padding, 0);
  if (specials == Specials::kAll) {
    const float* out = got.data<float>();
    int64_t numbers = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      if ((i / (oh * ow * block)) % y[1] * block + i % block < c.m && !std::isnan(out[i])) ++numbers;
    }
    EXPECT_EQ(numbers, 0);
  }
  // The table takes it wherever the target prefers it to the direct kernels.
  auto table = create_kernel(node->context());
  EXPECT_TRUE(table.is_ok());
  if (table.is_ok()) {
    EXPECT_EQ((*table)->name() == "cpu.winograd", winograd_conv_wins(active_target()));
  }
  return true;
}

TEST(WinogradConv, MatchesTheReference) {
  std::mt19937 gen(41);
  const std::vector<Case> cases = {
      {1, 16, 32, 14, 14, {1, 1, 1, 1}, {"relu"}},         // four output blocks per panel
      {1, 12, 16, 10, 12, {1, 1, 1, 1}, {}},               // two per panel, 12 input channels
      {2, 16, 32, 8, 6, {1, 1, 1, 1}, {"add", "relu"}},    // two images, a residual
      {1, 16, 16, 10, 10, {0, 0, 0, 0}, {"sigmoid_mul"}},  // unpadded: X read in place
      {1, 8, 32, 9, 9, {2, 0, 1, 3}, {"clip:0:6"}},        // asymmetric pads
      {1, 16, 32, 7, 7, {1, 1, 1, 1}, {"relu"}},           // odd sides: the last tiles hang over
      {2, 24, 16, 9, 14, {1, 1, 1, 1}, {"add", "relu"}},   // an odd height only, a residual
      {1, 16, 16, 15, 12, {0, 0, 0, 0}, {}},               // unpadded, 13 x 10: copied to whole tiles
      // Output 52x52 of 16 -> 16 channels: chunks of several tile rows and a shorter last one.
      {1, 16, 16, 52, 52, {1, 1, 1, 1}, {"hardswish"}},
      // 72 input channels: the products' weights in more than one run (accumulated in M).
      {1, 72, 64, 12, 12, {1, 1, 1, 1}, {}},
      // Stride 2: even and odd sides, padded and not, asymmetric pads, several chunks, a residual.
      {1, 16, 32, 14, 14, {1, 1, 1, 1}, {"relu"}, 2},
      {2, 12, 16, 13, 11, {1, 1, 1, 1}, {"add", "relu"}, 2},
      {1, 16, 16, 15, 12, {0, 0, 0, 0}, {"sigmoid_mul"}, 2},
      {1, 8, 32, 17, 9, {2, 0, 1, 3}, {"clip:0:6"}, 2},
      {1, 16, 16, 104, 104, {1, 1, 1, 1}, {"hardswish"}, 2},
      {1, 72, 64, 24, 24, {1, 1, 1, 1}, {}, 2},
      {1, 16, 16, 15, 15, {0, 0, 1, 1}, {"relu"}, 2},  // TensorFlow's "SAME": padded at the end only
      // 12 output channels: padded output lanes, zero whatever the input.
      {1, 16, 12, 14, 14, {1, 1, 1, 1}, {"relu"}},
      {1, 16, 12, 15, 15, {0, 0, 1, 1}, {"sigmoid_mul"}, 2},
  };
  const ScopedOmpThreads threads(2);
  int tested = 0;
  for (const Case& c : cases) {
    for (const Specials s : {Specials::kNone, Specials::kOneChunk, Specials::kLastRow}) {
      SCOPED_TRACE(str_cat("n", c.n, " c", c.c, " m", c.m, " ", c.h, "x", c.w, " stride ", c.stride,
                           s == Specials::kOneChunk ? " specials" : s == Specials::kLastRow ? " inf in the last row" : ""));
      tested += check_case(c, s, gen) ? 1 : 0;
    }
  }
  EXPECT_EQ(tested, vector_is_a_block() ? static_cast<int>(3 * cases.size()) : 0);
}

// A small image with large filters (ResNet-50's 512 -> 512 channels at 7x7): chunks of its 4 tile
// rows would each stream the transformed filters (over 1 MB here, above half of any L2 this runs
// on), so the image is one chunk and the threads split the products by panels of output blocks.
// Specials in its first rows send the whole image to cpu.conv's loop; NaN everywhere as well.
TEST(WinogradConv, SmallImagesWithLargeFiltersAreSplitByPanels) {
  std::mt19937 gen(45);
  const ScopedOmpThreads threads(2);
  for (const Specials s : {Specials::kNone, Specials::kOneChunk, Specials::kAll}) {
    for (const Case& c : {Case{1, 256, 128, 7, 7, {1, 1, 1, 1}, {"add", "relu"}},
                          Case{1, 256, 128, 8, 6, {0, 0, 0, 0}, {}}}) {
      SCOPED_TRACE(str_cat(c.h, "x", c.w, " specials ", static_cast<int>(s)));
      std::string implementation;
      EXPECT_EQ(check_case(c, s, gen, &implementation), vector_is_a_block());
      if (vector_is_a_block()) {
        EXPECT_NE(implementation.find("split by panels"), std::string::npos) << implementation;
      }
    }
  }
}

// An input of NaN only: every output is NaN (cpu.conv's loop on every chunk).
TEST(WinogradConv, NaNInputGivesNaNEverywhere) {
  std::mt19937 gen(42);
  const ScopedOmpThreads threads(2);
  EXPECT_EQ(check_case({1, 16, 32, 20, 20, {1, 1, 1, 1}, {"relu"}}, Specials::kAll, gen), vector_is_a_block());
}

// Declined: other windows, strides, dilations, groups, and convs cpu.conv
// does not take (an odd number of output blocks, a block that is not the vector's).
TEST(WinogradConv, DeclinesOtherConvs) {
  std::mt19937 gen(43);
  const int64_t block = active_target().channel_block();
  const auto supported = [&](Ints w, Ints x, Attributes attrs, int64_t group = 1, int64_t b = 0) {
    attrs["block"] = b == 0 ? block : b;
    attrs["group"] = group;
    if (attrs.count("pads") == 0) attrs["pads"] = Ints{1, 1, 1, 1};
    auto node = make_node("BlockedConv", {in(random_f32(x, gen)), cst(random_f32(w, gen))}, attrs);
    EXPECT_NE(node, nullptr);
    return node != nullptr && winograd_conv_kernel().supports(node->context());
  };
  const Ints x8 = blocked_dims(1, 2 * block, 8, 8, block);
  EXPECT_EQ(supported({4 * block, 2 * block, 3, 3}, x8, {}), vector_is_a_block());
  EXPECT_FALSE(supported({4 * block, 2 * block, 5, 5}, x8, {{"pads", Ints{2, 2, 2, 2}}}));
  EXPECT_FALSE(supported({4 * block, 2 * block, 1, 1}, x8, {{"pads", Ints{0, 0, 0, 0}}}));
  EXPECT_EQ(supported({4 * block, 2 * block, 3, 3}, x8, {{"strides", Ints{2, 2}}}), vector_is_a_block());
  EXPECT_FALSE(supported({4 * block, 2 * block, 3, 3}, x8, {{"strides", Ints{3, 3}}}));
  EXPECT_FALSE(supported({4 * block, 2 * block, 3, 3}, x8, {{"strides", Ints{1, 2}}}));
  EXPECT_FALSE(supported({4 * block, 2 * block, 3, 3}, x8, {{"dilations", Ints{2, 2}}, {"pads", Ints{2, 2, 2, 2}}}));
  EXPECT_FALSE(supported({4 * block, 2 * block, 3, 1}, x8, {{"pads", Ints{1, 0, 1, 0}}}));
  EXPECT_FALSE(supported({4 * block, block, 3, 3}, x8, {}, 2));
  EXPECT_FALSE(supported({3 * block, 2 * block, 3, 3}, x8, {}));
  const int64_t other = block == 8 ? 16 : 8;
  EXPECT_FALSE(supported({4 * other, 2 * other, 3, 3}, blocked_dims(1, 2 * other, 8, 8, other), {}, 1, other));
}

// The layout pass's estimate (passes/layout_measure.cc) counts a conv as cpu.winograd exactly
// where the kernel takes its blocked form: windows, strides, groups, odd output blocks, and the
// decline of large filters over maps of fewer than 6 tiles.
TEST(WinogradConv, LayoutEstimateKnowsWhereItRuns) {
  if (!vector_is_a_block()) GTEST_SKIP() << "no block of one vector on this tier";
  std::mt19937 gen(44);
  const int64_t block = active_target().channel_block();
  const ScopedOmpThreads threads(2);
  Target target = active_target();
  target.cores = 2;
  int winograd = 0, other = 0;
  for (const int64_t c : {block, 2 * block, 32 * block}) {
    for (const int64_t m : {2 * block, 3 * block, 32 * block}) {
      for (const int64_t side : {4, 7, 14, 30}) {
        for (const int64_t stride : {1, 2, 3}) {
          for (const int64_t group : {1, 2}) {
            const Ints pads = {1, 1, 1, 1}, strides = {stride, stride};
            const Ints w = {m, c / group, 3, 3};
            Attributes attrs = {{"kernel_shape", Ints{3, 3}}, {"strides", strides}, {"pads", pads}, {"group", group}};
            auto conv = make_node("Conv", {in(random_f32({1, c, side, side}, gen)), cst(random_f32(w, gen))}, attrs);
            attrs["block"] = block;
            auto blocked = make_node("BlockedConv",
                                     {in(random_f32(blocked_dims(1, c, side, side, block), gen)), cst(random_f32(w, gen))},
                                     attrs);
            ASSERT_TRUE(conv != nullptr && blocked != nullptr);
            SCOPED_TRACE(str_cat("c", c, " m", m, " side ", side, " stride ", stride, " group ", group));
            const bool runs = winograd_conv_kernel().supports(blocked->context());
            EXPECT_EQ(estimated_as_winograd(*conv->node, block, target), runs);
            EXPECT_FALSE(estimated_as_winograd(*conv->node, 0, target));  // nhwc has no Winograd
            (runs ? winograd : other) += 1;
          }
        }
      }
    }
  }
  // Both answers occur, the decline of large filters among the refusals.
  EXPECT_GT(winograd, 0);
  EXPECT_GT(other, 0);
}

// Not a test: cpu.winograd against cpu.conv and oneDNN's blocked conv on ResNet-50's and
// YOLOv5s's 3x3 convs of stride 1 and 2 (ReLU / SiLU epilogues), each on four inputs in turn, the
// kernels alternating over 9 rounds of 10 passes at 2 threads; medians in microseconds, and the
// products' rate (16 or 25 multiply-adds per tile and channel pair) in GFLOP/s:
//   ./build/tests/opfuse_tests --gtest_also_run_disabled_tests --gtest_filter='WinogradBench*'
TEST(WinogradBench, DISABLED_ModelShapes) {
  if (!vector_is_a_block()) GTEST_SKIP() << "cpu.winograd needs the layout's block to be one vector";
  std::mt19937 gen(9);
  struct Shape {
    const char* what;
    int64_t c, m, side, stride;  // side: the input's
    std::vector<std::string> epilogue;
  };
  const std::vector<Shape> shapes = {
      {"resnet50 layer1 64@56", 64, 64, 56, 1, {"relu"}},
      {"resnet50 layer2 128@28", 128, 128, 28, 1, {"relu"}},
      {"resnet50 layer3 256@14", 256, 256, 14, 1, {"relu"}},
      {"resnet50 layer4 512@7", 512, 512, 7, 1, {"relu"}},
      {"resnet50 layer2.0 128@56/2", 128, 128, 56, 2, {"relu"}},
      {"resnet50 layer3.0 256@28/2", 256, 256, 28, 2, {"relu"}},
      {"resnet50 layer4.0 512@14/2", 512, 512, 14, 2, {"relu"}},
      {"yolov5s b2 32@160", 32, 32, 160, 1, {"sigmoid_mul"}},
      {"yolov5s b4 64@80", 64, 64, 80, 1, {"sigmoid_mul"}},
      {"yolov5s b6 128@40", 128, 128, 40, 1, {"sigmoid_mul"}},
      {"yolov5s b8 256@20", 256, 256, 20, 1, {"sigmoid_mul"}},
      {"yolov5s b1 32>64@320/2", 32, 64, 320, 2, {"sigmoid_mul"}},
      {"yolov5s b3 64>128@160/2", 64, 128, 160, 2, {"sigmoid_mul"}},
      {"yolov5s b5 128>256@80/2", 128, 256, 80, 2, {"sigmoid_mul"}},
      {"yolov5s b7 256>512@40/2", 256, 512, 40, 2, {"sigmoid_mul"}},
      {"yolov5s h18 128@80/2", 128, 128, 80, 2, {"sigmoid_mul"}},
  };
  const int64_t block = active_target().channel_block();
  const ScopedOmpThreads threads(2);
  for (const Shape& s : shapes) {
    const Ints x = blocked_dims(1, s.c, s.side, s.side, block);
    const Attributes attrs = {{"kernel_shape", Ints{3, 3}},
                              {"strides", Ints{s.stride, s.stride}},
                              {"pads", Ints{1, 1, 1, 1}},
                              {"epilogue", s.epilogue},
                              {"block", block}};
    std::vector<std::unique_ptr<onednn_test::OneNode>> nodes;
    const Tensor w = random_f32({s.m, s.c, 3, 3}, gen, 0.1f), b = random_f32({s.m}, gen);
    for (int i = 0; i < 4; ++i) nodes.push_back(make_node("BlockedConv", {in(random_f32(x, gen)), cst(w), cst(b)}, attrs));
    KernelCompileContext ctx = nodes[0]->context();
    ctx.exact_non_finite = false;  // as in a model's plan for finite inputs
    std::vector<std::unique_ptr<Kernel>> kernels;
    for (const char* name : {"cpu.winograd", "cpu.conv", "onednn.blocked_conv"}) {
      ctx.kernel = name;
      auto k = create_kernel(ctx);
      ASSERT_TRUE(k.is_ok()) << k.status().message();
      kernels.push_back(std::move(*k));
    }
    std::vector<Tensor> outs = nodes[0]->make_outputs();
    Tensor* y = &outs[0];
    auto time = [&](const Kernel& k) { return onednn_test::us_per_run(k, nodes, y, 10); };
    std::vector<std::vector<double>> us(kernels.size());
    for (int round = 0; round < 10; ++round) {
      for (size_t k = 0; k < kernels.size(); ++k) {
        const double t = time(*kernels[k]);
        if (round > 0) us[k].push_back(t);
      }
    }
    const int64_t out = (s.side - 1) / s.stride + 1, tile_side = (out + 1) / 2;
    const double tiles = static_cast<double>(tile_side * tile_side);
    const double product_flops = (s.stride == 1 ? 16.0 : 25.0) * tiles * static_cast<double>(s.c * s.m) * 2;
    std::printf("%-26s", s.what);
    for (size_t k = 0; k < kernels.size(); ++k) {
      std::sort(us[k].begin(), us[k].end());
      std::printf("  %s %7.1f us", kernels[k]->name().data(), us[k][4]);
      if (k == 0) std::printf(" (products %5.0f GFLOP/s, %s)", product_flops / us[k][4] / 1e3, kernels[k]->implementation().c_str());
    }
    std::printf("\n");
  }
}

}  // namespace
}  // namespace opfuse
