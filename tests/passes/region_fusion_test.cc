// Region fusion: structural kernel counts (LayerNorm's decomposition, the erf-GELU chain, Softmax,
// the composite example), numerics of the fused graph against eager mode (the reference
// kernels), and the recorded decisions (applied with members and bytes, refused with reasons).
#include <gtest/gtest.h>

#include "graph_test_util.h"
#include "ir/text_format.h"
#include "ops/infer_shapes.h"
#include "runtime/compare.h"
#include "runtime/compiled_plan.h"
#include "ops/eager.h"
#include "pipelines/pipeline.h"
#include "runtime/session.h"

namespace opfuse {
namespace {

using testing_graphs::count_op;

struct Compiled {
  std::shared_ptr<const CompiledPlan> plan;
  double diff = 1e9;
};

// Compiles `text` at O2 (or with `config`) and compares its outputs with eager mode on random inputs.
Compiled compile_and_compare(const std::string& text, FusionConfig config = {}) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  const TensorMap inputs = testing_graphs::random_inputs(*g, 7);
  auto want = run_eager(*g, inputs);
  EXPECT_TRUE(want.is_ok()) << want.status().message();
  SessionOptions options;
  options.level = OptLevel::kO2;
  options.pipeline.verify_after_each = true;
  options.pipeline.fusion = config;
  auto session = Session::create(std::move(*g), options);
  EXPECT_TRUE(session.is_ok()) << session.status().message();
  Compiled c;
  auto plan = session->plan_for(inputs);
  EXPECT_TRUE(plan.is_ok()) << plan.status().message();
  if (!plan.is_ok()) return c;
  c.plan = *plan;
  auto got = session->run(inputs);
  EXPECT_TRUE(got.is_ok()) << got.status().message();
  if (got.is_ok() && want.is_ok()) c.diff = max_relative_difference(*got, *want);
  return c;
}

// What the passes decided and which kernels run: printed when a count is off.
std::string explain(const Compiled& c) {
  std::string s;
  if (!c.plan) return s;
  for (const PassDecision& d : c.plan->pass_decisions()) {
    s += str_cat(d.pass, d.applied ? " applied: " : " refused: ", d.what, " ", d.reason, "\n");
  }
  for (const std::string& step : c.plan->describe_steps()) s += step + "\n";
  return s;
}

// BERT's LayerNorm as exported by PyTorch: two ReduceMeans on the last axis plus elementwise ops.
const char* kLayerNorm = R"(graph @main opset 13 (%x: f32[2,5,48], %r: f32[2,5,48]) {
  %g: f32[48] = const splat 1.5
  %b: f32[48] = const splat 0.25
  %two: f32[] = const [2]
  %eps: f32[] = const [1e-12]
  %h: f32[2,5,48] = Add(%x, %r) #residual
  %m: f32[2,5,1] = ReduceMean(%h) {axes = [-1]} #mean
  %d: f32[2,5,48] = Sub(%h, %m) #sub
  %p: f32[2,5,48] = Pow(%d, %two) #pow
  %v: f32[2,5,1] = ReduceMean(%p) {axes = [-1]} #var
  %ve: f32[2,5,1] = Add(%v, %eps) #add_eps
  %s: f32[2,5,1] = Sqrt(%ve) #sqrt
  %n: f32[2,5,48] = Div(%d, %s) #div
  %y0: f32[2,5,48] = Mul(%n, %g) #scale
  %y: f32[2,5,48] = Add(%y0, %b) #shift
  return %y
})";

// With the layer_norm pattern on (the default) the decomposition becomes one LayerNormalization
// and the residual Add joins it: one dedicated kernel, faster than the generated region.
TEST(RegionFusionTest, LayerNormDecompositionWithResidualIsOneSkipLayerNorm) {
  Compiled c = compile_and_compare(kLayerNorm);
  ASSERT_TRUE(c.plan);
  EXPECT_EQ(c.plan->kernels_per_run(), 1u) << explain(c);
  EXPECT_EQ(count_op(c.plan->graph(), "SkipLayerNormalization"), 1);
  EXPECT_LE(c.diff, 1e-4);
}

// Region fusion alone (the pattern switched off) still makes it one generated kernel.
TEST(RegionFusionTest, LayerNormDecompositionWithResidualIsOneKernel) {
  FusionConfig no_pattern;
  no_pattern.disabled_rules = {"layer_norm"};
  Compiled c = compile_and_compare(kLayerNorm, no_pattern);
  ASSERT_TRUE(c.plan);
  EXPECT_EQ(c.plan->kernels_per_run(), 1u) << explain(c);
  EXPECT_EQ(count_op(c.plan->graph(), "FusedRegion"), 1);
  EXPECT_LE(c.diff, 1e-4);
  bool recorded = false;
  for (const PassDecision& d : c.plan->pass_decisions()) {
    if (d.rule == "region_fusion" && d.applied) {
      recorded = true;
      EXPECT_EQ(d.members.size(), 10u);
      EXPECT_EQ(d.result, "shift");
      EXPECT_GT(d.bytes_saved, 0);
    }
  }
  EXPECT_TRUE(recorded);
}

// expand_to_primitives keeps LayerNormalization and Softmax for their dedicated kernels (they
// beat the generated ones, docs/benchmarks.md): the neighbours fuse around them, and the
// decision says why.
bool kept_dedicated(const Compiled& c, const std::string& op) {
  for (const PassDecision& d : c.plan->pass_decisions()) {
    if (d.pass == "expand_to_primitives" && !d.applied && d.what.find(op) != std::string::npos &&
        d.reason.find("dedicated kernel") != std::string::npos) {
      return true;
    }
  }
  return false;
}

constexpr const char* kResidualLayerNorm = R"(graph @main opset 17 (%x: f32[3,7,33], %r: f32[3,7,33]) {
  %g: f32[33] = const splat 0.5
  %b: f32[33] = const splat -1
  %h: f32[3,7,33] = Add(%x, %r)
  %y: f32[3,7,33] = LayerNormalization(%h, %g, %b) {epsilon = 1e-5}
  %z: f32[3,7,33] = Relu(%y)
  return %z
})";

TEST(RegionFusionTest, LayerNormalizationKeepsItsDedicatedKernelNextToItsResidualRegion) {
  // The skip-LayerNorm pattern switched off: the Add stays a kernel of its own, and the
  // LayerNormalization keeps its dedicated kernel instead of being expanded into a region.
  FusionConfig no_skip;
  no_skip.disabled_rules = {"skip_layernorm"};
  Compiled c = compile_and_compare(kResidualLayerNorm, no_skip);
  ASSERT_TRUE(c.plan);
  EXPECT_EQ(c.plan->kernels_per_run(), 3u) << explain(c);  // Add, LayerNorm, Relu
  EXPECT_EQ(count_op(c.plan->graph(), "LayerNormalization"), 1);
  EXPECT_TRUE(kept_dedicated(c, "LayerNormalization")) << explain(c);
  EXPECT_LE(c.diff, 1e-4);
}

TEST(RegionFusionTest, ResidualAddJoinsTheDedicatedLayerNormKernel) {
  Compiled c = compile_and_compare(kResidualLayerNorm);
  ASSERT_TRUE(c.plan);
  EXPECT_EQ(c.plan->kernels_per_run(), 2u) << explain(c);  // SkipLayerNormalization, Relu
  EXPECT_EQ(count_op(c.plan->graph(), "SkipLayerNormalization"), 1);
  EXPECT_LE(c.diff, 1e-4);
}

constexpr const char* kMatMulGeluMatMul = R"(graph @main opset 13 (%x: f32[4,16]) {
  %w1: f32[16,32] = const splat 0.125
  %bias: f32[32] = const splat 0.5
  %w2: f32[32,8] = const splat -0.25
  %sqrt2: f32[] = const [1.4142135]
  %one: f32[] = const [1]
  %half: f32[] = const [0.5]
  %m: f32[4,32] = MatMul(%x, %w1)
  %a: f32[4,32] = Add(%m, %bias)
  %d: f32[4,32] = Div(%a, %sqrt2)
  %e: f32[4,32] = Erf(%d)
  %e1: f32[4,32] = Add(%e, %one)
  %g0: f32[4,32] = Mul(%a, %e1)
  %g: f32[4,32] = Mul(%g0, %half)
  %y: f32[4,8] = MatMul(%g, %w2)
  return %y
})";

TEST(RegionFusionTest, ErfGeluChainIsPartOfOneKernelBetweenMatMuls) {
  // Region fusion alone (the epilogue patterns switched off): MatMul, one region (bias + the
  // whole GELU), MatMul.
  FusionConfig regions_only;
  regions_only.enabled_rules = {"region_fusion"};
  Compiled c = compile_and_compare(kMatMulGeluMatMul, regions_only);
  ASSERT_TRUE(c.plan);
  EXPECT_EQ(c.plan->kernels_per_run(), 3u) << explain(c);
  EXPECT_EQ(count_op(c.plan->graph(), "FusedRegion"), 1);
  EXPECT_EQ(count_op(c.plan->graph(), "Erf"), 0);
  EXPECT_LE(c.diff, 1e-4);
}

TEST(RegionFusionTest, AtFullO2TheMatMulEpilogueTakesBiasAndGelu) {
  // With the patterns on, the first MatMul absorbs bias + GELU as oneDNN post-ops: no region left.
  Compiled c = compile_and_compare(kMatMulGeluMatMul);
  ASSERT_TRUE(c.plan);
  EXPECT_EQ(c.plan->kernels_per_run(), 2u) << explain(c);
  EXPECT_EQ(count_op(c.plan->graph(), "FusedMatMul"), 1);
  EXPECT_EQ(count_op(c.plan->graph(), "Erf"), 0);
  EXPECT_LE(c.diff, 1e-4);
}

TEST(RegionFusionTest, SoftmaxKeepsItsDedicatedKernelAfterTheScaleAndMaskRegion) {
  Compiled c = compile_and_compare(R"(graph @main opset 13 (%s: f32[2,3,17,17], %mask: f32[2,1,1,17]) {
  %scale: f32[] = const [8]
  %d: f32[2,3,17,17] = Div(%s, %scale)
  %a: f32[2,3,17,17] = Add(%d, %mask)
  %p: f32[2,3,17,17] = Softmax(%a) {axis = -1}
  %q: f32[2,3,17,17] = Mul(%p, %p)
  return %q
})");
  ASSERT_TRUE(c.plan);
  EXPECT_EQ(c.plan->kernels_per_run(), 3u) << explain(c);  // scale + mask region, Softmax, Mul
  EXPECT_EQ(count_op(c.plan->graph(), "FusedRegion"), 1);
  EXPECT_TRUE(kept_dedicated(c, "Softmax")) << explain(c);
  EXPECT_LE(c.diff, 1e-4);
}

// LogSoftmax (not benchmarked against its dedicated kernel) still expands and fuses.
TEST(RegionFusionTest, LogSoftmaxAloneIsOneKernel) {
  Compiled c = compile_and_compare(R"(graph @main opset 13 (%s: f32[5,129]) {
  %p: f32[5,129] = LogSoftmax(%s) {axis = -1}
  %q: f32[5,129] = Neg(%p)
  return %q
})");
  ASSERT_TRUE(c.plan);
  EXPECT_EQ(c.plan->kernels_per_run(), 1u) << explain(c);
  EXPECT_EQ(count_op(c.plan->graph(), "FusedRegion"), 1);
  EXPECT_LE(c.diff, 1e-4);
}

// The seed's composite example: a user op (x - y) * x written with primitives, in a net that
// first computes pow(x * 2, 3).
TEST(RegionFusionTest, CompositeExampleCompilesToOneKernel) {
  Compiled c = compile_and_compare(R"(graph @main opset 13 (%x: f32[8,33], %y: f32[8,33]) {
  %two: f32[] = const [2]
  %three: f32[] = const [3]
  %x2: f32[8,33] = Mul(%x, %two)
  %p: f32[8,33] = Pow(%x2, %three)
  %d: f32[8,33] = Sub(%p, %y)
  %z: f32[8,33] = Mul(%d, %p)
  return %z
})");
  ASSERT_TRUE(c.plan);
  EXPECT_EQ(c.plan->kernels_per_run(), 1u) << explain(c);
  EXPECT_LE(c.diff, 1e-4);
}

TEST(RegionFusionTest, InjectiveOpsBecomeIndexMaps) {
  Compiled c = compile_and_compare(R"(graph @main opset 13 (%x: f32[2,6,12], %b: f32[12]) {
  %shape: i64[4] = const [2, 6, 3, 4]
  %starts: i64[1] = const [1]
  %ends: i64[1] = const [6]
  %axes: i64[1] = const [2]
  %a: f32[2,6,12] = Add(%x, %b)
  %r: f32[2,6,3,4] = Reshape(%a, %shape)
  %t: f32[2,3,6,4] = Transpose(%r) {perm = [0, 2, 1, 3]}
  %s: f32[2,3,6,4] = Sigmoid(%t)
  %sl: f32[2,3,5,4] = Slice(%s, %starts, %ends, %axes)
  return %sl
})");
  ASSERT_TRUE(c.plan);
  EXPECT_EQ(c.plan->kernels_per_run(), 1u) << explain(c);
  EXPECT_LE(c.diff, 1e-4);
}

TEST(RegionFusionTest, NeverFusesAcrossAGraphOutput) {
  Compiled c = compile_and_compare(R"(graph @main opset 13 (%x: f32[4,9]) {
  %e: f32[4,9] = Exp(%x)
  %n: f32[4,9] = Neg(%e)
  %t: f32[4,9] = Tanh(%n)
  %u: f32[4,9] = Abs(%t)
  return %n, %u
})");
  ASSERT_TRUE(c.plan);
  // {Exp, Neg} writes n (a graph output); {Tanh, Abs} reads it.
  EXPECT_EQ(c.plan->kernels_per_run(), 2u);
  EXPECT_LE(c.diff, 1e-4);
}

TEST(RegionFusionTest, ThresholdAndSwitchesAreRespectedAndRecorded) {
  const char* text = R"(graph @main opset 13 (%x: f32[64], %y: f32[64]) {
  %a: f32[64] = Add(%x, %y) #a
  %b: f32[64] = Mul(%a, %y) #b
  return %b
})";
  // Before: Add reads 2, writes 1; Mul reads 2, writes 1 = 6 tensors. After: 2 in, 1 out: 50%.
  FusionConfig strict;
  strict.region_min_traffic_saving = 0.6;
  Compiled c = compile_and_compare(text, strict);
  ASSERT_TRUE(c.plan);
  EXPECT_EQ(c.plan->kernels_per_run(), 2u);
  bool refused = false;
  for (const PassDecision& d : c.plan->pass_decisions()) {
    if (d.rule == "region_fusion" && !d.applied) {
      refused = true;
      EXPECT_NE(d.reason.find("saves 50%"), std::string::npos) << d.reason;
    }
  }
  EXPECT_TRUE(refused);

  FusionConfig off;
  off.disabled_rules.insert("region_fusion");
  EXPECT_EQ(compile_and_compare(text, off).plan->kernels_per_run(), 2u);

  FusionConfig excluded;
  excluded.excluded_node_globs.push_back("b");
  c = compile_and_compare(text, excluded);
  EXPECT_EQ(c.plan->kernels_per_run(), 2u);
  bool named = false;
  for (const PassDecision& d : c.plan->pass_decisions()) named |= d.rule == "region_fusion" && !d.applied;
  EXPECT_TRUE(named);

  c = compile_and_compare(text);
  EXPECT_EQ(c.plan->kernels_per_run(), 1u) << explain(c);
  EXPECT_LE(c.diff, 1e-4);
}

}  // namespace
}  // namespace opfuse
