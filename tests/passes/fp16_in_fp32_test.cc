// fp16_in_fp32 (passes/fp16_in_fp32.cc): a float16 model computed in float32 from O1 up, with
// float16 kept only at its float16 inputs and outputs; within float16 accuracy of eager mode
// (which rounds to float16 after every op); switched off by name.
#include "graph_test_util.h"
#include "ir/text_format.h"
#include "pipelines/pipeline.h"

namespace opfuse::testing_graphs {
namespace {

// An fp16 export: f32 input cast to f16, f16 weights, f16 arithmetic, one output cast back to
// f32 and one left in f16.
const char* kHalfGraph = R"(
graph @main (%x: f32[1,4,6,6]) {
  %w: f16[3,4,1,1] = const [0.5, -0.25, 0.125, 1, -1, 0.75, 0.3, -0.6, 0.2, 0.9, -0.7, 0.05]
  %b: f16[3] = const [0.1, -0.2, 0.3]
  %k: f16[] = const [1.5]
  %h = Cast(%x) {to = 10}
  %c = Conv(%h, %w, %b)
  %r = Relu(%c)
  %m = Mul(%r, %k)
  %y = Cast(%m) {to = 1}
  %s = Sigmoid(%m)
  return %y, %s
}
)";

size_t count_f16(const Graph& g) {
  size_t n = 0;
  for (const Value* v : g.values()) n += v->dtype == DType::kF16;
  return n;
}

TEST(Fp16InFp32, AHalfModelRunsInFloat32InsideAndKeepsItsDeclaredOutputs) {
  auto g = parse_graph(kHalfGraph);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  PassContext ctx;
  ASSERT_TRUE(run_pipeline(*g, OptLevel::kO1, {}, ctx).is_ok());
  // Only the f16 output is f16 now, made by one Cast. The input's Cast is gone; the f32
  // output's is a Cast from f32 to f32 (a graph output needs a producer of its own name), which
  // runs as a copy.
  EXPECT_EQ(count_f16(*g), 1u) << print_graph(*g);
  size_t to_half = 0, same = 0;
  for (const Node* n : g->nodes()) {
    if (n->op_type() != "Cast") continue;
    to_half += n->output(0)->dtype == DType::kF16;
    same += n->output(0)->dtype == n->input(0)->dtype;
  }
  EXPECT_EQ(to_half, 1u) << print_graph(*g);
  EXPECT_EQ(same, 1u) << print_graph(*g);
  EXPECT_EQ(g->inputs()[0]->uses()[0].node->op_type(), "Conv") << print_graph(*g);
  EXPECT_EQ(g->outputs()[0]->dtype, DType::kF32);
  EXPECT_EQ(g->outputs()[1]->dtype, DType::kF16);
  EXPECT_EQ(g->outputs()[1]->name(), "s");
  bool reported = false;
  for (const PassDecision& d : ctx.decisions) reported |= d.pass == "fp16_in_fp32" && d.applied;
  EXPECT_TRUE(reported);

  // Within float16 accuracy of eager mode, at every level that runs the pass; O0 is exact.
  for (OptLevel level : {OptLevel::kO0, OptLevel::kO1, OptLevel::kO2, OptLevel::kO3}) {
    SCOPED_TRACE(static_cast<int>(level));
    const CompiledRun run = compile_and_compare(kHalfGraph, level);
    if (level == OptLevel::kO0) {
      EXPECT_EQ(run.diff, 0.0);
    } else {
      EXPECT_LE(run.diff, 2e-3);  // a few float16 ulps (2^-11 relative each)
    }
    if (level >= OptLevel::kO2) {
      // Conv + bias + Relu + Mul fuse on the f32 kernels like any f32 model.
      EXPECT_NE(::testing::PrintToString(run.steps).find("onednn"), std::string::npos)
          << ::testing::PrintToString(run.steps);
    }
  }
}

TEST(Fp16InFp32, SwitchedOffByNameKeepsFloat16OpByOp) {
  PassContext ctx;
  const Graph g = pipeline_without_rule(kHalfGraph, OptLevel::kO1, "fp16_in_fp32", ctx);
  const Value* w = g.find_value("w");
  ASSERT_NE(w, nullptr) << print_graph(g);
  EXPECT_EQ(w->dtype, DType::kF16);
  EXPECT_EQ(g.find_value("c")->dtype, DType::kF16) << print_graph(g);  // the Conv still computes in f16
  for (const PassDecision& d : ctx.decisions) EXPECT_NE(d.pass, "fp16_in_fp32");
}

TEST(Fp16InFp32, HalfInputsGetOneCastAndFloat32ModelsAreUntouched) {
  auto g = parse_graph(R"(graph @main (%x: f16[3,5]) {
    %k: f16[] = const [2]
    %a = Mul(%x, %k)
    %y = Tanh(%a)
    return %y
  })");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  PassContext ctx;
  ASSERT_TRUE(run_pipeline(*g, OptLevel::kO2, {}, ctx).is_ok());
  EXPECT_EQ(g->inputs()[0]->dtype, DType::kF16);
  EXPECT_EQ(g->outputs()[0]->dtype, DType::kF16);
  EXPECT_EQ(g->outputs()[0]->name(), "y");
  EXPECT_EQ(count_f16(*g), 2u) << print_graph(*g);  // the input and the output, nothing between

  auto f32 = parse_graph(R"(graph @main (%x: f32[3]) {
    %y = Relu(%x)
    return %y
  })");
  ASSERT_TRUE(f32.is_ok());
  PassContext untouched;
  ASSERT_TRUE(run_pipeline(*f32, OptLevel::kO1, {}, untouched).is_ok());
  for (const PassDecision& d : untouched.decisions) EXPECT_NE(d.pass, "fp16_in_fp32");
}

}  // namespace
}  // namespace opfuse::testing_graphs
