// The O3 layout choice: the exact solver (passes/layout_choice.h) against brute force and
// hand-worked cases, the layout pass with injected conv and reorder timings, and with the
// default estimates (EstimatingLayoutTimer).
#include "passes/layout_choice.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "ir/text_format.h"
#include "passes/layout_measure.h"
#include "passes/pass.h"
#include "passes/tuning_record.h"
#include "ops/eager.h"
#include "pipelines/pipeline.h"
#include "runtime/session.h"

namespace opfuse {
namespace {

constexpr double kFixed = 1e6;  // a cost that pins a node to the other label

TEST(LayoutChoiceTest, OneConvSwitchesOnlyWhenItPaysForBothReorders) {
  // A -> B -> C; B is 0.08 faster on label 1; a switch costs a reorder in and one out.
  LayoutProblem p;
  p.cost = {{1, kFixed}, {1.0, 0.92}, {1, kFixed}};
  p.groups = {{{0, 1}, 0.05}, {{1, 2}, 0.05}};
  EXPECT_EQ(solve_layouts(p), (std::vector<int>{0, 0, 0}));  // 0.08 < 0.10
  p.groups = {{{0, 1}, 0.03}, {{1, 2}, 0.03}};
  EXPECT_EQ(solve_layouts(p), (std::vector<int>{0, 1, 0}));  // 0.08 > 0.06
  EXPECT_NEAR(total_cost(p, {0, 1, 0}), 1 + 0.92 + 1 + 0.06, 1e-9);
}

TEST(LayoutChoiceTest, ARunOfSmallGainsAmortisesTheReorders) {
  // X -> A -> B -> C -> Y with X, Y pinned to label 0: each of A, B, C alone gains 0.04 < 2 x 0.05,
  // together 0.12 > 0.10 (a greedy walk one node at a time never switches).
  LayoutProblem p;
  p.cost = {{0, kFixed}, {1, 0.96}, {1, 0.96}, {1, 0.96}, {0, kFixed}};
  for (int i = 0; i < 4; ++i) p.groups.push_back({{i, i + 1}, 0.05});
  EXPECT_EQ(solve_layouts(p), (std::vector<int>{0, 1, 1, 1, 0}));
}

TEST(LayoutChoiceTest, ATensorReadByTwoSwitchedReadersIsReorderedOnce) {
  // P (pinned 0) feeds R1 and R2, each 0.04 faster on label 1; one shared reorder of 0.07.
  LayoutProblem p;
  p.cost = {{0, kFixed}, {1, 0.96}, {1, 0.96}};
  p.groups = {{{0, 1, 2}, 0.07}};
  EXPECT_EQ(solve_layouts(p), (std::vector<int>{0, 1, 1}));  // 0.08 > 0.07
  EXPECT_NEAR(total_cost(p, {0, 1, 0}), 0 + 0.96 + 1 + 0.07, 1e-9);
  p.groups = {{{0, 1, 2}, 0.09}};
  EXPECT_EQ(solve_layouts(p), (std::vector<int>{0, 0, 0}));
}

TEST(LayoutChoiceTest, TiesKeepLabelZero) {
  LayoutProblem p;
  p.cost = {{1, 1}, {2, 2}};
  p.groups = {{{0, 1}, 0.5}};
  EXPECT_EQ(solve_layouts(p), (std::vector<int>{0, 0}));
}

TEST(LayoutChoiceTest, MatchesBruteForceOnRandomProblems) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 2 + trial % 9;
    LayoutProblem p;
    for (int i = 0; i < n; ++i) p.cost.push_back({u(rng), u(rng)});
    const int groups = static_cast<int>(u(rng) * 2 * n);
    for (int g = 0; g < groups; ++g) {
      LayoutProblem::Group group;
      for (int i = 0; i < n; ++i) {
        if (u(rng) < 0.35) group.members.push_back(i);
      }
      group.cost = u(rng) * 0.5;
      p.groups.push_back(group);
    }
    double best = 1e300;
    for (int mask = 0; mask < (1 << n); ++mask) {
      std::vector<int> labels(n);
      for (int i = 0; i < n; ++i) labels[i] = (mask >> i) & 1;
      best = std::min(best, total_cost(p, labels));
    }
    EXPECT_NEAR(total_cost(p, solve_layouts(p)), best, 1e-9) << "trial " << trial;
  }
}

// ---------------------------------------------------------------- the pass, injected timings

class FakeTimer : public LayoutTimer {
 public:
  std::map<std::string, std::array<double, 2>> conv;  // node name -> {nChw16c, nhwc}
  double reorder = 0.1;
  double conv_ms(const Node& node, int64_t block, bool) override {
    auto it = conv.find(node.name());
    const auto t = it == conv.end() ? std::array<double, 2>{1.0, 2.0} : it->second;
    return block == 0 ? t[1] : t[0];
  }
  double reorder_ms(const std::vector<int64_t>&, int64_t) override { return reorder; }
};

constexpr const char* kChain = R"(graph @main opset 13 (%x: f32[1,3,12,12]) {
  %w1: f32[32,3,3,3] = const splat 0.125
  %w2: f32[32,32,3,3] = const splat 0.0625
  %w3: f32[16,32,1,1] = const splat 0.25
  %c1: f32[1,32,12,12] = Conv(%x, %w1) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #conv1
  %r1: f32[1,32,12,12] = Relu(%c1) #relu1
  %c2: f32[1,32,12,12] = Conv(%r1, %w2) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #conv2
  %r2: f32[1,32,12,12] = Tanh(%c2) #tanh2
  %c3: f32[1,16,12,12] = Conv(%r2, %w3) {kernel_shape = [1, 1]} #conv3
  return %c3
}
)";

// The timer the pipeline uses, still owned by the test.
std::shared_ptr<LayoutTimer> borrowed(LayoutTimer& timer) { return {std::shared_ptr<void>(), &timer}; }

struct Layouts {
  std::map<std::string, int64_t> conv_block;  // BlockedConv name -> block
  int reblocks = 0;
};

// The layout pass on `g` with `timer`'s costs.
void run_layout_on(Graph& g, LayoutTimer& timer) {
  PipelineOptions options;
  options.verify_after_each = true;
  options.passes = std::vector<std::string>{"layout", "dce"};
  options.layout_timer = borrowed(timer);
  PassContext ctx;
  ctx.target.isa = IsaTier::kAvx512Core;  // blocked means nChw16c, whatever the host
  EXPECT_TRUE(run_pipeline(g, OptLevel::kO3, options, ctx).is_ok());
}

Layouts run_layout(LayoutTimer& timer) {
  auto g = parse_graph(kChain);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  run_layout_on(*g, timer);
  Layouts out;
  for (const Node* n : g->nodes()) {
    if (n->op_type() == "BlockedConv") out.conv_block[n->name()] = std::get<int64_t>(n->attrs.at("block"));
    out.reblocks += n->op_type() == "Reblock";
  }
  return out;
}

// Answers with another timer's timings and keeps them by signature, as `opfuse tune` does.
struct RecordingTimer : LayoutTimer {
  explicit RecordingTimer(LayoutTimer& inner) : inner(inner) {}
  double conv_ms(const Node& node, int64_t block, bool x_plain) override {
    return timings[*conv_timing_key(node, block, x_plain)] = inner.conv_ms(node, block, x_plain);
  }
  double reorder_ms(const std::vector<int64_t>& dims, int64_t block) override {
    return timings[reorder_timing_key(dims, block)] = inner.reorder_ms(dims, block);
  }
  LayoutTimer& inner;
  std::map<std::string, double> timings;
};

// A tuning record's timings are replayed with no timer injected and nothing measured: the same
// choice as the measurement gave, and the report says where it came from.
TEST(LayoutChoicePassTest, TuningRecordReplaysRecordedTimings) {
  FakeTimer fake;
  fake.conv["conv2"] = {1.0, 0.5};
  fake.reorder = 0.1;
  RecordingTimer recording(fake);
  const Layouts measured = run_layout(recording);
  ASSERT_EQ(measured.conv_block.at("conv2"), 0);
  auto record = std::make_shared<TuningRecord>();
  record->use_layouts = true;
  record->layout_ms = recording.timings;

  auto g = parse_graph(kChain);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  PipelineOptions options;
  options.passes = std::vector<std::string>{"layout", "dce"};
  options.fusion.tuning = record;
  PassContext ctx;
  ctx.target.isa = IsaTier::kAvx512Core;
  ASSERT_TRUE(run_pipeline(*g, OptLevel::kO3, options, ctx).is_ok());
  std::map<std::string, int64_t> blocks;
  for (const Node* n : g->nodes()) {
    if (n->op_type() == "BlockedConv") blocks[n->name()] = std::get<int64_t>(n->attrs.at("block"));
  }
  EXPECT_EQ(blocks, measured.conv_block);
  bool said = false;
  for (const PassDecision& d : ctx.decisions) said |= d.what.find("(tuning record: ") != std::string::npos;
  EXPECT_TRUE(said) << "no layout decision names the tuning record";

  // Without use_layouts the record's timings are ignored: the estimate keeps every conv blocked.
  auto unused = std::make_shared<TuningRecord>(*record);
  unused->use_layouts = false;
  auto g2 = parse_graph(kChain);
  ASSERT_TRUE(g2.is_ok());
  options.fusion.tuning = unused;
  PassContext ctx2;
  ctx2.target.isa = IsaTier::kAvx512Core;
  ASSERT_TRUE(run_pipeline(*g2, OptLevel::kO3, options, ctx2).is_ok());
  for (const Node* n : g2->nodes()) {
    if (n->op_type() == "BlockedConv") {
      EXPECT_EQ(std::get<int64_t>(n->attrs.at("block")), 16) << n->name();
    }
  }
}

TEST(LayoutChoicePassTest, ConvSwitchesToNhwcWhenItsGainCoversTheReorders) {
  FakeTimer timer;
  timer.conv["conv2"] = {1.0, 0.5};  // 0.5 faster on nhwc
  timer.reorder = 0.1;               // two reorders: 0.2
  const Layouts l = run_layout(timer);
  EXPECT_EQ(l.conv_block, (std::map<std::string, int64_t>{{"conv1", 16}, {"conv2", 0}, {"conv3", 16}}));
  EXPECT_EQ(l.reblocks, 2);
}

TEST(LayoutChoicePassTest, ConvStaysBlockedWhenReordersCostMoreThanItGains) {
  FakeTimer timer;
  timer.conv["conv2"] = {1.0, 0.5};
  timer.reorder = 0.3;  // two reorders: 0.6 > 0.5
  const Layouts l = run_layout(timer);
  EXPECT_EQ(l.conv_block, (std::map<std::string, int64_t>{{"conv1", 16}, {"conv2", 16}, {"conv3", 16}}));
  EXPECT_EQ(l.reblocks, 0);
}

TEST(LayoutChoicePassTest, NhwcTailNeedsOneReorder) {
  FakeTimer timer;
  timer.conv["conv2"] = {1.0, 0.8};
  timer.conv["conv3"] = {1.0, 0.8};
  timer.reorder = 0.3;  // one reorder (0.3) for 0.4 gained
  const Layouts l = run_layout(timer);
  EXPECT_EQ(l.conv_block, (std::map<std::string, int64_t>{{"conv1", 16}, {"conv2", 0}, {"conv3", 0}}));
  EXPECT_EQ(l.reblocks, 1);
}

// Two convs read the same 3-channel image, one on nhwc (a ToBlocked of the image) and one on
// nChw16c: the blocked one reads the image itself (oneDNN's first-conv kernel), not a Reblock of
// the nhwc copy (fr_gender: an 80 us reorder with padded channels).
TEST(LayoutChoicePassTest, BlockedConvReadsAnImageOtherConvsReadOnNhwc) {
  FakeTimer timer;
  timer.conv["on_nhwc"] = {1.0, 0.5};
  timer.conv["on_blocked"] = {0.5, 1.0};
  auto g = parse_graph(R"(graph @main opset 13 (%x: f32[1,3,12,12]) {
  %w1: f32[16,3,3,3] = const splat 0.125
  %w2: f32[16,3,3,3] = const splat 0.25
  %a: f32[1,16,12,12] = Conv(%x, %w1) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #on_nhwc
  %b: f32[1,16,12,12] = Conv(%x, %w2) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #on_blocked
  %s: f32[1,16,12,12] = Add(%a, %b)
  return %s
})");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  run_layout_on(*g, timer);
  const Node* nhwc = g->find_node("on_nhwc");
  const Node* blocked = g->find_node("on_blocked");
  ASSERT_TRUE(nhwc && blocked);
  EXPECT_EQ(std::get<int64_t>(nhwc->attrs.at("block")), 0);
  EXPECT_EQ(nhwc->input(0)->producer()->op_type(), "ToBlocked");
  EXPECT_EQ(std::get<int64_t>(blocked->attrs.at("block")), 16);
  EXPECT_EQ(blocked->input(0)->name(), "x");
  for (const Node* n : g->nodes()) {
    if (n->op_type() == "Reblock") {
      EXPECT_NE(n->input(0), nhwc->input(0)) << "the image is reordered twice";
    }
  }
}

// The passes cannot create kernels (they sit below the kernel layer): asked to measure without a
// timer from above, the layout pass says so instead of silently estimating.
TEST(LayoutChoicePassTest, MeasuringWithoutATimerIsAnError) {
  auto g = parse_graph(kChain);
  ASSERT_TRUE(g.is_ok());
  PipelineOptions options;
  options.passes = std::vector<std::string>{"layout"};
  options.fusion.measure_layouts = true;
  PassContext ctx;
  const Status s = run_pipeline(*g, OptLevel::kO3, options, ctx);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("measure_layouts needs a layout timer"), std::string::npos) << s.message();
}

TEST(LayoutChoicePassTest, MixedLayoutsComputeWhatEagerComputes) {
  FakeTimer timer;
  timer.conv["conv2"] = {1.0, 0.5};
  timer.reorder = 0.1;
  auto g = parse_graph(kChain);
  ASSERT_TRUE(g.is_ok());
  std::vector<float> x(3 * 12 * 12);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  TensorMap inputs = {{"x", Tensor::from_vector<float>({1, 3, 12, 12}, x)}};
  auto expected = run_eager(*g, inputs);
  ASSERT_TRUE(expected.is_ok()) << expected.status().message();
  SessionOptions options;
  options.mode = ExecutionMode::kGraph;
  options.level = OptLevel::kO3;
  options.pipeline.layout_timer = borrowed(timer);
  auto session = Session::create(g->clone(), options);
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  auto got = session->run(inputs);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  auto plan = session->plan_for(inputs);
  ASSERT_TRUE(plan.is_ok());
  int reorders = 0;
  for (const std::string& step : (*plan)->describe_steps()) reorders += step.find("Reblock") != std::string::npos;
  EXPECT_EQ(reorders, 2) << "conv2 runs nhwc between nChw16c neighbours";
  const Tensor& e = expected->at("c3");
  const Tensor& a = got->at("c3");
  ASSERT_EQ(e.dims(), a.dims());
  const auto ev = e.to_float_vector(), av = a.to_float_vector();
  for (size_t i = 0; i < ev.size(); ++i) ASSERT_NEAR(av[i], ev[i], 1e-3 * (1 + std::fabs(ev[i]))) << i;
}

// ---------------------------------------------------------------- the default estimates

// Layouts of `text`'s convs after the layout pass with the default, estimated costs for `tier`.
std::map<std::string, int64_t> estimated_layouts(const std::string& text, IsaTier tier = IsaTier::kAvx512Core) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  PipelineOptions options;
  options.verify_after_each = true;
  options.passes = std::vector<std::string>{"layout", "dce"};
  PassContext ctx;
  ctx.target.isa = tier;
  EXPECT_TRUE(run_pipeline(*g, OptLevel::kO3, options, ctx).is_ok());
  std::map<std::string, int64_t> out;
  for (const Node* n : g->nodes()) {
    if (n->op_type() == "BlockedConv") out[n->name()] = std::get<int64_t>(n->attrs.at("block"));
  }
  for (const PassDecision& d : ctx.decisions) {
    if (d.pass == "layout" && d.applied && d.what.rfind("Conv '", 0) == 0) {
      EXPECT_NE(d.what.find(str_cat("(estimated nChw", ctx.target.channel_block(), "c ")), std::string::npos) << d.what;
    }
  }
  return out;
}

// A `k`x`k` conv #window on 64 channels at 28x28 (`group` 1: dense, 231 MFLOP at 3x3; 64:
// depthwise) and a 1x1 conv #pointwise after it.
std::string window_then_pointwise(int group, int k = 3) {
  return str_cat(R"(graph @main opset 13 (%x: f32[1,64,28,28]) {
  %w1: f32[64,)", 64 / group, ",", k, ",", k, R"(] = const splat 0.01
  %w2: f32[64,64,1,1] = const splat 0.02
  %c1: f32[1,64,28,28] = Conv(%x, %w1) {group = )", group, ", kernel_shape = [", k, ", ", k, "], pads = [", k / 2, ", ",
                 k / 2, ", ", k / 2, ", ", k / 2, R"(]} #window
  %r1: f32[1,64,28,28] = Relu(%c1) #relu
  %c2: f32[1,64,28,28] = Conv(%r1, %w2) {kernel_shape = [1, 1]} #pointwise
  return %c2
})");
}

TEST(LayoutEstimateTest, DenseWindowConvRunsNhwcAndThePointwiseConvFollowsIt) {
  // The 5x5 conv is estimated 1.25x slower on nChw16c; the 1x1 conv costs the same in both, so
  // it follows rather than pay a reorder.
  EXPECT_EQ(estimated_layouts(window_then_pointwise(1, 5)),
            (std::map<std::string, int64_t>{{"window", 0}, {"pointwise", 0}}));
}

TEST(LayoutEstimateTest, WinogradConvRunsBlockedAndThePointwiseConvFollowsIt) {
  // A 3x3 conv of stride 1 runs as cpu.winograd on nChw16c, estimated at 0.8x its nhwc time.
  EXPECT_EQ(estimated_layouts(window_then_pointwise(1, 3)),
            (std::map<std::string, int64_t>{{"window", 16}, {"pointwise", 16}}));
}

TEST(LayoutEstimateTest, DepthwiseAndPointwiseConvsStayOnNchw16c) {
  EXPECT_EQ(estimated_layouts(window_then_pointwise(64)),
            (std::map<std::string, int64_t>{{"window", 16}, {"pointwise", 16}}));
}

// Two 3x3 branches concatenated on channels: nhwc would make each conv faster, but the Concat
// would then copy (on nChw16c it runs in place), and on these small maps the copy costs more.
constexpr const char* kBranchesIntoConcat = R"(graph @main opset 13 (%x: f32[1,32,8,8]) {
  %w1: f32[32,32,3,3] = const splat 0.01
  %w2: f32[32,32,3,3] = const splat 0.02
  %w3: f32[16,64,1,1] = const splat 0.03
  %a: f32[1,32,8,8] = Conv(%x, %w1) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #left
  %b: f32[1,32,8,8] = Conv(%x, %w2) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #right
  %c: f32[1,64,8,8] = Concat(%a, %b) {axis = 1} #cat
  %y: f32[1,16,8,8] = Conv(%c, %w3) {kernel_shape = [1, 1]} #mix
  return %y
}
)";

TEST(LayoutEstimateTest, ConcatOnChannelsKeepsItsBranchesOnNchw16c) {
  EXPECT_EQ(estimated_layouts(kBranchesIntoConcat),
            (std::map<std::string, int64_t>{{"left", 16}, {"right", 16}, {"mix", 16}}));
}

TEST(LayoutEstimateTest, EstimatesFollowTheRules) {
  auto g = parse_graph(window_then_pointwise(1, 5));
  auto g3 = parse_graph(window_then_pointwise(1, 3));
  ASSERT_TRUE(g.is_ok() && g3.is_ok());
  Target avx512;
  avx512.isa = IsaTier::kAvx512Core;
  EstimatingLayoutTimer t(avx512);
  const Node* dense = g->find_node("window");
  const Node* winograd = g3->find_node("window");
  const Node* pointwise = g->find_node("pointwise");
  ASSERT_NE(dense, nullptr);
  ASSERT_NE(winograd, nullptr);
  ASSERT_NE(pointwise, nullptr);
  EXPECT_NEAR(t.conv_ms(*dense, 16, false), 1.25 * t.conv_ms(*dense, 0, false), 1e-12);
  EXPECT_NEAR(t.conv_ms(*winograd, 16, false), 0.8 * t.conv_ms(*winograd, 0, false), 1e-12);
  EXPECT_EQ(t.conv_ms(*dense, 16, true), t.conv_ms(*dense, 0, false));  // a first conv reading the image
  EXPECT_EQ(t.conv_ms(*winograd, 16, true), t.conv_ms(*winograd, 0, false));
  EXPECT_EQ(t.conv_ms(*pointwise, 16, false), t.conv_ms(*pointwise, 0, false));
  EXPECT_NEAR(t.conv_ms(*pointwise, 0, false), 2.0 * 64 * 64 * 28 * 28 / 3e8, 1e-12);
  EXPECT_LT(t.reorder_ms({1, 64, 28, 28}, 16), t.reorder_ms({1, 64, 56, 56}, 16));
}

// A dilated dense conv: on AVX-512 blocked pays oneDNN's reorders into its own layout; on AVX2 it
// runs in place on nChw8c (cpu.conv) while nhwc costs twice the undilated estimate (oneDNN's
// jit or gemm kernels there), so the blocked layout wins.
TEST(LayoutEstimateTest, DilatedConvsFollowTheTarget) {
  auto g = parse_graph(R"(graph @main opset 13 (%x: f32[1,16,30,40]) {
  %w: f32[16,16,3,3] = const splat 0.01
  %d: f32[1,16,30,40] = Conv(%x, %w) {kernel_shape = [3, 3], pads = [5, 5, 5, 5], dilations = [5, 5]} #dilated
  %u: f32[1,16,30,40] = Conv(%d, %w) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #plain
  return %u
})");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const Node* dilated = g->find_node("dilated");
  const Node* plain = g->find_node("plain");
  ASSERT_NE(dilated, nullptr);
  ASSERT_NE(plain, nullptr);
  Target avx512;
  avx512.isa = IsaTier::kAvx512Core;
  EstimatingLayoutTimer wide(avx512);
  EXPECT_EQ(wide.conv_ms(*dilated, 0, false), wide.conv_ms(*plain, 0, false));
  EXPECT_NEAR(wide.conv_ms(*dilated, 16, false),
              1.25 * wide.conv_ms(*plain, 0, false) + wide.reorder_ms({1, 16, 30, 40}, 16) * 2, 1e-12);
  Target avx2;
  avx2.isa = IsaTier::kAvx2;
  EstimatingLayoutTimer narrow(avx2);
  EXPECT_NEAR(narrow.conv_ms(*dilated, 0, false), 2.0 * narrow.conv_ms(*plain, 0, false), 1e-12);
  EXPECT_EQ(narrow.conv_ms(*dilated, 8, false), narrow.conv_ms(*plain, 8, false));
  EXPECT_LT(narrow.conv_ms(*dilated, 8, false), narrow.conv_ms(*dilated, 0, false));
}

}  // namespace
}  // namespace opfuse
