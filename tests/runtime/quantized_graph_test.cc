// A QDQ model (QuantizeLinear -> DequantizeLinear around a Conv, per-channel int8 weights) in
// graph mode at every level against eager mode. From O1 each activation's pair runs as float ops
// (passes/quantize_pairs_in_fp32.cc); a QuantizeLinear whose integers are a graph output stays.
#include <string>

#include "graph_test_util.h"

namespace opfuse::testing_graphs {
namespace {

// Power-of-two scales make every dequantized value, product and partial sum exact in f32, so
// any summation order (reference GEMM, oneDNN, blocked) gives the same conv output and the
// requantization must agree bit for bit: the expected difference is 0, not a tolerance.
std::string qdq_conv_graph() {
  std::string weights;
  for (int i = 0; i < 4 * 3 * 3 * 3; ++i) {
    weights += str_cat(i ? ", " : "", (i * 37) % 255 - 127);
  }
  return str_cat(R"(
graph @qdq_conv (%x: f32[2,3,8,8]) {
  %xs: f32[] = const [0.125]
  %xz: u8[] = const [128]
  %wq: i8[4,3,3,3] = const [)", weights, R"(]
  %ws: f32[4] = const [0.25, 0.5, 0.125, 1]
  %wz: i8[4] = const [0, 0, 0, 0]
  %b: f32[4] = const [0.5, -1, 0.25, 2]
  %ys: f32[] = const [4]
  %yz: u8[] = const [3]
  %xq = QuantizeLinear(%x, %xs, %xz) #xq
  %xd = DequantizeLinear(%xq, %xs, %xz)
  %wd = DequantizeLinear(%wq, %ws, %wz) {axis = 0}
  %c = Conv(%xd, %wd, %b) {pads = [1, 1, 1, 1]}
  %r = Relu(%c)
  %yq = QuantizeLinear(%r, %ys, %yz)
  %y = DequantizeLinear(%yq, %ys, %yz) #y
  return %y, %yq
}
)");
}

bool has_step(const CompiledRun& run, const std::string& op) {
  for (const std::string& s : run.steps) {
    if (s.find(op) != std::string::npos) return true;
  }
  return false;
}

TEST(QuantizedGraph, QdqConvMatchesEagerAtEveryLevel) {
  for (OptLevel level : {OptLevel::kO0, OptLevel::kO1, OptLevel::kO2, OptLevel::kO3}) {
    SCOPED_TRACE(static_cast<int>(level));
    const CompiledRun run = compile_and_compare(qdq_conv_graph(), level, 5);
    EXPECT_EQ(run.diff, 0.0);
    // O0 runs the pairs as written; from O1 they are float ops (and the weights' DQ folds), but
    // the output's integers still come from a QuantizeLinear.
    const bool pairs = level == OptLevel::kO0;
    EXPECT_EQ(has_step(run, "QuantizeLinear node 'xq'"), pairs) << ::testing::PrintToString(run.steps);
    EXPECT_EQ(has_step(run, "DequantizeLinear node 'y'"), pairs) << ::testing::PrintToString(run.steps);
    // Their NaN step is a Shrink, an f32 op: a kernel of its own at O1, inside a region above.
    EXPECT_EQ(has_step(run, "Shrink node"), level == OptLevel::kO1) << ::testing::PrintToString(run.steps);
    EXPECT_FALSE(has_step(run, "IsNaN node") || has_step(run, "Where node")) << ::testing::PrintToString(run.steps);
    EXPECT_TRUE(has_step(run, "QuantizeLinear node")) << ::testing::PrintToString(run.steps);
    // The output spans the quantized range, so a wrong rounding or saturation would show.
    ASSERT_EQ(run.want.count("yq"), 1u);
    const Tensor& yq = run.want.at("yq");
    int low = 0, high = 0;
    for (int64_t i = 0; i < yq.numel(); ++i) {
      low += yq.data<uint8_t>()[i] == 3;      // Relu's zeros
      high += yq.data<uint8_t>()[i] == 255;   // saturated
    }
    EXPECT_GT(low, 0);
    EXPECT_GT(high, 0);
    EXPECT_GT(yq.numel() - low - high, yq.numel() / 4) << low << " zeros, " << high << " saturated";
  }
}

}  // namespace
}  // namespace opfuse::testing_graphs
