// quantize_pairs_in_fp32 (passes/quantize_pairs_in_fp32.cc): a QuantizeLinear -> DequantizeLinear
// pair of one constant scale and zero point runs as elementwise float ops, bit for bit what the
// two reference kernels compute (half-way values, saturation, NaN to the lowest, +-Inf).
#include <cmath>
#include <limits>

#include "graph_test_util.h"
#include "ir/text_format.h"
#include "pipelines/pipeline.h"

namespace opfuse::testing_graphs {
namespace {

std::string pair_graph(const char* zero_type, int zero, const char* dq_scale) {
  return str_cat(R"(graph @main (%x: f32[4,40]) {
  %s: f32[] = const [0.25]
  %s2: f32[] = const [)", dq_scale, R"(]
  %z: )", zero_type, "[] = const [", zero, R"(]
  %q = QuantizeLinear(%x, %s, %z)
  %d = DequantizeLinear(%q, %s2, %z)
  %y = Relu(%d)
  return %y
}
)");
}

// Values around and beyond the grid: half steps (ties to even), the saturation edges, NaN, +-Inf.
TensorMap edge_values(const Graph&) {
  Tensor x = Tensor::zeros(DType::kF32, {4, 40}).value();
  float* v = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) v[i] = (static_cast<float>(i) - 80.5f) * 0.125f + (i % 3) * 0.0625f;
  v[0] = std::numeric_limits<float>::quiet_NaN();
  v[1] = std::numeric_limits<float>::infinity();
  v[2] = -std::numeric_limits<float>::infinity();
  v[3] = 1e30f;
  v[4] = -1e30f;
  v[5] = 0.375f;  // 1.5 steps: ties to 2
  v[6] = 0.625f;  // 2.5 steps: ties to 2
  return {{"x", x}};
}

TEST(QuantizePairsInFp32, APairRunsAsFloatOpsBitForBit) {
  for (const auto& [type, zero] : {std::pair<const char*, int>{"u8", 128}, {"i8", -3}}) {
    SCOPED_TRACE(type);
    const std::string text = pair_graph(type, zero, "0.25");
    auto g = parse_graph(text);
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    PassContext ctx;
    ASSERT_TRUE(run_pipeline(*g, OptLevel::kO1, {}, ctx).is_ok());
    EXPECT_EQ(count_op(*g, "QuantizeLinear") + count_op(*g, "DequantizeLinear"), 0) << print_graph(*g);
    EXPECT_EQ(g->outputs()[0]->name(), "y");
    for (OptLevel level : {OptLevel::kO1, OptLevel::kO2, OptLevel::kO3}) {
      SCOPED_TRACE(static_cast<int>(level));
      const CompiledRun run = compile_and_compare(text, level, edge_values);
      EXPECT_EQ(run.diff, 0.0);
      // NaN became the lowest step in eager mode too: no NaN anywhere.
      for (float v : run.want.at("y").values<float>()) EXPECT_FALSE(std::isnan(v));
    }
  }
}

TEST(QuantizePairsInFp32, PairsOfOtherScalesStay) {
  auto g = parse_graph(pair_graph("u8", 128, "0.5"));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  PassContext ctx;
  ASSERT_TRUE(run_pipeline(*g, OptLevel::kO1, {}, ctx).is_ok());
  EXPECT_EQ(count_op(*g, "QuantizeLinear"), 1) << print_graph(*g);
  EXPECT_TRUE(decided(ctx, "quantize_pairs_in_fp32", false, "the scales are not one equal constant"));
}

}  // namespace
}  // namespace opfuse::testing_graphs
