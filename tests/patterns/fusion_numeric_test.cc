// Every pattern family, numerically: the graph run unfused (eager, reference kernels) against the
// same graph after fuse_patterns run eagerly (the fused ops' reference kernels: the rewrite's
// algebra) and in graph mode at O2 (the oneDNN kernels with post-ops); max relative difference
// <= 1e-4 (runtime/compare.h). Plus the structure each rewrite must leave.
#include <gtest/gtest.h>

#include <limits>

#include <map>

#include "core/random.h"
#include "graph_test_util.h"
#include "ir/text_format.h"
#include "kernels/cpu/packed_gemm_kernel.h"
#include "kernels/kernel.h"
#include "ops/fused.h"
#include "ops/op_def.h"
#include "ops/infer_shapes.h"
#include "passes/pass.h"
#include "runtime/compare.h"
#include "ops/eager.h"
#include "pipelines/pipeline.h"
#include "runtime/session.h"
#include "testing/pattern_fusion.h"

namespace opfuse {
namespace {

Tensor random_tensor(const std::vector<int64_t>& dims, uint64_t seed) {
  Tensor t = Tensor::zeros(DType::kF32, dims).value();
  Random rng(seed);
  fill_uniform(t, rng, -1, 1);
  return t;
}

// Random constants for every elided one (`const elided` in the text).
Graph parse(const std::string& text) {
  ParseOptions options;
  options.elided_constants = ParseOptions::Elided::kPattern;
  auto g = parse_graph(text, options);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  Graph graph = std::move(g).value();
  uint64_t seed = 100;
  for (Value* v : graph.values()) {
    if (v->is_constant() && v->dtype == DType::kF32 && v->constant()->numel() > 8) {
      graph.set_constant(v, random_tensor(v->constant()->dims(), ++seed));
    }
  }
  EXPECT_TRUE(infer_shapes(graph).is_ok());
  return graph;
}

std::map<std::string, int> op_counts(const Graph& g) {
  std::map<std::string, int> out;
  for (const Node* n : g.nodes()) ++out[n->op_type()];
  return out;
}

// Runs the three ways; returns the fused graph's op histogram.
std::map<std::string, int> check_fusion(const std::string& text) {
  Graph original = parse(text);
  const TensorMap inputs = testing_graphs::random_inputs(original, 8, -1, 1);
  auto want = run_eager(original, inputs);
  EXPECT_TRUE(want.is_ok()) << want.status().message();
  if (!want.is_ok()) return {};

  Graph fused = original.clone();
  const Status s = testing_patterns::fuse_patterns_only(fused);
  EXPECT_TRUE(s.is_ok()) << s.message();
  auto got = run_eager(fused, inputs);
  EXPECT_TRUE(got.is_ok()) << got.status().message();
  if (got.is_ok()) {
    EXPECT_LE(max_relative_difference(*got, *want), 1e-4) << "eager, fused";
  }

  for (OptLevel level : {OptLevel::kO2, OptLevel::kO3}) {
    SessionOptions so;
    so.mode = ExecutionMode::kGraph;
    so.level = level;
    auto session = Session::create(original.clone(), so);
    EXPECT_TRUE(session.is_ok()) << session.status().message();
    if (!session.is_ok()) continue;
    auto out = session->run(inputs);
    EXPECT_TRUE(out.is_ok()) << out.status().message();
    if (out.is_ok()) {
      EXPECT_LE(max_relative_difference(*out, *want), 1e-4) << "graph mode " << opt_level_name(level);
    }
  }
  return op_counts(fused);
}

// O2 and O3 against eager mode with a NaN, +Inf and -Inf in the first input (of at least 301
// floats).
void check_non_finite(const std::string& text) {
  const Graph g = parse(text);
  TensorMap inputs = testing_graphs::random_inputs(g, 3, -1, 1);
  float* x = inputs.begin()->second.data<float>();
  x[9] = std::numeric_limits<float>::quiet_NaN();
  x[200] = std::numeric_limits<float>::infinity();
  x[300] = -std::numeric_limits<float>::infinity();
  auto want = run_eager(g, inputs);
  ASSERT_TRUE(want.is_ok()) << want.status().message();
  for (OptLevel level : {OptLevel::kO2, OptLevel::kO3}) {
    EXPECT_LE(testing_graphs::difference_at_level(g, level, inputs, *want), 1e-5)
        << "NaN and Inf at " << opt_level_name(level);
  }
}

// The kernel of every step of the graph-mode plan at `level` that runs `op` (with `scaled_only`,
// only the convs that read an input scale).
std::vector<std::string> plan_kernels(const std::string& text, OptLevel level, const std::string& op,
                                      bool scaled_only = false) {
  Graph g = parse(text);
  const TensorMap inputs = testing_graphs::random_inputs(g, 8, -1, 1);
  SessionOptions so;
  so.mode = ExecutionMode::kGraph;
  so.level = level;
  auto session = Session::create(std::move(g), so);
  EXPECT_TRUE(session.is_ok()) << session.status().message();
  if (!session.is_ok()) return {};
  auto plan = session->plan_for(inputs);
  EXPECT_TRUE(plan.is_ok()) << plan.status().message();
  if (!plan.is_ok()) return {};
  std::vector<std::string> out;
  for (size_t i = 0; i < (*plan)->kernels_per_run(); ++i) {
    const Node& node = (*plan)->step_node(i);
    if (node.op_type() == op && (!scaled_only || node.has_input(kInputScale))) {
      out.emplace_back((*plan)->step_kernel_name(i));
    }
  }
  return out;
}

// The oneDNN kernel the compiled plan picks for each fused node of the fused graph.
std::vector<std::string> kernels_of(const std::string& text, const std::string& op) {
  Graph g = parse(text);
  EXPECT_TRUE(testing_patterns::fuse_patterns_only(g).is_ok());
  std::vector<std::string> out;
  for (const Node* n : g.nodes()) {
    if (n->op_type() != op) continue;
    std::vector<const Tensor*> constants;
    for (const Value* v : n->inputs()) constants.push_back(v ? v->constant() : nullptr);
    auto kernel = create_kernel(KernelCompileContext{*n, constants, 1});
    out.push_back(kernel.is_ok() ? std::string((*kernel)->name()) : kernel.status().message());
  }
  return out;
}

// The kernel of a fused product with constant weights: oneDNN's on AVX-512, the packed
// cpu.gemm below it (packed_gemm_wins).
std::string product_kernel(const std::string& onednn_kernel) {
  return packed_gemm_wins(active_target()) ? "cpu.gemm" : onednn_kernel;
}

const char* kGeluErf = R"(graph @main opset 13 (%x: f32[2,8,16]) {
  %s2: f32[] = const [1.4142135]
  %one: f32[] = const [1]
  %half: f32[] = const [0.5]
  %d: f32[2,8,16] = Div(%x, %s2)
  %e: f32[2,8,16] = Erf(%d)
  %a: f32[2,8,16] = Add(%e, %one)
  %m: f32[2,8,16] = Mul(%x, %a)
  %y: f32[2,8,16] = Mul(%m, %half)
  return %y
})";

TEST(FusionNumericTest, GeluErfAndTanh) {
  auto counts = check_fusion(kGeluErf);
  EXPECT_EQ(counts, (std::map<std::string, int>{{"Gelu", 1}}));
  counts = check_fusion(R"(graph @main opset 13 (%x: f32[4,32]) {
  %three: f32[] = const [3]
  %c: f32[] = const [0.044715]
  %k: f32[] = const [0.7978846]
  %one: f32[] = const [1]
  %half: f32[] = const [0.5]
  %p: f32[4,32] = Pow(%x, %three)
  %pc: f32[4,32] = Mul(%c, %p)
  %in: f32[4,32] = Add(%x, %pc)
  %ik: f32[4,32] = Mul(%in, %k)
  %t: f32[4,32] = Tanh(%ik)
  %a: f32[4,32] = Add(%t, %one)
  %hx: f32[4,32] = Mul(%x, %half)
  %y: f32[4,32] = Mul(%hx, %a)
  return %y
})");
  EXPECT_EQ(counts, (std::map<std::string, int>{{"Gelu", 1}}));
}

// BERT's feed-forward: MatMul + bias + GELU (decomposed), then MatMul + bias + residual.
const char* kFeedForward = R"(graph @main opset 13 (%x: f32[1,16,32]) {
  %w1: f32[32,64] = const elided
  %b1: f32[64] = const elided
  %w2: f32[64,32] = const elided
  %b2: f32[32] = const elided
  %s2: f32[] = const [1.4142135]
  %one: f32[] = const [1]
  %half: f32[] = const [0.5]
  %h: f32[1,16,64] = MatMul(%x, %w1)
  %hb: f32[1,16,64] = Add(%b1, %h)
  %d: f32[1,16,64] = Div(%hb, %s2)
  %e: f32[1,16,64] = Erf(%d)
  %a: f32[1,16,64] = Add(%e, %one)
  %m: f32[1,16,64] = Mul(%hb, %a)
  %g: f32[1,16,64] = Mul(%m, %half)
  %o: f32[1,16,32] = MatMul(%g, %w2)
  %ob: f32[1,16,32] = Add(%o, %b2)
  %y: f32[1,16,32] = Add(%ob, %x)
  return %y
})";

TEST(FusionNumericTest, MatMulBiasGeluAndResidual) {
  const auto counts = check_fusion(kFeedForward);
  EXPECT_EQ(counts, (std::map<std::string, int>{{"FusedMatMul", 2}}));
  EXPECT_EQ(kernels_of(kFeedForward, "FusedMatMul"),
            (std::vector<std::string>(2, product_kernel("onednn.fused_matmul"))));
}

TEST(FusionNumericTest, AttentionScoresScaleAndMaskStaySafe) {
  // Q K^T / 8 fuses as a linear post-op; the broadcast mask Add is not a residual (refused).
  const char* text = R"(graph @main opset 13 (%q: f32[2,4,8,16], %k: f32[2,4,16,8], %mask: f32[2,1,1,8]) {
  %eight: f32[] = const [8]
  %s: f32[2,4,8,8] = MatMul(%q, %k)
  %d: f32[2,4,8,8] = Div(%s, %eight)
  %y: f32[2,4,8,8] = Add(%d, %mask)
  return %y
})";
  const auto counts = check_fusion(text);
  EXPECT_EQ(counts, (std::map<std::string, int>{{"Add", 1}, {"FusedMatMul", 1}}));
  EXPECT_EQ(kernels_of(text, "FusedMatMul"), (std::vector<std::string>{"onednn.fused_matmul"}));
}

TEST(FusionNumericTest, GemmActivationsAndResidual) {
  for (const char* act : {"Relu(%g)", "Tanh(%g)", "Sigmoid(%g)", "HardSigmoid(%g) {alpha = 0.3}",
                          "Elu(%g) {alpha = 0.7}", "LeakyRelu(%g) {alpha = 0.2}", "HardSwish(%g)",
                          "Gelu(%g)", "Gelu(%g) {approximate = \"tanh\"}"}) {
    SCOPED_TRACE(act);
    const std::string text = std::string(R"(graph @main opset 13 (%x: f32[8,32], %r: f32[8,16]) {
  %b: f32[16,32] = const elided
  %c: f32[16] = const elided
  %g: f32[8,16] = Gemm(%x, %b, %c) {transB = 1}
  %a: f32[8,16] = )") + act + R"(
  %y: f32[8,16] = Add(%r, %a)
  return %y
})";
    EXPECT_EQ(check_fusion(text), (std::map<std::string, int>{{"FusedGemm", 1}}));
    EXPECT_EQ(kernels_of(text, "FusedGemm"), std::vector<std::string>{product_kernel("onednn.fused_gemm")});
  }
}

TEST(FusionNumericTest, ConvPerChannelScaleShiftAndScalarAfterActivation) {
  const char* text = R"(graph @main opset 13 (%x: f32[1,4,8,8]) {
  %w: f32[8,4,3,3] = const elided
  %b: f32[8] = const elided
  %s: f32[1,8,1,1] = const elided
  %t: f32[8,1,1] = const elided
  %two: f32[] = const [2]
  %c: f32[1,8,8,8] = Conv(%x, %w, %b) {pads = [1, 1, 1, 1]}
  %m: f32[1,8,8,8] = Mul(%s, %c)
  %a: f32[1,8,8,8] = Sub(%m, %t)
  %r: f32[1,8,8,8] = Relu(%a)
  %y: f32[1,8,8,8] = Mul(%r, %two)
  return %y
})";
  EXPECT_EQ(check_fusion(text), (std::map<std::string, int>{{"FusedConv", 1}}));
  EXPECT_EQ(kernels_of(text, "FusedConv"), (std::vector<std::string>{"onednn.fused_conv"}));
}

TEST(FusionNumericTest, DepthwiseConvHardSwishAndSilu) {
  for (const char* tail : {"%y: f32[1,16,8,8] = HardSwish(%c)",
                           "%sg: f32[1,16,8,8] = Sigmoid(%c)\n  %y: f32[1,16,8,8] = Mul(%sg, %c)",
                           "%y: f32[1,16,8,8] = Clip(%c, %lo, %hi)",
                           "%hs: f32[1,16,8,8] = HardSigmoid(%c) {alpha = 0.16666667}\n"
                           "  %y: f32[1,16,8,8] = Mul(%c, %hs)",
                           // Paddle2ONNX's hardswish: x * Relu6(x + 3) / 6, in its four orders.
                           "%a: f32[1,16,8,8] = Add(%c, %three)\n  %r6: f32[1,16,8,8] = Clip(%a, %lo, %hi)\n"
                           "  %m: f32[1,16,8,8] = Mul(%c, %r6)\n  %y: f32[1,16,8,8] = Div(%m, %hi)",
                           "%a: f32[1,16,8,8] = Add(%three, %c)\n  %r6: f32[1,16,8,8] = Clip(%a, %lo, %hi)\n"
                           "  %m: f32[1,16,8,8] = Mul(%r6, %c)\n  %y: f32[1,16,8,8] = Mul(%m, %sixth)",
                           "%a: f32[1,16,8,8] = Add(%c, %three)\n  %r6: f32[1,16,8,8] = Clip(%a, %lo, %hi)\n"
                           "  %d: f32[1,16,8,8] = Div(%r6, %hi)\n  %y: f32[1,16,8,8] = Mul(%c, %d)",
                           "%a: f32[1,16,8,8] = Add(%c, %three)\n  %r6: f32[1,16,8,8] = Clip(%a, %lo, %hi)\n"
                           "  %d: f32[1,16,8,8] = Mul(%sixth, %r6)\n  %y: f32[1,16,8,8] = Mul(%d, %c)"}) {
    SCOPED_TRACE(tail);
    const std::string text = std::string(R"(graph @main opset 13 (%x: f32[1,16,8,8]) {
  %w: f32[16,1,3,3] = const elided
  %lo: f32[] = const [0]
  %hi: f32[] = const [6]
  %three: f32[] = const [3]
  %sixth: f32[] = const [0.16666667]
  %c: f32[1,16,8,8] = Conv(%x, %w) {group = 16, pads = [1, 1, 1, 1]}
  )") + tail + "\n  return %y\n}";
    EXPECT_EQ(check_fusion(text), (std::map<std::string, int>{{"FusedConv", 1}}));
    check_non_finite(text);
  }
}

// Epilogues that use one oneDNN algorithm twice (a scale then a shift: two linears; two clips;
// hardsigmoid's linear + clip and a scale): oneDNN 2.6's jit conv kernels gave the second the
// first one's parameters (PP-LCNet's hardswish, scale, shift read 0.81 off). The repeat runs in
// our own pass; every chain matches eager mode, with NaN and Inf too, on a 3x3 conv (its jit
// kernels) and a MatMul.
TEST(FusionNumericTest, EpiloguesRepeatingAnAlgorithmMatchEager) {
  const char* tails[] = {
      "%l: f32[1,16,8,8] = LeakyRelu(%c) {alpha = 0.1}\n  %a: f32[1,16,8,8] = Mul(%l, %s)\n"
      "  %y: f32[1,16,8,8] = Add(%a, %t)",
      "%a: f32[1,16,8,8] = Clip(%c, %m1, %one)\n  %y: f32[1,16,8,8] = Clip(%a, %zero, %t)",
      "%a: f32[1,16,8,8] = HardSigmoid(%c) {alpha = 0.3}\n  %y: f32[1,16,8,8] = Mul(%a, %s)",
      "%a: f32[1,16,8,8] = HardSwish(%c)\n  %b: f32[1,16,8,8] = Mul(%a, %s)\n  %y: f32[1,16,8,8] = Add(%b, %t)",
      "%r: f32[1,16,8,8] = Relu(%c)\n  %a: f32[1,16,8,8] = Mul(%r, %s)\n  %r2: f32[1,16,8,8] = Relu(%a)\n"
      "  %y: f32[1,16,8,8] = Add(%r2, %t)"};
  for (const char* tail : tails) {
    SCOPED_TRACE(tail);
    const std::string text = std::string(R"(graph @main opset 14 (%x: f32[1,16,8,8]) {
  %w: f32[16,16,3,3] = const elided
  %bias: f32[16] = const elided
  %s: f32[] = const [1.07]
  %t: f32[] = const [0.45]
  %m1: f32[] = const [-1]
  %one: f32[] = const [1]
  %zero: f32[] = const [0]
  %c: f32[1,16,8,8] = Conv(%x, %w, %bias) {pads = [1, 1, 1, 1]}
  )") + tail + "\n  return %y\n}";
    EXPECT_EQ(check_fusion(text), (std::map<std::string, int>{{"FusedConv", 1}}));
    check_non_finite(text);
  }
  const std::string matmul = R"(graph @main opset 14 (%x: f32[24,64]) {
  %w: f32[64,48] = const elided
  %s: f32[] = const [1.07]
  %t: f32[] = const [0.45]
  %c: f32[24,48] = MatMul(%x, %w)
  %a: f32[24,48] = Mul(%c, %s)
  %y: f32[24,48] = Add(%a, %t)
  return %y
})";
  EXPECT_EQ(check_fusion(matmul), (std::map<std::string, int>{{"FusedMatMul", 1}}));
  check_non_finite(matmul);
}

// Max / Min by a scalar constant (TensorFlow's tf.math.maximum as a lower bound) become one-sided
// clips in the conv's epilogue, on random inputs and with NaN and Inf in X (Max and Min keep NaN;
// so must the clip, in oneDNN's kernel or ours).
TEST(FusionNumericTest, BoundsByScalarsBecomeOneSidedClips) {
  for (const char* tail : {"%y: f32[1,8,8,8] = Max(%l, %lo)", "%y: f32[1,8,8,8] = Max(%lo, %l)",
                           "%y: f32[1,8,8,8] = Min(%l, %hi)"}) {
    SCOPED_TRACE(tail);
    const std::string text = std::string(R"(graph @main opset 13 (%x: f32[1,8,8,8]) {
  %w: f32[8,8,3,3] = const elided
  %b: f32[8] = const elided
  %lo: f32[1,1,1,1] = const [-0.4]
  %hi: f32[] = const [0.3]
  %c: f32[1,8,8,8] = Conv(%x, %w, %b) {pads = [1, 1, 1, 1]}
  %l: f32[1,8,8,8] = LeakyRelu(%c) {alpha = 0.2}
  )") + tail + "\n  return %y\n}";
    EXPECT_EQ(check_fusion(text), (std::map<std::string, int>{{"FusedConv", 1}}));
    check_non_finite(text);
  }
}

std::string focus_text(const std::string& conv_attrs, int c, int h, int m, int k) {
  const int oh = (h / 2 + 2 * (k / 2) - k) + 1;
  auto t = [](int n, int c, int h, int w) { return str_cat("f32[", n, ",", c, ",", h, ",", w, "]"); };
  std::string s = str_cat("graph @main opset 13 (%x: ", t(1, c, h, h), ") {\n",
                          "  %zero: i64[1] = const [0]\n  %one: i64[1] = const [1]\n",
                          "  %end: i64[1] = const [9223372036854775807]\n  %ah: i64[1] = const [2]\n",
                          "  %aw: i64[1] = const [-1]\n  %two: i64[1] = const [2]\n",
                          "  %w: f32[", m, ",", 4 * c, ",", k, ",", k, "] = const elided\n",
                          "  %b: f32[", m, "] = const elided\n");
  // YOLOv5's order: (h, w) = (0, 0), (1, 0), (0, 1), (1, 1).
  const int offsets[4][2] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
  for (int j = 0; j < 4; ++j) {
    const char* sh = offsets[j][0] ? "%one" : "%zero";
    const char* sw = offsets[j][1] ? "%one" : "%zero";
    s += str_cat("  %a", j, ": ", t(1, c, h / 2, h), " = Slice(%x, ", sh, ", %end, %ah, %two)\n");
    s += str_cat("  %b", j, ": ", t(1, c, h / 2, h / 2), " = Slice(%a", j, ", ", sw, ", %end, %aw, %two)\n");
  }
  s += str_cat("  %s2d: ", t(1, 4 * c, h / 2, h / 2), " = Concat(%b0, %b1, %b2, %b3) {axis = 1}\n");
  s += str_cat("  %cv: ", t(1, m, oh, oh), " = Conv(%s2d, %w, %b) {", conv_attrs, "}\n");
  s += str_cat("  %sg: ", t(1, m, oh, oh), " = Sigmoid(%cv)\n");
  s += str_cat("  %y: ", t(1, m, oh, oh), " = Mul(%cv, %sg)\n  return %y\n}");
  return s;
}

TEST(FusionNumericTest, FocusBecomesOneStrideTwoConv) {
  // YOLOv5's Focus: 3 channels, 3x3 conv with pads 1, then SiLU.
  const std::string text = focus_text("pads = [1, 1, 1, 1]", 3, 16, 8, 3);
  EXPECT_EQ(check_fusion(text), (std::map<std::string, int>{{"FusedConv", 1}}));
  Graph g = parse(text);
  ASSERT_TRUE(testing_patterns::fuse_patterns_only(g).is_ok());
  const Node* conv = g.nodes().back();
  EXPECT_EQ(AttrReader(*conv).get_ints("kernel_shape"), (std::vector<int64_t>{6, 6}));
  EXPECT_EQ(AttrReader(*conv).get_ints("strides"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(AttrReader(*conv).get_ints("pads"), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(conv->input(0)->name(), "x");
  // 1x1 conv, no padding.
  EXPECT_EQ(check_fusion(focus_text("kernel_shape = [1, 1]", 2, 8, 4, 1)),
            (std::map<std::string, int>{{"FusedConv", 1}}));
}

TEST(FusionNumericTest, ConvTransposeReluAndResidual) {
  const char* text = R"(graph @main opset 13 (%x: f32[1,8,5,5], %r: f32[1,4,10,10]) {
  %w: f32[8,4,4,4] = const elided
  %b: f32[4] = const elided
  %c: f32[1,4,10,10] = ConvTranspose(%x, %w, %b) {pads = [1, 1, 1, 1], strides = [2, 2]}
  %a: f32[1,4,10,10] = Relu(%c)
  %y: f32[1,4,10,10] = Add(%a, %r)
  return %y
})";
  EXPECT_EQ(check_fusion(text), (std::map<std::string, int>{{"FusedConvTranspose", 1}}));
  EXPECT_EQ(kernels_of(text, "FusedConvTranspose"), (std::vector<std::string>{"onednn.fused_conv_transpose"}));
}

// Input scale (patterns/input_scale.cc): x * s into the conv reading it. `conv` is the conv's
// attributes and weight dims; s is computed from x (squeeze-excitation) or a graph input.
std::string input_scale_text(int n, int c, int h, const std::string& w_dims, int m, int oh,
                             const std::string& conv_attrs, const std::string& s_source,
                             const std::string& tail = "") {
  auto t = [](int n, int c, int h) { return str_cat("f32[", n, ",", c, ",", h, ",", h, "]"); };
  std::string s = str_cat("graph @main opset 13 (%x: ", t(n, c, h), ", %s_in: f32[1,", c, ",1,1], %r: ",
                          t(n, m, oh), ") {\n  %w: f32", w_dims, " = const elided\n  %b: f32[", m,
                          "] = const elided\n  %fw: f32[", c, ",", c, ",1,1] = const elided\n");
  if (s_source == "se") {
    s += str_cat("  %g: f32[", n, ",", c, ",1,1] = GlobalAveragePool(%x)\n  %f: f32[", n, ",", c,
                 ",1,1] = Conv(%g, %fw)\n  %s: f32[", n, ",", c, ",1,1] = Sigmoid(%f)\n");
  } else {
    s += str_cat("  %s: f32[1,", c, ",1,1] = Identity(%s_in)\n");
  }
  s += str_cat("  %xs: ", t(n, c, h), " = Mul(%x, %s)\n");
  s += str_cat("  %cv: ", t(n, m, oh), " = Conv(%xs, %w, %b) {", conv_attrs, "}\n");
  s += tail.empty() ? str_cat("  %y: ", t(n, m, oh), " = Identity(%cv)\n") : tail;
  s += "  return %y\n}";
  return s;
}

TEST(FusionNumericTest, InputScaleFoldsIntoConvsOfEveryShape) {
  struct Case {
    const char* what;
    int n, c, h;
    std::string w_dims;
    int m, oh;
    std::string attrs;
  };
  const Case cases[] = {
      {"1x1, 32 channels", 1, 32, 8, "[16,32,1,1]", 16, 8, "kernel_shape = [1, 1]"},
      {"1x1, 20 channels (padded blocks)", 1, 20, 9, "[12,20,1,1]", 12, 9, "kernel_shape = [1, 1]"},
      // 17280 weights: scaled by every thread, each its share (onednn_common.cc, scale_weights).
      {"1x1, 144 -> 120 channels", 1, 144, 12, "[120,144,1,1]", 120, 12, "kernel_shape = [1, 1]"},
      {"3x3 stride 2 pads 1, batch 2", 2, 20, 12, "[8,20,3,3]", 8, 6,
       "kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]"},
      {"grouped", 1, 24, 10, "[16,12,1,1]", 16, 10, "group = 2, kernel_shape = [1, 1]"},
      {"depthwise 3x3", 1, 24, 10, "[24,1,3,3]", 24, 10, "group = 24, kernel_shape = [3, 3], pads = [1, 1, 1, 1]"},
  };
  for (const Case& k : cases) {
    for (const char* source : {"se", "input"}) {
      SCOPED_TRACE(str_cat(k.what, ", s from ", source));
      const std::string text = input_scale_text(k.n, k.c, k.h, k.w_dims, k.m, k.oh, k.attrs, source);
      // A squeeze-excitation scale of a batch of 2 differs per sample: no one set of weights.
      const bool foldable = k.n == 1 || std::string(source) == "input";
      const auto counts = check_fusion(text);
      EXPECT_EQ(counts.count("Mul"), foldable ? 0u : 1u);
      Graph g = parse(text);
      ASSERT_TRUE(testing_patterns::fuse_patterns_only(g).is_ok());
      bool scaled = false;
      for (const Node* node : g.nodes()) scaled |= node->op_type() == "FusedConv" && node->has_input(kInputScale);
      EXPECT_EQ(scaled, foldable);
      // The oneDNN kernels run it (no fallback to the reference), plain and blocked. (The SE
      // branch's own convs on its 1x1 map run as cpu.gemv.)
      for (const std::string& kernel : plan_kernels(text, OptLevel::kO2, "FusedConv", true)) {
        EXPECT_EQ(kernel, "onednn.fused_conv");
      }
      for (const std::string& kernel : plan_kernels(text, OptLevel::kO3, "BlockedConv", true)) {
        EXPECT_EQ(kernel, "onednn.blocked_conv");
      }
    }
  }
}

TEST(FusionNumericTest, InputScaleSurvivesLaterEpilogueAndAffineFolds) {
  // The residual Add + Relu absorbed after the input scale, and a per-channel Mul/Add by
  // constants folded into the weights after it (anchor_affine): S must stay input 4.
  const std::string tail =
      "  %a: f32[1,16,8,8] = Add(%cv, %r)\n  %y: f32[1,16,8,8] = Relu(%a)\n";
  const std::string text = input_scale_text(1, 32, 8, "[16,32,1,1]", 16, 8, "kernel_shape = [1, 1]", "se", tail);
  EXPECT_EQ(check_fusion(text).count("Mul"), 0u);
  const std::string affine = R"(graph @main opset 13 (%x: f32[1,32,8,8], %s: f32[1,32,1,1]) {
  %w: f32[16,32,1,1] = const elided
  %k: f32[1,16,1,1] = const elided
  %xs: f32[1,32,8,8] = Mul(%x, %s)
  %cv: f32[1,16,8,8] = Conv(%xs, %w) {kernel_shape = [1, 1]}
  %y: f32[1,16,8,8] = Mul(%cv, %k)
  return %y
})";
  EXPECT_EQ(check_fusion(affine), (std::map<std::string, int>{{"FusedConv", 1}}));
}

TEST(FusionNumericTest, InputScaleConstantFoldsIntoWeights) {
  const char* text = R"(graph @main opset 13 (%x: f32[2,8,6,6]) {
  %w: f32[4,8,3,3] = const elided
  %s: f32[8,1,1] = const elided
  %xs: f32[2,8,6,6] = Mul(%s, %x)
  %y: f32[2,4,6,6] = Conv(%xs, %w) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]}
  return %y
})";
  EXPECT_EQ(check_fusion(text), (std::map<std::string, int>{{"Conv", 1}}));
}

TEST(FusionNumericTest, InputScaleLeavesPerSampleScalesAlone) {
  // s differs per sample ([2, C, 1, 1] with batch 2): not one set of weights, so no fold.
  const char* text = R"(graph @main opset 13 (%x: f32[2,8,6,6], %s: f32[2,8,1,1]) {
  %w: f32[4,8,1,1] = const elided
  %xs: f32[2,8,6,6] = Mul(%x, %s)
  %y: f32[2,4,6,6] = Conv(%xs, %w) {kernel_shape = [1, 1]}
  return %y
})";
  EXPECT_EQ(check_fusion(text), (std::map<std::string, int>{{"Conv", 1}, {"Mul", 1}}));
}

TEST(FusionNumericTest, ResidualAddAndLayerNormBecomeOneKernel) {
  for (const std::string dims : {"2,5,48", "1,128,768", "3,37", "4,1"}) {
    for (const bool bias : {true, false}) {
      SCOPED_TRACE(str_cat(dims, bias ? ", with B" : ", no B"));
      const std::string last = dims.substr(dims.rfind(',') + 1);
      const std::string t = "f32[" + dims + "]";
      const std::string text = "graph @main opset 17 (%x: " + t + ", %h: " + t + ") {\n  %g: f32[" + last +
                               "] = const elided\n  %b: f32[" + last + "] = const elided\n  %s: " + t +
                               " = Add(%h, %x)\n  %y: " + t + " = LayerNormalization(%s, %g" +
                               (bias ? ", %b" : "") + ") {epsilon = 0.0001}\n  return %y\n}";
      EXPECT_EQ(check_fusion(text), (std::map<std::string, int>{{"SkipLayerNormalization", 1}}));
      for (OptLevel level : {OptLevel::kO2, OptLevel::kO3}) {
        EXPECT_EQ(plan_kernels(text, level, "SkipLayerNormalization"), (std::vector<std::string>{"hwy.skip_layer_norm"}));
      }
    }
  }
}

}  // namespace
}  // namespace opfuse
