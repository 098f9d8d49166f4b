// NaN, Inf and denormals through fused kernels: each epilogue that clamps (Relu, Clip,
// HardSigmoid) keeps NaN as the unfused ops do, on every anchor (Conv, depthwise Conv, the O3
// blocked conv, MatMul, Gemm, ConvTranspose) and at every level. oneDNN's relu and clip return
// the bound for a NaN lane, so those post-ops run in our own pass (kernels/cpu/onednn_post_ops.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "graph_test_util.h"
#include "pipelines/pipeline.h"
#include "runtime/non_finite.h"

namespace opfuse {
namespace {

// Random inputs with specials sprinkled in: NaN, +Inf, -Inf and denormals, at scattered places.
TensorMap inputs_with_specials(const Graph& g) {
  TensorMap inputs = testing_graphs::random_inputs(g, 5);
  for (auto& [name, t] : inputs) {
    auto v = t.values<float>();
    for (size_t i = 0; i < v.size(); ++i) {
      if (i % 97 == 3) v[i] = std::numeric_limits<float>::quiet_NaN();
      if (i % 131 == 7) v[i] = std::numeric_limits<float>::infinity();
      if (i % 173 == 11) v[i] = -std::numeric_limits<float>::infinity();
      if (i % 5 == 1) v[i] = 1e-40f * (i % 2 ? 1 : -1);  // denormal
    }
  }
  return inputs;
}

// Compiles `text` at `level`, runs it on inputs with specials and compares with eager mode:
// NaN must meet NaN (max_relative_difference is infinite otherwise). Returns the steps.
std::vector<std::string> expect_matches_eager(const std::string& text, OptLevel level) {
  const testing_graphs::CompiledRun run = testing_graphs::compile_and_compare(text, level, inputs_with_specials);
  size_t nans = 0;
  for (const auto& [name, t] : run.want) {
    for (float v : t.to_float_vector()) nans += std::isnan(v);
  }
  EXPECT_GT(nans, 0u) << "the reference has no NaN, so the test could not fail";
  EXPECT_LE(run.diff, 1e-4) << opt_level_name(level);
  return run.steps;
}

class NonFiniteTest : public testing::TestWithParam<OptLevel> {};

// Conv + Relu, Conv + Clip (ReLU6), depthwise Conv + HardSigmoid, and a residual Add + Relu.
TEST_P(NonFiniteTest, ConvEpiloguesKeepNaN) {
  const char* text = R"(graph @main opset 13 (%x: f32[1,16,12,12]) {
  %w1: f32[32,16,3,3] = const splat 0.02
  %w2: f32[32,1,3,3] = const splat 0.1
  %w3: f32[32,32,1,1] = const splat 0.03
  %lo: f32[] = const [0]
  %hi: f32[] = const [6]
  %c1: f32[1,32,12,12] = Conv(%x, %w1) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #conv1
  %r1: f32[1,32,12,12] = Relu(%c1) #relu1
  %c2: f32[1,32,12,12] = Conv(%r1, %w2) {group = 32, kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #dw
  %r2: f32[1,32,12,12] = Clip(%c2, %lo, %hi) #relu6
  %c3: f32[1,32,12,12] = Conv(%r2, %w3) {kernel_shape = [1, 1]} #pw
  %s: f32[1,32,12,12] = Add(%c3, %r1) #add
  %r3: f32[1,32,12,12] = Relu(%s) #relu3
  %h: f32[1,32,12,12] = HardSigmoid(%r3) {alpha = 0.2, beta = 0.5} #hsig
  return %r3, %h
})";
  const auto steps = expect_matches_eager(text, GetParam());
  if (GetParam() >= OptLevel::kO2) {
    // The activations really were fused into the convs (else this tests nothing fused).
    size_t fused = 0;
    for (const std::string& s : steps) fused += s.find("Conv") != std::string::npos && s.find("Relu") == std::string::npos;
    EXPECT_GE(fused, 3u) << testing::PrintToString(steps);
  }
}

// MaxPool (padded, and the O3 blocked form after a conv) and GlobalMaxPool: a NaN anywhere in
// a window gives NaN, as ONNX's MaxPool does; oneDNN's pooling alone would skip it (and turn an
// all-NaN window into the lowest float).
TEST_P(NonFiniteTest, MaxPoolsKeepNaNWhereverItIsInTheWindow) {
  const char* text = R"(graph @main opset 13 (%x: f32[1,16,12,12]) {
  %w: f32[16,16,1,1] = const splat 0.05
  %p: f32[1,16,6,6] = MaxPool(%x) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} #pool
  %c: f32[1,16,6,6] = Conv(%p, %w) {kernel_shape = [1, 1]} #conv
  %q: f32[1,16,3,3] = MaxPool(%c) {kernel_shape = [2, 2], strides = [2, 2]} #pool2
  %g: f32[1,16,1,1] = GlobalMaxPool(%x) #gpool
  return %q, %g
})";
  expect_matches_eager(text, GetParam());
}

// MatMul + bias + Relu, Gemm + Relu, and Clip after a MatMul.
TEST_P(NonFiniteTest, MatMulAndGemmEpiloguesKeepNaN) {
  const char* text = R"(graph @main opset 13 (%x: f32[8,64]) {
  %w1: f32[64,48] = const splat 0.01
  %b1: f32[48] = const splat 0.1
  %w2: f32[32,48] = const splat 0.02
  %b2: f32[32] = const splat -0.1
  %lo: f32[] = const [-1]
  %hi: f32[] = const [1]
  %m: f32[8,48] = MatMul(%x, %w1) #mm
  %a: f32[8,48] = Add(%m, %b1) #bias
  %r: f32[8,48] = Relu(%a) #relu
  %g: f32[8,32] = Gemm(%r, %w2, %b2) {transB = 1} #gemm
  %y: f32[8,32] = Relu(%g) #relu2
  %z: f32[8,32] = Clip(%y, %lo, %hi) #clip
  return %z
})";
  expect_matches_eager(text, GetParam());
}

TEST_P(NonFiniteTest, ConvTransposeReluKeepsNaN) {
  const char* text = R"(graph @main opset 13 (%x: f32[1,8,6,6]) {
  %w: f32[8,4,3,3] = const splat 0.05
  %c: f32[1,4,13,13] = ConvTranspose(%x, %w) {kernel_shape = [3, 3], strides = [2, 2]} #deconv
  %y: f32[1,4,13,13] = Relu(%c) #relu
  return %y
})";
  expect_matches_eager(text, GetParam());
}

// Every activation oneDNN could apply inside a ConvTranspose or MatMul, after NaN: the ones
// whose oneDNN form does not keep NaN must run in our own pass (onednn_post_ops.cc).
TEST_P(NonFiniteTest, LibraryActivationsAfterDeconvAndMatMulKeepNaN) {
  for (const char* act : {"Sigmoid", "Tanh", "Elu", "Gelu", "HardSwish", "LeakyRelu", "SiLU"}) {
    SCOPED_TRACE(act);
    // SiLU: x * Sigmoid(x), the sigmoid_mul post-op (oneDNN's swish).
    auto apply = [&](const char* in, const char* out, const char* shape) {
      if (std::string(act) != "SiLU") return str_cat("  %", out, ": ", shape, " = ", act, "(%", in, ")\n");
      return str_cat("  %", out, "_s: ", shape, " = Sigmoid(%", in, ")\n  %", out, ": ", shape, " = Mul(%", in,
                     ", %", out, "_s)\n");
    };
    const std::string text = str_cat(R"(graph @main opset 13 (%x: f32[1,8,6,6], %m: f32[8,64]) {
  %w: f32[8,4,3,3] = const splat 0.05
  %wm: f32[64,48] = const splat 0.01
  %c: f32[1,4,13,13] = ConvTranspose(%x, %w) {kernel_shape = [3, 3], strides = [2, 2]} #deconv
)", apply("c", "y", "f32[1,4,13,13]"), R"(  %p: f32[8,48] = MatMul(%m, %wm) #mm
)", apply("p", "z", "f32[8,48]"), R"(  return %y, %z
})");
    expect_matches_eager(text, GetParam());
  }
}

// With every input finite the session runs a plan whose anchors clamp inside the library kernel
// (nothing upstream can make NaN); an input holding NaN gets the NaN-exact plan, clamping in our
// own pass. Both compute what eager mode computes.
TEST(NonFinitePlanTest, FiniteInputsClampInsideTheLibraryKernel) {
  const char* text = R"(graph @main opset 13 (%x: f32[1,16,8,8]) {
  %w: f32[16,16,3,3] = const splat 0.02
  %c: f32[1,16,8,8] = Conv(%x, %w) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #conv
  %y: f32[1,16,8,8] = Relu(%c) #relu
  return %y
})";
  auto g = parse_graph(text);
  ASSERT_TRUE(g.is_ok());
  SessionOptions options;
  options.level = OptLevel::kO2;
  auto session = Session::create(g->clone(), options);
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  const TensorMap finite = testing_graphs::random_inputs(*g, 3);
  const TensorMap special = inputs_with_specials(*g);
  auto conv_step = [&](const TensorMap& inputs) {
    auto plan = session->plan_for(inputs);
    EXPECT_TRUE(plan.is_ok());
    for (const std::string& s : (*plan)->describe_steps()) {
      if (s.find("'conv'") != std::string::npos) return s;
    }
    return std::string();
  };
  EXPECT_EQ(conv_step(finite).find("then relu"), std::string::npos) << conv_step(finite);
  EXPECT_NE(conv_step(special).find("then relu"), std::string::npos) << conv_step(special);
  EXPECT_EQ(session->compile_count(), 2);
  EXPECT_FALSE(session->plan_for(finite).value()->same_for_any_finiteness());
  for (const TensorMap* inputs : {&finite, &special}) {
    auto want = run_eager(*g, *inputs);
    auto got = session->run(*inputs);
    ASSERT_TRUE(want.is_ok() && got.is_ok());
    EXPECT_LE(max_relative_difference(*got, *want), 1e-4);
  }
}

// Where no kernel chooses by finiteness (a sigmoid keeps NaN inside oneDNN's kernel too, a MatMul
// has no epilogue), the plan compiled for the first inputs serves the others, finite or not,
// whichever came first: no second compile (which would read released weights back). Each run
// computes what eager mode computes, NaN included.
TEST(NonFinitePlanTest, OnePlanServesFiniteAndNonFiniteInputsWhenNoKernelWouldDiffer) {
  const char* text = R"(graph @main opset 13 (%x: f32[1,16,8,8], %m: f32[4,16]) {
  %w: f32[16,16,3,3] = const splat 0.02
  %b: f32[16] = const splat 0.1
  %k: f32[16,24] = const splat 0.03
  %c: f32[1,16,8,8] = Conv(%x, %w, %b) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #conv
  %y: f32[1,16,8,8] = Sigmoid(%c) #sigmoid
  %z: f32[4,24] = MatMul(%m, %k) #matmul
  return %y, %z
})";
  auto g = parse_graph(text);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const TensorMap finite = testing_graphs::random_inputs(*g, 3);
  const TensorMap special = inputs_with_specials(*g);
  for (OptLevel level : {OptLevel::kO1, OptLevel::kO2, OptLevel::kO3}) {
    for (bool finite_first : {true, false}) {
      SCOPED_TRACE(str_cat(opt_level_name(level), finite_first ? ", finite inputs first" : ", NaN first"));
      SessionOptions options;
      options.level = level;
      auto session = Session::create(g->clone(), options);
      ASSERT_TRUE(session.is_ok()) << session.status().message();
      for (const TensorMap* inputs : finite_first ? std::vector{&finite, &special} : std::vector{&special, &finite}) {
        auto want = run_eager(*g, *inputs);
        auto got = session->run(*inputs);
        ASSERT_TRUE(want.is_ok() && got.is_ok());
        EXPECT_LE(max_relative_difference(*got, *want), 1e-4);
      }
      EXPECT_EQ(session->compile_count(), 1);
      EXPECT_EQ(session->plan_for(finite).value(), session->plan_for(special).value());
      EXPECT_TRUE(session->plan_for(finite).value()->same_for_any_finiteness());
    }
  }
}

// A generated region counts as finite-preserving when its members are and its constants are
// finite (DenseNet's Concat -> BN as Mul + Add -> Relu between convs), so the conv after it
// clamps inside the library kernel on finite inputs; with an Exp, or an Inf among its constants,
// the conv clamps in our own pass. Each plan computes what eager mode computes.
TEST(NonFinitePlanTest, RegionsOfFinitePreservingOpsLetTheNextConvClamp) {
  struct Case {
    const char* activation;
    const char* shift;
    bool library_relu;
  };
  for (const Case& c : {Case{"Relu", "0.25", true}, Case{"Exp", "0.25", false}, Case{"Relu", "inf", false}}) {
    SCOPED_TRACE(str_cat(c.activation, " shift ", c.shift));
    const std::string text = str_cat(R"(graph @main opset 13 (%x: f32[1,16,8,8]) {
  %w: f32[16,16,3,3] = const splat 0.02
  %scale: f32[1,32,1,1] = const splat 0.5
  %shift: f32[1,32,1,1] = const splat )", c.shift, R"(
  %w1: f32[16,32,3,3] = const splat 0.03
  %c0: f32[1,16,8,8] = Conv(%x, %w) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #conv0
  %cat: f32[1,32,8,8] = Concat(%c0, %x) {axis = 1} #cat
  %s: f32[1,32,8,8] = Mul(%cat, %scale) #bn_scale
  %t: f32[1,32,8,8] = Add(%s, %shift) #bn_shift
  %u: f32[1,32,8,8] = )", c.activation, R"((%t) #act
  %c1: f32[1,16,8,8] = Conv(%u, %w1) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #conv1
  %y: f32[1,16,8,8] = Relu(%c1) #relu1
  return %y
})");
    auto g = parse_graph(text);
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    SessionOptions options;
    options.level = OptLevel::kO2;
    auto session = Session::create(g->clone(), options);
    ASSERT_TRUE(session.is_ok()) << session.status().message();
    const TensorMap finite = testing_graphs::random_inputs(*g, 3);
    auto plan = session->plan_for(finite);
    ASSERT_TRUE(plan.is_ok());
    std::string conv1, region;
    for (const std::string& step : (*plan)->describe_steps()) {
      if (step.find("'conv1'") != std::string::npos) conv1 = step;
      if (step.find("FusedRegion") != std::string::npos) region = step;
    }
    ASSERT_FALSE(region.empty()) << "the Concat, Mul, Add and activation form a generated region";
    EXPECT_EQ(conv1.find("then relu") == std::string::npos, c.library_relu) << conv1 << "\n" << region;
    auto want = run_eager(*g, finite);
    auto got = session->run(finite);
    ASSERT_TRUE(want.is_ok() && got.is_ok());
    EXPECT_LE(max_relative_difference(*got, *want), 1e-4);
  }
}

// What may hold NaN or Inf when the inputs are finite: what a Log makes and everything after it,
// and what a constant holding NaN reaches, and divisions but those by constants of magnitude at
// least 1; not what finite-preserving ops make of finite values.
TEST(NonFinitePlanTest, AnalysisFollowsOpsThatCanMakeNaN) {
  auto g = parse_graph(R"(graph @main opset 13 (%x: f32[4]) {
  %bad: f32[4] = const [1, nan, 2, 3]
  %a: f32[4] = Relu(%x) #relu
  %l: f32[4] = Log(%a) #log
  %b: f32[4] = Add(%l, %x) #after_log
  %c: f32[4] = Mul(%a, %bad) #nan_const
  %d: f32[4] = Sigmoid(%a) #fine
  %six: f32[] = const [6]
  %half: f32[] = const [-0.5]
  %e: f32[4] = Div(%a, %six) #div_by_six
  %f: f32[4] = Div(%a, %half) #div_by_half_may_overflow
  %g: f32[4] = Div(%a, %x) #div_by_activation
  return %b, %c, %d, %e, %f, %g
})");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const auto finite = values_that_may_be_non_finite(*g, true);
  auto may = [&](const char* name) { return finite.count(g->find_value(name)) > 0; };
  EXPECT_FALSE(may("a"));
  EXPECT_TRUE(may("l"));
  EXPECT_TRUE(may("b"));
  EXPECT_TRUE(may("c"));
  EXPECT_FALSE(may("d"));
  EXPECT_FALSE(may("e"));
  EXPECT_TRUE(may("f"));
  EXPECT_TRUE(may("g"));
  EXPECT_TRUE(values_that_may_be_non_finite(*g, false).count(g->find_value("a")) > 0);
}

INSTANTIATE_TEST_SUITE_P(Levels, NonFiniteTest,
                         testing::Values(OptLevel::kO0, OptLevel::kO1, OptLevel::kO2, OptLevel::kO3),
                         [](const testing::TestParamInfo<OptLevel>& info) {
                           return std::string(opt_level_name(info.param));
                         });

}  // namespace
}  // namespace opfuse
