// integer_matmul_in_fp32 (passes/integer_matmul_in_fp32.cc): ONNX Runtime's dynamically quantized
// products (DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul) run as float32 MatMuls from
// O1 up, matching eager mode's integer reference kernel; refused where the int32 sums are read
// as integers; switched off by name.
#include "graph_test_util.h"
#include "ir/text_format.h"
#include "pipelines/pipeline.h"

namespace opfuse::testing_graphs {
namespace {

// `k` x `n` weights of `type` (u8 or i8) with values from `lo` to `hi`, as text-format constants.
std::string weights(int64_t k, int64_t n, int lo, int hi) {
  std::string out;
  for (int64_t i = 0; i < k * n; ++i) out += str_cat(i ? ", " : "", lo + (i * 37 + i / n * 11) % (hi - lo + 1));
  return out;
}

// onnxruntime's form: per-column uint8 weight zero points, the sums dequantized by
// Mul(Cast(sums), Mul(x_scale, w_scale)) (`scaled`), or only cast to float and biased.
std::string quantized_graph(int64_t k, int64_t n, bool scaled) {
  std::string zeros;
  for (int64_t j = 0; j < n; ++j) zeros += str_cat(j ? ", " : "", 100 + j * 7 % 60);
  return str_cat(R"(graph @main (%x: f32[6,)", k, R"(]) {
  %wq: u8[)", k, ",", n, "] = const [", weights(k, n, 0, 255), R"(]
  %wz: u8[)", n, "] = const [", zeros, R"(]
  %ws: f32[)", n, "] = const [", weights(1, n, 1, 9), R"(]
  %b: f32[)", n, "] = const [", weights(1, n, -3, 3), R"(]
  %xq, %xs, %xz = DynamicQuantizeLinear(%x)
  %acc = MatMulInteger(%xq, %wq, %xz, %wz)
  %accf = Cast(%acc) {to = 1}
)", scaled ? R"(  %s = Mul(%xs, %ws)
  %d = Mul(%accf, %s)
  %y = Add(%d, %b)
)" : "  %y = Add(%accf, %b)\n", R"(  return %y
}
)");
}

size_t count_op(const Graph& g, std::string_view op) {
  size_t n = 0;
  for (const Node* node : g.nodes()) n += node->op_type() == op;
  return n;
}

TEST(IntegerMatMulInFp32, ADynamicallyQuantizedProductRunsAsAFloatMatMulWithItsScales) {
  const std::string text = quantized_graph(40, 24, true);
  auto g = parse_graph(text);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  PassContext ctx;
  ASSERT_TRUE(run_pipeline(*g, OptLevel::kO1, {}, ctx).is_ok());
  EXPECT_EQ(count_op(*g, "MatMulInteger"), 0u) << print_graph(*g);
  EXPECT_EQ(count_op(*g, "MatMul"), 1u) << print_graph(*g);
  // x's values and zero point to float; the sums' Cast is gone, and so is the Mul by the scales'
  // product: x_scale multiplies x, w_scale is in the weights.
  EXPECT_EQ(count_op(*g, "Cast"), 2u) << print_graph(*g);
  EXPECT_EQ(count_op(*g, "Mul"), 1u) << print_graph(*g);
  bool reported = false;
  for (const PassDecision& d : ctx.decisions) {
    reported |= d.pass == "integer_matmul_in_fp32" && d.applied && d.what.ends_with("scales folded into its operands");
  }
  EXPECT_TRUE(reported);
  // The sums now add dequantized products: within float rounding of eager mode. At O2 and O3 the
  // bias after the product is the GEMM's epilogue.
  for (OptLevel level : {OptLevel::kO1, OptLevel::kO2, OptLevel::kO3}) {
    SCOPED_TRACE(static_cast<int>(level));
    const CompiledRun run = compile_and_compare(text, level);
    EXPECT_LE(run.diff, 1e-5);
    EXPECT_EQ(run.steps_running("MatMulInteger node"), 0u) << ::testing::PrintToString(run.steps);
    EXPECT_EQ(run.steps_running(level == OptLevel::kO1 ? "MatMul node" : "FusedMatMul node"), 1u)
        << ::testing::PrintToString(run.steps);
    if (level >= OptLevel::kO2) {  // no Mul or Add of its own after the product
      for (const std::string& step : run.steps) {
        EXPECT_FALSE(step.starts_with("Add node") || step.starts_with("Mul node")) << step;
      }
    }
  }
}

// Sums only cast to float: computed exactly, also with x quantized to the ends of u8's range
// (0 and 255 only).
TEST(IntegerMatMulInFp32, UnscaledSumsAreExact) {
  const std::string text = quantized_graph(40, 8, false);
  const auto extremes = [](const Graph& g) {
    TensorMap in = random_inputs(g, 3);
    float* x = in.at("x").data<float>();
    for (int64_t i = 0; i < in.at("x").numel(); ++i) x[i] = i % 3 == 0 ? -7.5f : 2.5f;
    return in;
  };
  for (OptLevel level : {OptLevel::kO1, OptLevel::kO3}) {
    SCOPED_TRACE(static_cast<int>(level));
    EXPECT_EQ(compile_and_compare(text, level).diff, 0.0);
    EXPECT_EQ(compile_and_compare(text, level, extremes).diff, 0.0);
  }
}

TEST(IntegerMatMulInFp32, IntegerSumsReadAsIntegersStayOnTheIntegerKernel) {
  auto g = parse_graph(R"(graph @main (%xq: u8[2,3]) {
  %wq: i8[3,2] = const [1, -2, 3, -4, 5, -6]
  %one: i32[] = const [1]
  %acc = MatMulInteger(%xq, %wq)
  %y = Add(%acc, %one)
  return %y
}
)");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  PassContext ctx;
  ASSERT_TRUE(run_pipeline(*g, OptLevel::kO2, {}, ctx).is_ok());
  EXPECT_EQ(count_op(*g, "MatMulInteger"), 1u) << print_graph(*g);
  bool refused = false;
  for (const PassDecision& d : ctx.decisions) {
    refused |= d.pass == "integer_matmul_in_fp32" && !d.applied &&
               d.reason.find("the int32 sums are read by Add") != std::string::npos;
  }
  EXPECT_TRUE(refused);
}

TEST(IntegerMatMulInFp32, SwitchedOffByNameKeepsTheIntegerProduct) {
  PassContext ctx;
  const Graph g = pipeline_without_rule(quantized_graph(8, 4, true), OptLevel::kO1, "integer_matmul_in_fp32", ctx);
  EXPECT_EQ(count_op(g, "MatMulInteger"), 1u) << print_graph(g);
  for (const PassDecision& d : ctx.decisions) EXPECT_NE(d.pass, "integer_matmul_in_fp32");
}

}  // namespace
}  // namespace opfuse::testing_graphs
