// If, Loop and Scan (ops/control_flow.cc): graph mode at every level against eager mode, with
// bodies that read outer-scope values and fuse inside; an If whose condition folds inlined at
// compile time; run limits (the iteration cap, a deadline) stopping hostile loops; import of
// ONNX subgraphs and export back.
#include <chrono>
#include <cmath>
#include <string>

#include "frontend/onnx/exporter.h"
#include "frontend/onnx/importer.h"
#include "graph_test_util.h"

namespace opfuse::testing_graphs {
namespace {

constexpr OptLevel kLevels[] = {OptLevel::kO0, OptLevel::kO1, OptLevel::kO2, OptLevel::kO3};

bool has_step(const CompiledRun& run, const std::string& text) {
  for (const std::string& s : run.steps) {
    if (s.find(text) != std::string::npos) return true;
  }
  return false;
}

// y = If(s > 0) { Relu(x * w) } else { Sigmoid(x) * 0.5 } + x: the branches read the outer x
// and w. The condition is computed from a float, so it stays a run-time If in graph mode.
const char* kIfGraph = R"(
graph @main (%s: f32[], %x: f32[2,8]) {
  %w: f32[8] = const [1, -2, 3, -4, 0.5, -0.5, 2, -1]
  %zero: f32[] = const [0]
  %c = Greater(%s, %zero)
  %y = If(%c, %x, %w) {then_branch = graph @then (%x: f32[2,8], %w: f32[8]) captures 2 {
      %m = Mul(%x, %w)
      %r = Relu(%m)
      return %r
    }, else_branch = graph @else (%x: f32[2,8], %w: f32[8]) captures 2 {
      %k: f32[] = const [0.5]
      %s = Sigmoid(%x)
      %t = Mul(%s, %k)
      return %t
    }} #gate
  %z = Add(%y, %x)
  return %z
}
)";

TEST(ControlFlow, IfOnARunTimeConditionRunsTheTakenBranchAtEveryLevel) {
  for (bool cond : {true, false}) {
    for (OptLevel level : kLevels) {
      SCOPED_TRACE(str_cat(cond ? "then " : "else ", static_cast<int>(level)));
      const CompiledRun run = compile_and_compare(kIfGraph, level, [&](const Graph& g) {
        TensorMap in;
        in["s"] = Tensor::scalar<float>(cond ? 1.0f : -1.0f);
        in["x"] = random_inputs(g, 3).at("x");
        return in;
      });
      // Not bit for bit: a generated kernel's Sigmoid may differ from the reference in the last
      // bit, by vector width (AVX2 against AVX-512).
      EXPECT_LE(run.diff, 1e-6);
      EXPECT_TRUE(has_step(run, "If node 'gate'")) << ::testing::PrintToString(run.steps);
      EXPECT_TRUE(has_step(run, "control_flow.compiled_bodies")) << ::testing::PrintToString(run.steps);
      // The outputs of the branch taken, checked by hand on one element.
      ASSERT_EQ(run.want.count("z"), 1u);
      const float x0 = random_inputs(*parse_graph(kIfGraph), 3).at("x").data<float>()[0];
      const float y0 = cond ? std::max(x0 * 1.0f, 0.0f) : 0.5f / (1.0f + std::exp(-x0));
      EXPECT_NEAR(run.want.at("z").data<float>()[0], y0 + x0, 1e-6);
    }
  }
}

TEST(ControlFlow, ACompiledBranchKeepsNaN) {
  auto g = parse_graph(kIfGraph);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  SessionOptions options;
  options.level = OptLevel::kO2;
  auto session = Session::create(std::move(*g), options);
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  // At O2 the branch's Mul+Relu chain is fused in its own plan; a fused Relu must still give
  // NaN for NaN, as eager mode does.
  TensorMap in;
  in["s"] = Tensor::scalar<float>(1.0f);
  in["x"] = Tensor::from_vector<float>({2, 8}, std::vector<float>(16, std::nanf("")));
  auto got = session->run(in);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  for (float v : got->at("z").values<float>()) EXPECT_TRUE(std::isnan(v));
}

// An If on a scalar bool input (a setting such as a sample rate): graph mode compiles a plan per
// value met, each with the If folded away and its branch fused with the rest.
TEST(ControlFlow, AScalarInputDecidingAnIfGetsAPlanPerValue) {
  std::string text = kIfGraph;
  auto cut = [&](const std::string& part, const std::string& by) { text.replace(text.find(part), part.size(), by); };
  cut("%s: f32[]", "%c: bool[]");
  cut("  %zero: f32[] = const [0]\n", "");
  cut("  %c = Greater(%s, %zero)\n", "");
  auto g = parse_graph(text);
  ASSERT_TRUE(g.is_ok()) << g.status().message() << "\n" << text;
  const Tensor x = random_inputs(*g, 5).at("x");
  auto session = Session::create(g->clone(), {});
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  EXPECT_EQ(session->compile_count(), 0);  // nothing to compile before a value is known
  for (bool c : {true, false, true}) {
    const TensorMap in = {{"c", Tensor::scalar<bool>(c)}, {"x", x}};
    auto plan = session->plan_for(in);
    ASSERT_TRUE(plan.is_ok()) << plan.status().message();
    for (const std::string& step : (*plan)->describe_steps()) EXPECT_EQ(step.find("If"), std::string::npos) << step;
    bool bound = false;
    for (const PassDecision& d : (*plan)->pass_decisions()) bound = bound || d.pass == "specialize_inputs";
    EXPECT_TRUE(bound);
    auto got = session->run(in);
    auto want = run_eager(*g, in);
    ASSERT_TRUE(got.is_ok() && want.is_ok());
    EXPECT_LT(max_relative_difference(*got, *want), 1e-6);  // a vector Sigmoid, fused
  }
  EXPECT_EQ(session->compile_count(), 2);  // one plan per value
}

// A shape test the exporter wrote as an If: Equal(Shape(x)[0], 2) folds at compile time, so the
// If disappears and its branch fuses with the Add after it.
const char* kShapeIfGraph = R"(
graph @main (%x: f32[2,8]) {
  %zero: i64[] = const [0]
  %two: i64[] = const [2]
  %s = Shape(%x)
  %d = Gather(%s, %zero) {axis = 0}
  %e = Equal(%d, %two)
  %y = If(%e, %x) {then_branch = graph @then (%x: f32[2,8]) captures 1 {
      %r = Relu(%x)
      return %r
    }, else_branch = graph @else (%x: f32[2,8]) captures 1 {
      %n = Neg(%x)
      return %n
    }} #shape_if
  %z = Add(%y, %x)
  return %z
}
)";

TEST(ControlFlow, AnIfWhoseConditionFoldsIsInlinedAndFused) {
  for (OptLevel level : kLevels) {
    SCOPED_TRACE(static_cast<int>(level));
    const CompiledRun run = compile_and_compare(kShapeIfGraph, level, 4);
    EXPECT_EQ(run.diff, 0.0);
    EXPECT_FALSE(has_step(run, "If node")) << ::testing::PrintToString(run.steps);
    if (level >= OptLevel::kO2) {
      EXPECT_EQ(run.steps.size(), 1u) << ::testing::PrintToString(run.steps);  // Relu + Add, one kernel
    }
  }
}

TEST(ControlFlow, AnInlinedIfKeepsTheNameOfTheGraphOutputItGave) {
  std::string text = kShapeIfGraph;
  text.replace(text.find("return %z"), std::string("return %z").size(), "return %z, %y");
  for (OptLevel level : kLevels) {
    SCOPED_TRACE(static_cast<int>(level));
    const CompiledRun run = compile_and_compare(text, level, 4);
    EXPECT_EQ(run.diff, 0.0);
    EXPECT_EQ(run.want.count("y"), 1u);
    EXPECT_FALSE(has_step(run, "If node")) << ::testing::PrintToString(run.steps);
  }
}

// acc = sum over i < 5 of x * i; trace stacks Relu(acc) after each iteration. The body reads
// the outer x.
const char* kLoopGraph = R"(
graph @main (%x: f32[4]) {
  %m: i64[] = const [5]
  %t: bool[] = const [true]
  %init: f32[4] = const [0, 0, 0, 0]
  %acc, %trace = Loop(%m, %t, %init, %x) {body = graph @body (%i: i64[], %cond: bool[], %a: f32[4], %x: f32[4]) captures 1 {
      %fi = Cast(%i) {to = 1}
      %s = Mul(%x, %fi)
      %n = Add(%a, %s)
      %r = Relu(%n)
      return %cond, %n, %r
    }} #loop
  return %acc, %trace
}
)";

TEST(ControlFlow, LoopCarriesValuesAndStacksScanOutputsAtEveryLevel) {
  for (OptLevel level : kLevels) {
    SCOPED_TRACE(static_cast<int>(level));
    const CompiledRun run = compile_and_compare(kLoopGraph, level, 6);
    EXPECT_EQ(run.diff, 0.0);
    ASSERT_EQ(run.want.count("trace"), 1u);
    EXPECT_EQ(run.want.at("trace").dims(), (std::vector<int64_t>{5, 4}));
    const float x0 = random_inputs(*parse_graph(kLoopGraph), 6).at("x").data<float>()[0];
    EXPECT_FLOAT_EQ(run.want.at("acc").data<float>()[0], 10 * x0);  // 0+1+2+3+4
    EXPECT_FLOAT_EQ(run.want.at("trace").data<float>()[4 * 2], std::max(3 * x0, 0.0f));
  }
}

// A Loop with trip count 2^62 whose condition never turns false.
const char* kHostileLoop = R"(
graph @main (%x: f32[4]) {
  %m: i64[] = const [4611686018427387904]
  %t: bool[] = const [true]
  %out = Loop(%m, %t, %x) {body = graph @body (%i: i64[], %cond: bool[], %a: f32[4]) {
      %n = Neg(%a)
      return %cond, %n
    }} #forever
  return %out
}
)";

TEST(ControlFlow, AHostileLoopStopsAtTheIterationCapOrTheDeadline) {
  for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kGraph}) {
    SCOPED_TRACE(execution_mode_name(mode));
    auto g = parse_graph(kHostileLoop);
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    const TensorMap in = random_inputs(*g, 1);
    SessionOptions options;
    options.mode = mode;
    auto session = Session::create(std::move(*g), options);
    ASSERT_TRUE(session.is_ok()) << session.status().message();

    RunLimits capped;
    capped.max_loop_iterations = 1000;
    auto stopped = session->run(in, capped);
    ASSERT_FALSE(stopped.is_ok());
    EXPECT_NE(stopped.status().message().find("Loop node 'forever'"), std::string::npos) << stopped.status().message();
    EXPECT_NE(stopped.status().message().find("cap of 1000 iterations"), std::string::npos) << stopped.status().message();

    RunLimits timed;
    timed.max_loop_iterations = std::numeric_limits<int64_t>::max();
    const auto start = std::chrono::steady_clock::now();
    timed.deadline = start + std::chrono::milliseconds(50);
    auto late = session->run(in, timed);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_FALSE(late.is_ok());
    EXPECT_NE(late.status().message().find("time limit"), std::string::npos) << late.status().message();
    EXPECT_NE(late.status().message().find("Loop node 'forever'"), std::string::npos) << late.status().message();
    EXPECT_LT(seconds, 5.0);
  }
}

// Running sums of the rows of x, forward into `sums` and backward into `rsums` (reverse scan
// input), stacked along axis 1 of the output (scan_output_axes).
const char* kScanGraph = R"(
graph @main (%x: f32[3,2]) {
  %zero: f32[2] = const [0, 0]
  %s, %z2, %sums, %rsums = Scan(%zero, %zero, %x, %x) {num_scan_inputs = 2, scan_input_directions = [0, 1], scan_output_axes = [1, 0], body = graph @body (%a: f32[2], %b: f32[2], %u: f32[2], %v: f32[2]) {
      %n = Add(%a, %u)
      %m = Add(%b, %v)
      %r = Relu(%n)
      return %n, %m, %r, %m
    }} #scan
  return %s, %sums, %rsums
}
)";

TEST(ControlFlow, ScanSlicesStacksAndReversesAtEveryLevel) {
  for (OptLevel level : kLevels) {
    SCOPED_TRACE(static_cast<int>(level));
    const CompiledRun run = compile_and_compare(kScanGraph, level, 8);
    EXPECT_EQ(run.diff, 0.0);
    ASSERT_EQ(run.want.count("sums"), 1u);
    EXPECT_EQ(run.want.at("sums").dims(), (std::vector<int64_t>{2, 3}));   // axis 1
    EXPECT_EQ(run.want.at("rsums").dims(), (std::vector<int64_t>{3, 2}));
    const Tensor x = random_inputs(*parse_graph(kScanGraph), 8).at("x");
    const float* xv = x.data<float>();
    // Final state: the column sums. The reverse scan's first element is the last row.
    EXPECT_FLOAT_EQ(run.want.at("s").data<float>()[0], xv[0] + xv[2] + xv[4]);
    EXPECT_FLOAT_EQ(run.want.at("rsums").data<float>()[0], xv[4]);
    EXPECT_FLOAT_EQ(run.want.at("sums").data<float>()[1], std::max(xv[0] + xv[2], 0.0f));
  }
}

TEST(ControlFlow, SubgraphsRoundTripThroughTheTextFormat) {
  for (const char* text : {kIfGraph, kLoopGraph, kScanGraph}) {
    auto g = parse_graph(text);
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    const std::string printed = print_graph(*g);
    auto again = parse_graph(printed);
    ASSERT_TRUE(again.is_ok()) << again.status().message() << "\n" << printed;
    EXPECT_EQ(print_graph(*again), printed);
  }
}

TEST(ControlFlow, ExportedSubgraphsReadOuterValuesByNameAndReimport) {
  for (const char* text : {kIfGraph, kLoopGraph, kScanGraph}) {
    auto g = parse_graph(text);
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    TensorMap in = random_inputs(*g, 2);
    auto want = run_eager(*g, in);
    ASSERT_TRUE(want.is_ok()) << want.status().message();
    auto bytes = export_onnx(*g, {});
    ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
    auto back = load_onnx_bytes(*bytes, "", {}, "exported.onnx");
    ASSERT_TRUE(back.is_ok()) << back.status().message();
    auto got = run_eager(*back, in);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    EXPECT_EQ(max_relative_difference(*got, *want), 0.0);
  }
}

TEST(ControlFlow, BadBodiesAreNamed) {
  // The else branch returns an i64 where the then branch returns f32.
  auto g = parse_graph(R"(
graph @main (%s: f32[], %x: f32[2]) {
  %zero: f32[] = const [0]
  %c = Greater(%s, %zero)
  %y = If(%c, %x) {then_branch = graph @then (%x: f32[2]) captures 1 {
      return %x
    }, else_branch = graph @else (%x: f32[2]) captures 1 {
      %s = Shape(%x)
      return %s
    }} #mixed
  return %y
}
)");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  auto session = Session::create(std::move(*g), {});
  ASSERT_FALSE(session.is_ok());
  EXPECT_NE(session.status().message().find("'mixed'"), std::string::npos) << session.status().message();
  EXPECT_NE(session.status().message().find("output 0 is f32 in one case and i64"), std::string::npos)
      << session.status().message();
}

}  // namespace
}  // namespace opfuse::testing_graphs
