// integer_products_in_fp32 (passes/integer_products_in_fp32.cc): ONNX Runtime's dynamically
// quantized products (DynamicQuantizeLinear -> MatMulInteger / ConvInteger -> Cast -> Mul) run as
// opfuse::FusedMatMulInteger on cpu.gemm_i16 (bit for bit) and (below VNNI) float32 Convs from O1
// up, matching eager mode's integer reference kernels; refused where the int32 sums are read as
// integers; switched off by name.
#include "graph_test_util.h"
#include "ir/text_format.h"
#include "pipelines/pipeline.h"
#include "runtime/non_finite.h"

namespace opfuse::testing_graphs {
namespace {

constexpr std::string_view kRule = "integer_products_in_fp32";

// `k` x `n` weights of `type` (u8 or i8) with values from `lo` to `hi`, as text-format constants.
std::string weights(int64_t k, int64_t n, int lo, int hi) {
  std::string out;
  for (int64_t i = 0; i < k * n; ++i) out += str_cat(i ? ", " : "", lo + (i * 37 + i / n * 11) % (hi - lo + 1));
  return out;
}

// onnxruntime's form: per-column weight zero points (u8 weights, or i8 with `i8`), the sums
// dequantized by Mul(Cast(sums), Mul(x_scale, w_scale)) (`scaled`; w_scale per column) and
// biased, plus a residual input %r (`residual`), then `tail` ("Relu", "Gelu" ... or ""); or the
// sums only cast to float and biased.
struct QuantizedProduct {
  int64_t m = 6, k = 40, n = 24;
  bool scaled = true;
  bool i8 = false;
  bool zero_points = true;  // false: the weights' zero points are all 0 (onnxruntime's int8 default)
  bool residual = false;
  std::string tail;
};

std::string quantized_graph(const QuantizedProduct& q) {
  const std::string wt = q.i8 ? "i8" : "u8";
  std::string zeros;
  for (int64_t j = 0; j < q.n; ++j) {
    zeros += str_cat(j ? ", " : "", !q.zero_points ? 0 : q.i8 ? -20 + j * 7 % 40 : 100 + j * 7 % 60);
  }
  const std::string sums = q.scaled ? R"(  %s = Mul(%xs, %ws)
  %d = Mul(%accf, %s)
  %biased = Add(%d, %b)
)"
                                    : "  %biased = Add(%accf, %b)\n";
  const std::string residual = q.residual ? "  %a = Add(%biased, %r)\n" : "  %a = Identity(%biased)\n";
  const std::string tail = q.tail.empty() ? "  %y = Identity(%a)\n" : str_cat("  %y = ", q.tail, "(%a)\n");
  return str_cat("graph @main (%x: f32[", q.m, ",", q.k, "]",
                 q.residual ? str_cat(", %r: f32[", q.m, ",", q.n, "]") : "", ") {\n  %wq: ", wt, "[", q.k, ",", q.n, "] = const [",
                 weights(q.k, q.n, q.i8 ? -128 : 0, q.i8 ? 127 : 255), "]\n  %wz: ", wt, "[", q.n, "] = const [", zeros,
                 "]\n  %ws: f32[", q.n, "] = const [", weights(1, q.n, 1, 9), "]\n  %b: f32[", q.n, "] = const [",
                 weights(1, q.n, -3, 3), R"(]
  %xq, %xs, %xz = DynamicQuantizeLinear(%x)
  %acc = MatMulInteger(%xq, %wq, %xz, %wz)
  %accf = Cast(%acc) {to = 1}
)", sums, residual, tail, "  return %y\n}\n");
}

// Every input's values at the ends of their quantized range (0 and 255 once quantized).
TensorMap extremes(const Graph& g) {
  TensorMap in = random_inputs(g, 3);
  for (auto& [name, t] : in) {
    float* x = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) x[i] = i % 3 == 0 ? -7.5f : 2.5f;
  }
  return in;
}

// `text` compiled at O1 and O3, on random inputs and on the extremes: exactly eager mode's outputs,
// with `steps` steps naming `kernel`.
void expect_exact_at_o1_and_o3(const std::string& text, std::string_view kernel, size_t steps) {
  for (OptLevel level : {OptLevel::kO1, OptLevel::kO3}) {
    SCOPED_TRACE(static_cast<int>(level));
    for (const CompiledRun& run : {compile_and_compare(text, level), compile_and_compare(text, level, extremes)}) {
      EXPECT_EQ(run.diff, 0.0);
      EXPECT_EQ(run.steps_running(kernel), steps) << ::testing::PrintToString(run.steps);
    }
  }
}

// The product, its dequantization and bias become one opfuse::FusedMatMulInteger on cpu.gemm_i16:
// the same float steps in the same order as eager mode, so bit for bit equal to it, here over
// row tiles, K and N that do not divide into the kernel's (13 rows, odd K, a narrow last panel),
// with a residual Add and a Relu that become its epilogue at O2.
TEST(IntegerProductsInFp32, ADynamicallyQuantizedProductIsOneExactIntegerAnchor) {
  const std::string text = quantized_graph({.m = 13, .k = 41, .n = 24, .residual = true, .tail = "Relu"});
  PassContext ctx;
  const Graph g = pipeline_at(text, OptLevel::kO1, ctx);
  EXPECT_EQ(count_op(g, "FusedMatMulInteger"), 1) << print_graph(g);
  for (std::string_view op : {"MatMulInteger", "Cast", "Mul"}) EXPECT_EQ(count_op(g, op), 0) << op << "\n" << print_graph(g);
  EXPECT_EQ(count_op(g, "Add"), 1) << print_graph(g);  // the residual's, an epilogue from O2
  EXPECT_TRUE(decided(ctx, kRule, true, "as opfuse::FusedMatMulInteger"));
  for (const LevelRun& r : compile_at_every_level(text, 5, 7, 30, 1e30f)) {
    SCOPED_TRACE(str_cat(static_cast<int>(r.level), r.specials ? " with NaN and Inf" : ""));
    EXPECT_EQ(r.run.diff, 0.0);
    EXPECT_EQ(r.run.steps_running("cpu.gemm_i16"), 1u) << ::testing::PrintToString(r.run.steps);
    if (r.level >= OptLevel::kO2) {  // the residual Add and the Relu are the anchor's epilogue
      for (const std::string& step : r.run.steps) EXPECT_FALSE(step.starts_with("Relu node") || step.starts_with("Add node")) << step;
    }
  }
  expect_exact_at_o1_and_o3(text, "cpu.gemm_i16", 1);
}

// Several K blocks (partial sums kept in Y between them; a block is at most 8192 deep up to a
// 2 MiB L2, gemm_blocking.h), int8 weights at both ends of their range, a row count below one
// tile and a tail the vector epilogue runs as a program (Gelu).
TEST(IntegerProductsInFp32, IntegerAnchorIsExactOverKBlocksAndInt8Weights) {
  expect_exact_at_o1_and_o3(quantized_graph({.m = 5, .k = 9001, .n = 40, .i8 = true, .tail = "Gelu"}), "cpu.gemm_i16", 1);
}

// `text` with its input `fixed` made `symbolic`, in one session at O1 and at O3, on `inputs` (a
// plan each): eager mode's outputs (bit for bit where a step runs `kernel`), the second plan
// reusing the first's packing of the weights (kernels/packed_weight_cache.h), and no int8 weights
// %wq left in the graph of a plan running `kernel`, which does not read them when run.
void expect_plans_share_the_weights(std::string text, const std::string& fixed, const std::string& symbolic,
                                    const std::vector<Tensor>& inputs, std::string_view kernel) {
  ASSERT_NE(text.find(fixed), std::string::npos);
  text.replace(text.find(fixed), fixed.size(), symbolic);
  auto g = parse_graph(text);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  for (OptLevel level : {OptLevel::kO1, OptLevel::kO3}) {
    SCOPED_TRACE(opt_level_name(level));
    SessionOptions options;
    options.level = level;
    auto session = Session::create(g->clone(), options);
    ASSERT_TRUE(session.is_ok()) << session.status().message();
    for (const Tensor& x : inputs) {
      SCOPED_TRACE(dims_to_string(x.dims()));
      auto want = run_eager(*g, {{"x", x}});
      auto got = session->run({{"x", x}});
      ASSERT_TRUE(want.is_ok() && got.is_ok()) << (got.is_ok() ? want.status().message() : got.status().message());
      const auto plan = session->plan_for({{"x", x}});
      ASSERT_TRUE(plan.is_ok());
      bool integer = false;
      for (const std::string& step : (*plan)->describe_steps()) integer |= step.find(kernel) != std::string::npos;
      EXPECT_LE(max_relative_difference(*got, *want), integer ? 0.0 : 1e-5);
      if (integer) {
        const Value* w = (*plan)->graph().find_value("wq");
        ASSERT_NE(w, nullptr);
        EXPECT_EQ(w->constant()->raw_data(), nullptr) << "the plan's graph still holds the int8 weights";
      }
    }
    EXPECT_EQ(session->compile_count(), static_cast<int64_t>(inputs.size()));
    EXPECT_GE(session->packed_weights_reused(), 1) << "a later plan packed the weights again";
  }
}

// Values from -2.5 to 3 of `dims`.
Tensor ramp(std::vector<int64_t> dims) {
  Tensor x = Tensor::zeros(DType::kF32, std::move(dims)).value();
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i * 7) % 23) / 4.0f - 2.5f;
  return x;
}

// A session compiles a plan per batch size; the plans share one packing of the weights (the
// 16-bit panels below VNNI, oneDNN's int8 weights with it).
TEST(IntegerProductsInFp32, PlansOfOneSessionShareTheIntegerWeights) {
  expect_plans_share_the_weights(quantized_graph({.m = 6, .k = 40, .n = 24, .tail = "Relu"}), "%x: f32[6,40]",
                                 "%x: f32[batch,40]", {ramp({6, 40}), ramp({9, 40})}, "cpu.gemm_i16");
}

// With VNNI the sums come from oneDNN's int8 matmul (u8 x s8 on vpdpbusd, exact; u8 weights
// shifted to s8 and weight zero points added back through A's row sums) and the tiles only
// dequantize them, still bit for bit eager mode; on other targets the 16-bit tiles make them.
// Over row tiles, odd K, several K blocks of the 16-bit path, a narrow last panel, i8 and u8
// weights with and without zero points, the residual and a tail the epilogue runs as a program.
TEST(IntegerProductsInFp32, WithVnniOneDnnMakesTheSumsBitForBit) {
  const bool vnni = active_target().isa >= IsaTier::kAvx512CoreVnni;
  for (const QuantizedProduct& q :
       {QuantizedProduct{.m = 13, .k = 41, .n = 40, .i8 = true, .zero_points = false, .residual = true, .tail = "Relu"},
        QuantizedProduct{.m = 13, .k = 41, .n = 40, .i8 = true, .residual = true, .tail = "Relu"},
        QuantizedProduct{.m = 13, .k = 41, .n = 40, .residual = true},
        QuantizedProduct{.m = 5, .k = 9001, .n = 24, .i8 = true, .zero_points = false, .tail = "Gelu"},
        QuantizedProduct{.m = 5, .k = 9001, .n = 24, .tail = "Gelu"},
        QuantizedProduct{.m = 7, .k = 1203, .n = 8, .scaled = false},
        QuantizedProduct{.m = 7, .k = 1203, .n = 8, .scaled = false, .i8 = true, .zero_points = false}}) {
    SCOPED_TRACE(str_cat("m ", q.m, " k ", q.k, " n ", q.n, q.i8 ? " i8" : " u8", q.zero_points ? " zero points" : ""));
    const std::string text = quantized_graph(q);
    expect_exact_at_o1_and_o3(text, "cpu.gemm_i16", 1);
    expect_exact_at_o1_and_o3(text, "int8 sums on oneDNN brg", vnni ? 1 : 0);
  }
}

// Sums only cast to float: the anchor with scales of 1, exact, also with x quantized to the ends
// of u8's range and sums beyond 2^24 (K = 1203 at the extremes), where a float32 product's partial
// sums would round and the Cast of the exact int32 sum rounds once.
TEST(IntegerProductsInFp32, UnscaledSumsAreExact) {
  for (int64_t k : {40, 1203}) {
    SCOPED_TRACE(str_cat("K ", k));
    expect_exact_at_o1_and_o3(quantized_graph({.k = k, .n = 8, .scaled = false}), "cpu.gemm_i16", 1);
  }
}

// Attention's products quantized on the fly (both operands from DynamicQuantizeLinear, batched):
// a float32 MatMul of the integers, which is exact here (K = 16), and the dequantizing Mul after it.
TEST(IntegerProductsInFp32, AProductOfTwoComputedOperandsIsAnExactFloatMatMul) {
  const std::string text = R"(graph @main (%q: f32[2,3,5,16], %k: f32[2,3,16,7]) {
  %qq, %qs, %qz = DynamicQuantizeLinear(%q)
  %kq, %ks, %kz = DynamicQuantizeLinear(%k)
  %acc = MatMulInteger(%qq, %kq, %qz, %kz)
  %accf = Cast(%acc) {to = 1}
  %s = Mul(%qs, %ks)
  %y = Mul(%accf, %s)
  return %y
}
)";
  PassContext ctx;
  const Graph g = pipeline_at(text, OptLevel::kO1, ctx);
  EXPECT_EQ(count_op(g, "MatMulInteger"), 0) << print_graph(g);
  EXPECT_TRUE(decided(ctx, kRule, true, "of computed operands as a float32 MatMul"));
  expect_exact_at_o1_and_o3(text, "MatMulInteger node", 0);
}

// Static quantization's QDQ form around a MatMul (per-column int8 weights with zero points, a bias
// and a Gelu after it, and the pair also read by another op): the integer anchor on cpu.gemm_i16,
// within float rounding of eager mode, which multiplies the dequantized operands instead; NaN in x
// becomes the lowest step in both.
TEST(IntegerProductsInFp32, AQdqMatMulRunsOnTheIntegerAnchor) {
  const std::string text = str_cat(R"(graph @main (%x: f32[9,33]) {
  %wq: i8[33,20] = const [)", weights(33, 20, -128, 127), R"(]
  %ws: f32[20] = const [)", weights(1, 20, 1, 9), R"(]
  %wz: i8[20] = const [)", weights(1, 20, -9, 9), R"(]
  %b: f32[20] = const [)", weights(1, 20, -3, 3), R"(]
  %s: f32[] = const [0.03125]
  %z: u8[] = const [117]
  %xq = QuantizeLinear(%x, %s, %z)
  %xd = DequantizeLinear(%xq, %s, %z)
  %w = DequantizeLinear(%wq, %ws, %wz) {axis = 1}
  %m = MatMul(%xd, %w)
  %a = Add(%m, %b)
  %y = Gelu(%a)
  %side = Relu(%xd)
  return %y, %side
}
)");
  PassContext ctx;
  const Graph g = pipeline_at(text, OptLevel::kO1, ctx);
  EXPECT_EQ(count_op(g, "FusedMatMulInteger"), 1) << print_graph(g);
  EXPECT_EQ(count_op(g, "MatMul") + count_op(g, "QuantizeLinear") + count_op(g, "DequantizeLinear"), 0) << print_graph(g);
  EXPECT_TRUE(decided(ctx, kRule, true, "of QDQ operands as opfuse::FusedMatMulInteger"));
  for (const LevelRun& r : compile_at_every_level(text, 9, 4, 40, 1e30f)) {
    SCOPED_TRACE(str_cat(static_cast<int>(r.level), r.specials ? " with NaN and Inf" : ""));
    EXPECT_LE(r.run.diff, 1e-5);
    EXPECT_EQ(r.run.steps_running("cpu.gemm_i16"), 1u) << ::testing::PrintToString(r.run.steps);
  }
}

// IS-Net's form: DynamicQuantizeLinear, ConvInteger of u8 (or i8) weights with a zero point per
// output channel, onnxruntime's dequantization, a bias reshaped to [1, M, 1, 1] (by a Reshape, as
// the quantizer writes it), an optional residual Add, then Relu.
struct QuantizedConvGraph {
  int64_t c = 8, m = 16, h = 6, w = 6, k = 3;
  std::string attrs = "pads = [1, 1, 1, 1]";
  std::string y = "1,16,6,6";  // the output's dims (for the residual)
  bool i8 = false;
  bool residual = false;
  int64_t group = 1;  // other than 1: add "group = N" to attrs
};

std::string quantized_conv(const QuantizedConvGraph& q = {}) {
  const std::string wt = q.i8 ? "i8" : "u8";
  const int64_t cg = q.c / q.group;
  return str_cat("graph @main (%x: f32[1,", q.c, ",", q.h, ",", q.w, "]", q.residual ? str_cat(", %r: f32[", q.y, "]") : "",
                 ") {\n  %wq: ", wt, "[", q.m, ",", cg, ",", q.k, ",", q.k, "] = const [",
                 weights(q.m * cg * q.k, q.k, q.i8 ? -128 : 0, q.i8 ? 127 : 255), "]\n  %wz: ", wt, "[", q.m, "] = const [",
                 weights(1, q.m, q.i8 ? -30 : 90, q.i8 ? 30 : 200), "]\n  %ws: f32[] = const [0.01]\n  %b: f32[", q.m,
                 "] = const [", weights(1, q.m, -3, 3), "]\n  %shape: i64[4] = const [1, ", q.m, R"(, 1, 1]
  %b4 = Reshape(%b, %shape)
  %xq, %xs, %xz = DynamicQuantizeLinear(%x)
  %acc = ConvInteger(%xq, %wq, %xz, %wz) {)", q.attrs, R"(}
  %accf = Cast(%acc) {to = 1}
  %s = Mul(%xs, %ws)
  %d = Mul(%accf, %s)
  %a = Add(%d, %b4)
)", q.residual ? "  %ar = Add(%a, %r)\n" : "  %ar = Identity(%a)\n", "  %y = Relu(%ar)\n  return %y\n}\n");
}

// Below AVX2 ConvInteger becomes a float32 Conv of dequantized operands; from AVX2, VNNI or not,
// the quantizer, the conv, its dequantization and bias one opfuse::QuantizedConv. A grouped
// ConvInteger (no cpu.conv_i16) is a float32 Conv without VNNI and stays for oneDNN's int8
// convolution with it.
TEST(IntegerProductsInFp32, ConvIntegerFormsPerTarget) {
  for (IsaTier isa : {IsaTier::kSse41, IsaTier::kAvx2, IsaTier::kAvx512Core, IsaTier::kAvx512CoreVnni}) {
    SCOPED_TRACE(std::string(isa_tier_name(isa)));
    const bool vnni = isa >= IsaTier::kAvx512CoreVnni, integer = isa >= IsaTier::kAvx2;
    PassContext grouped_ctx;
    grouped_ctx.target.isa = isa;
    const Graph grouped =
        pipeline_at(quantized_conv({.attrs = "pads = [1, 1, 1, 1], group = 2", .group = 2}), OptLevel::kO1, grouped_ctx);
    EXPECT_EQ(count_op(grouped, "ConvInteger"), vnni ? 1 : 0) << print_graph(grouped);
    EXPECT_EQ(count_op(grouped, "Conv"), vnni ? 0 : 1) << print_graph(grouped);
    EXPECT_EQ(decided(grouped_ctx, kRule, false, "VNNI"), vnni);
    PassContext ctx;
    ctx.target.isa = isa;
    const Graph g = pipeline_at(quantized_conv(), OptLevel::kO1, ctx);
    EXPECT_EQ(count_op(g, "ConvInteger"), 0) << print_graph(g);
    EXPECT_EQ(count_op(g, "Conv"), isa == IsaTier::kSse41 ? 1 : 0) << print_graph(g);
    EXPECT_EQ(count_op(g, "QuantizedConv"), integer ? 1 : 0) << print_graph(g);
    if (integer) {  // the Add of the bias is the anchor's, the Relu its epilogue from O2
      for (std::string_view op : {"DynamicQuantizeLinear", "Cast", "Mul", "Add", "Reshape"}) {
        EXPECT_EQ(count_op(g, op), 0) << op << "\n" << print_graph(g);
      }
    }
    EXPECT_EQ(decided(ctx, kRule, true, "scales folded into its operands"), isa == IsaTier::kSse41);
    EXPECT_EQ(decided(ctx, kRule, true, "as opfuse::QuantizedConv"), integer);
    EXPECT_FALSE(decided(ctx, kRule, false, "VNNI"));
  }
}

// The same for quantized convs, a plan per image size: cpu.conv_i16's 16-bit panels and
// Winograd-transformed filters (from AVX2; below it the conv is a float32 one, packed once too).
TEST(IntegerProductsInFp32, PlansOfOneSessionShareTheQuantizedConvWeights) {
  expect_plans_share_the_weights(quantized_conv(), "%x: f32[1,8,6,6]", "%x: f32[1,8,h,w]",
                                 {ramp({1, 8, 6, 6}), ramp({1, 8, 10, 10})}, "cpu.conv_i16");
}

// On this machine's target at every level, with NaN and Inf in x too: from AVX2 one
// cpu.conv_i16 step and eager mode's outputs bit for bit, the residual Add and Relu in its
// epilogue from O2 (plain at O1 and O2, blocked at O3), VNNI or not.
TEST(IntegerProductsInFp32, ADynamicallyQuantizedConvIsOneExactAnchor) {
  const std::string text = quantized_conv({.residual = true});
  const IsaTier isa = active_target().isa;
  const bool integer = isa >= IsaTier::kAvx2;
  for (const LevelRun& r : compile_at_every_level(text, 5, 7, 30, 1e30f)) {
    SCOPED_TRACE(str_cat(static_cast<int>(r.level), r.specials ? " with NaN and Inf" : ""));
    if (!integer) {
      EXPECT_LE(r.run.diff, 1e-5);
      continue;
    }
    EXPECT_EQ(r.run.diff, 0.0);
    EXPECT_EQ(r.run.steps_running("cpu.conv_i16"), 1u) << ::testing::PrintToString(r.run.steps);
    if (r.level >= OptLevel::kO2) {
      for (const std::string& step : r.run.steps) EXPECT_FALSE(step.starts_with("Relu node") || step.starts_with("Add node")) << step;
    }
  }
}

// The kernel's edges, each bit for bit at O1 (plain) and O3 (blocked), on random inputs and on
// the ends of u8's range: channels that fill no whole block (3 in, 12 in), one output block and
// an odd number of them (a last panel of one block), a 1x1 window, stride 2 with asymmetric
// padding, dilation 2, int8 weights, and rows wider than a tile.
TEST(IntegerProductsInFp32, DynamicallyQuantizedConvKernelEdges) {
  const IsaTier isa = active_target().isa;
  if (isa < IsaTier::kAvx2) GTEST_SKIP() << "no cpu.conv_i16 on this target";
  const std::vector<QuantizedConvGraph> cases = {
      {.c = 3, .m = 8, .h = 9, .w = 13, .y = "1,8,9,13"},
      {.c = 12, .m = 24, .h = 5, .w = 7, .y = "1,24,5,7", .i8 = true},
      {.c = 16, .m = 40, .h = 4, .w = 4, .k = 1, .attrs = "", .y = "1,40,4,4"},
      {.c = 8, .m = 16, .h = 11, .w = 10, .attrs = "strides = [2, 2], pads = [0, 1, 1, 0]", .y = "1,16,5,5"},
      {.c = 24, .m = 16, .h = 9, .w = 9, .attrs = "dilations = [2, 2], pads = [2, 2, 2, 2]", .y = "1,16,9,9"},
      {.c = 96, .m = 32, .h = 3, .w = 20, .y = "1,32,3,20"},  // 12 input blocks: two runs on a 32 KiB L1
  };
  for (const QuantizedConvGraph& q : cases) {
    SCOPED_TRACE(str_cat(q.c, " -> ", q.m, " ", q.attrs));
    expect_exact_at_o1_and_o3(quantized_conv(q), "cpu.conv_i16", 1);
  }
}

// 3x3 stride-1 convs with even output sides run cpu.conv_i16's integer F(2x2, 3x3) at O3 (the
// blocked layout), bit for bit as eager mode on random inputs and on the ends of u8's range:
// several chunks of tile rows, an odd number of output blocks, int8 weights, input channels in
// two runs, a residual; an odd output side stays on the direct tiles.
TEST(IntegerProductsInFp32, DynamicallyQuantizedConvWinogradIsExact) {
  const IsaTier isa = active_target().isa;
  if (isa < IsaTier::kAvx2) GTEST_SKIP() << "no cpu.conv_i16 on this target";
  const std::vector<QuantizedConvGraph> cases = {
      {.c = 24, .m = 40, .h = 30, .w = 14, .y = "1,40,30,14", .i8 = true},
      {.c = 96, .m = 16, .h = 8, .w = 20, .y = "1,16,8,20", .residual = true},
      {.c = 16, .m = 16, .h = 12, .w = 12, .attrs = "pads = [0, 0, 0, 0]", .y = "1,16,10,10"},
  };
  for (const QuantizedConvGraph& q : cases) {
    SCOPED_TRACE(str_cat(q.c, " -> ", q.m, " ", q.h, "x", q.w));
    const std::string text = quantized_conv(q);
    expect_exact_at_o1_and_o3(text, "cpu.conv_i16", 1);
    const CompiledRun o3 = compile_and_compare(text, OptLevel::kO3);
    EXPECT_EQ(o3.steps_running("F(2x2,3x3)"), 1u) << ::testing::PrintToString(o3.steps);
  }
  const CompiledRun odd = compile_and_compare(quantized_conv({.h = 7, .w = 6, .y = "1,16,7,6"}), OptLevel::kO3);
  EXPECT_EQ(odd.diff, 0.0);
  EXPECT_EQ(odd.steps_running("F(2x2,3x3)"), 0u) << ::testing::PrintToString(odd.steps);
}

// Finite inputs give finite outputs (the quantizer's range only overflows beyond +-1.7e38), so
// the plan for finite inputs may keep NaN-dropping kernels after the anchor (oneDNN's max pool).
TEST(IntegerProductsInFp32, QuantizedAnchorsKeepFiniteValuesFinite) {
  PassContext ctx;
  ctx.target.isa = IsaTier::kAvx2;
  for (const std::string& text : {quantized_conv(), quantized_graph({.residual = true, .tail = "Relu"})}) {
    const Graph g = pipeline_at(text, OptLevel::kO1, ctx);
    EXPECT_TRUE(values_that_may_be_non_finite(g, true).empty()) << print_graph(g);
    EXPECT_FALSE(values_that_may_be_non_finite(g, false).empty());
  }
}

// A dilated conv whose off-centre taps read only padding (IS-Net's dilation-8 convs on small
// maps) loses them at O3 (prune_conv_taps): padding is x's zero point, so they add exactly 0.
TEST(IntegerProductsInFp32, DynamicallyQuantizedConvLosesTapsThatReadOnlyPadding) {
  const IsaTier isa = active_target().isa;
  if (isa < IsaTier::kAvx2) GTEST_SKIP() << "no cpu.conv_i16 on this target";
  const std::string text = quantized_conv({.c = 16, .m = 16, .h = 5, .w = 5, .attrs = "dilations = [8, 8], pads = [8, 8, 8, 8]", .y = "1,16,5,5"});
  PassContext ctx;
  const Graph g = pipeline_at(text, OptLevel::kO3, ctx);
  bool pruned = false;
  for (const Node* n : g.nodes()) {
    if (n->op_type() == "QuantizedConv") pruned = AttrReader(*n).get_ints("kernel_shape") == std::vector<int64_t>{1, 1};
  }
  EXPECT_TRUE(pruned) << print_graph(g);
  EXPECT_TRUE(decided(ctx, "prune_conv_taps", true, "3x3 taps -> 1x1"));
  expect_exact_at_o1_and_o3(text, "cpu.conv_i16", 1);
}

// Static quantization's QDQ form around a Conv (a QuantizeLinear -> DequantizeLinear pair on x, of
// `x_zero`'s type, and int8 weights dequantized per output channel): one opfuse::QuantizedConv of
// x with the pair's constant scale and zero point from AVX2, VNNI or not, on cpu.conv_i16, within
// float rounding of eager mode (which convolves the dequantized operands in float), NaN in x
// the lowest step in both; a grouped one stays.
std::string qdq_conv(const std::string& x_zero, int64_t group = 1) {
  return str_cat(R"(graph @main (%x: f32[1,8,7,9]) {
  %wq: i8[16,)", 8 / group, R"(,3,3] = const [)", weights(16 * 8 / group * 3, 3, -128, 127), R"(]
  %ws: f32[16] = const [)", weights(1, 16, 1, 9), R"(]
  %wz: i8[16] = const [)", weights(1, 16, -9, 9), R"(]
  %b: f32[16] = const [)", weights(1, 16, -3, 3), R"(]
  %s: f32[] = const [0.03125]
  %z: )", x_zero, R"(
  %xq = QuantizeLinear(%x, %s, %z)
  %xd = DequantizeLinear(%xq, %s, %z)
  %w = DequantizeLinear(%wq, %ws, %wz) {axis = 0}
  %c = Conv(%xd, %w, %b) {pads = [1, 1, 1, 1], group = )", group, R"(}
  %y = Relu(%c)
  return %y
}
)");
}

TEST(IntegerProductsInFp32, AQdqConvIsOneQuantizedConv) {
  for (const std::string x_zero : {"u8[] = const [117]", "i8[] = const [-11]"}) {
    SCOPED_TRACE(x_zero);
    const std::string text = qdq_conv(x_zero);
    for (IsaTier isa : {IsaTier::kSse41, IsaTier::kAvx2, IsaTier::kAvx512CoreVnni}) {
      PassContext ctx;
      ctx.target.isa = isa;
      const Graph g = pipeline_at(text, OptLevel::kO1, ctx);
      const bool integer = isa >= IsaTier::kAvx2;
      EXPECT_EQ(count_op(g, "QuantizedConv"), integer ? 1 : 0) << print_graph(g);
      EXPECT_EQ(count_op(g, "Conv"), integer ? 0 : 1) << print_graph(g);
      EXPECT_TRUE(integer ? decided(ctx, kRule, true, "of QDQ operands as opfuse::QuantizedConv")
                          : decided(ctx, kRule, false, "below AVX2"));
    }
    const bool integer = active_target().isa >= IsaTier::kAvx2;
    for (const LevelRun& r : compile_at_every_level(text, 9, 4, 40, 1e30f)) {
      SCOPED_TRACE(str_cat(static_cast<int>(r.level), r.specials ? " with NaN and Inf" : ""));
      EXPECT_LE(r.run.diff, 1e-5);
      EXPECT_EQ(r.run.steps_running("cpu.conv_i16"), integer ? 1u : 0u) << ::testing::PrintToString(r.run.steps);
    }
  }
  PassContext ctx;
  ctx.target.isa = IsaTier::kAvx2;
  const Graph g = pipeline_at(qdq_conv("u8[] = const [117]", 2), OptLevel::kO1, ctx);
  EXPECT_EQ(count_op(g, "QuantizedConv"), 0) << print_graph(g);
  EXPECT_TRUE(decided(ctx, kRule, false, "a grouped conv"));
}

// Static quantization's operator form: u8 in, per-channel int8 weights, int32 bias, u8 out.
std::string qlinear_graph(bool conv) {
  const std::string w = conv ? str_cat("%w: i8[6,4,3,3] = const [", weights(6 * 4 * 3, 3, -127, 127), "]")
                             : str_cat("%w: i8[36,6] = const [", weights(36, 6, -127, 127), "]");
  const std::string x = conv ? "%x: u8[1,4,7,7]" : "%x: u8[5,36]";
  const std::string product = conv ? "QLinearConv(%x, %xs, %xz, %w, %ws, %wz, %ys, %yz, %b) {pads = [1, 1, 1, 1]}"
                                   : "QLinearMatMul(%x, %xs, %xz, %w, %ws, %wz, %ys, %yz)";
  return str_cat("graph @main (", x, ") {\n  ", w, R"(
  %xs: f32[] = const [0.05]
  %xz: u8[] = const [120]
  %ws: f32[6] = const [0.01, 0.02, 0.015, 0.03, 0.005, 0.02]
  %wz: i8[6] = const [0, 0, 0, 0, 0, 0]
  %ys: f32[] = const [0.4]
  %yz: u8[] = const [110]
  %b: i32[6] = const [100, -250, 4000, -30, 0, 777]
  %y = )", product, R"(
  return %y
}
)");
}

// QLinearConv as float ops, within one step of the reference; QLinearMatMul on the integer
// anchor, bit for bit.
TEST(IntegerProductsInFp32, QLinearConvWithinOneStepAndQLinearMatMulExact) {
  const auto bytes = [](const Graph& g) {
    Tensor x = Tensor::zeros(DType::kU8, *static_dims(*g.inputs()[0]->shape)).value();
    for (int64_t i = 0; i < x.numel(); ++i) x.data<uint8_t>()[i] = static_cast<uint8_t>((i * 53 + 7) % 256);
    return TensorMap{{"x", x}};
  };
  for (bool conv : {true, false}) {
    SCOPED_TRACE(conv ? "QLinearConv" : "QLinearMatMul");
    const std::string text = qlinear_graph(conv);
    PassContext ctx;
    const Graph g = pipeline_at(text, OptLevel::kO1, ctx);
    for (const PassDecision& d : ctx.decisions) {
      EXPECT_TRUE(d.pass != kRule || d.applied) << d.what << ": " << d.reason;
    }
    EXPECT_EQ(count_op(g, conv ? "QLinearConv" : "QLinearMatMul"), 0) << print_graph(g);
    EXPECT_EQ(count_op(g, conv ? "Conv" : "FusedMatMulInteger"), 1) << print_graph(g);
    for (OptLevel level : {OptLevel::kO1, OptLevel::kO3}) {
      SCOPED_TRACE(static_cast<int>(level));
      const CompiledRun run = compile_and_compare(text, level, bytes);
      const Tensor& want = run.want.at("y");
      double top = 0;
      for (int64_t i = 0; i < want.numel(); ++i) top = std::max(top, want.get_double(i));
      EXPECT_GT(top, 150);  // the outputs spread over the range, not saturated at one end
      if (conv) {
        EXPECT_LE(run.diff * top, 1.0 + 1e-9);  // at most one quantization step from eager mode
      } else {
        EXPECT_EQ(run.diff, 0.0);
        EXPECT_EQ(run.steps_running("cpu.gemm_i16"), 1u) << ::testing::PrintToString(run.steps);
      }
    }
  }
}

// A zero y_scale makes the reference's multiplier infinite, whose products it saturates (NaN
// to the lowest step): left to the reference kernel, with the reason.
TEST(IntegerProductsInFp32, QLinearWithAZeroOutputScaleStays) {
  std::string text = qlinear_graph(false);
  text.replace(text.find("%ys: f32[] = const [0.4]"), 24, "%ys: f32[] = const [0]");
  PassContext ctx;
  const Graph g = pipeline_at(text, OptLevel::kO1, ctx);
  EXPECT_EQ(count_op(g, "QLinearMatMul"), 1) << print_graph(g);
  EXPECT_TRUE(decided(ctx, kRule, false, "zero y_scale"));
}

// A bias of another length than the output channels is a clear error of shape inference, before
// the rule (which refuses one too) could read past the weights' scales.
TEST(IntegerProductsInFp32, AMalformedBiasIsAClearError) {
  std::string text = qlinear_graph(true);
  text.replace(text.find("%b: i32[6] = const [100, -250, 4000, -30, 0, 777]"), 49, "%b: i32[5] = const [100, -250, 4000, -30, 0]");
  auto g = parse_graph(text);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  PassContext ctx;
  const Status s = run_pipeline(*g, OptLevel::kO1, {}, ctx);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("QLinearConv"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("bias B has shape [5]; expected [6]"), std::string::npos) << s.message();
}

// Sums read as integers stay a MatMulInteger, on cpu.gemm_i16's int32 output: the reference's sums.
TEST(IntegerProductsInFp32, IntegerSumsReadAsIntegersStayIntegers) {
  const std::string text = str_cat(R"(graph @main (%xq: u8[7,40]) {
  %wq: i8[40,20] = const [)", weights(40, 20, -128, 127), R"(]
  %xz: u8[] = const [3]
  %wz: i8[] = const [-5]
  %one: i32[] = const [1]
  %acc = MatMulInteger(%xq, %wq, %xz, %wz)
  %y = Add(%acc, %one)
  return %y
}
)");
  PassContext ctx;
  const Graph g = pipeline_at(text, OptLevel::kO2, ctx);
  EXPECT_EQ(count_op(g, "MatMulInteger"), 1) << print_graph(g);
  EXPECT_TRUE(decided(ctx, kRule, false, "the int32 sums are read by Add"));
  const auto bytes = [](const Graph& graph) {
    Tensor x = Tensor::zeros(DType::kU8, *static_dims(*graph.inputs()[0]->shape)).value();
    for (int64_t i = 0; i < x.numel(); ++i) x.data<uint8_t>()[i] = static_cast<uint8_t>(i % 5 == 0 ? 255 : (i * 53 + 7) % 256);
    return TensorMap{{"xq", x}};
  };
  for (OptLevel level : {OptLevel::kO0, OptLevel::kO2}) {
    const CompiledRun run = compile_and_compare(text, level, bytes);
    EXPECT_EQ(run.diff, 0.0);
    EXPECT_EQ(run.steps_running("MatMulInteger node 'MatMulInteger' -> cpu.gemm_i16"), 1u) << ::testing::PrintToString(run.steps);
  }
}

// A malformed opfuse::FusedMatMulInteger written directly (a model may name opfuse's ops) is a
// clear error of shape inference naming the node and the operand.
TEST(IntegerProductsInFp32, AMalformedIntegerAnchorIsAClearError) {
  const std::string body = R"(  %w: i8[4,3] = const [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
  %as: f32[] = const [0.5]
  %az: u8[] = const [3]
)";
  struct Case {
    std::string decl, call, message;
  };
  const Case cases[] = {
      {"  %bs: f32[2] = const [1, 2]\n", "opfuse::FusedMatMulInteger(%x, %w, _, _, %as, %az, %bs)", "b_scale (input 6) has 2 values; expected one or N = 3"},
      {"  %bs: f32[] = const [1]\n", "opfuse::FusedMatMulInteger(%x, %w)", "a_scale (input 4) and b_scale (input 6) are required"},
      {"  %bs: f32[] = const [1]\n  %b: f32[5] = const [1, 2, 3, 4, 5]\n",
       "opfuse::FusedMatMulInteger(%x, %w, %b, _, %as, %az, %bs)", "bias [5] must be [N]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.call);
    auto g = parse_graph(str_cat("graph @main (%x: u8[2,4]) {\n", body, c.decl, "  %y = ", c.call, "\n  return %y\n}\n"));
    const Status s = g.is_ok() ? Session::create(std::move(*g), SessionOptions{}).status() : g.status();
    EXPECT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("FusedMatMulInteger"), std::string::npos) << s.message();
  }
}

TEST(IntegerProductsInFp32, AMalformedQuantizedConvIsAClearError) {
  struct Case {
    std::string x, decl, call, message;
  };
  const std::string w = "  %w: u8[4,3,1,1] = const [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]\n  %ws: f32[] = const [0.5]\n";
  const Case cases[] = {
      {"f32[1,3,4,4]", "  %ws4: f32[2] = const [1, 2]\n", "opfuse::QuantizedConv(%x, %w, _, _, %ws4)", "w_scale (input 4) has 2 values; expected one or M = 4"},
      {"f32[1,3,4,4]", "", "opfuse::QuantizedConv(%x, %w)", "w_scale (input 4) is required"},
      {"f32[1,3,4,4]", "  %xs: f32[2] = const [1, 2]\n", "opfuse::QuantizedConv(%x, %w, _, _, %ws, _, %xs)", "x_scale (input 6) has 2 values; expected one"},
      {"f32[1,3,4,4]", "  %xz: u8[] = const [3]\n", "opfuse::QuantizedConv(%x, %w, _, _, %ws, _, _, %xz)", "x_zero (input 7) without x_scale"},
      {"f32[1,1,4,4,16]", "", "opfuse::QuantizedConv(%x, %w, _, _, %ws) {block = 8}", "does not hold 3 channels in blocks of 8"},
      {"u8[1,3,4,4]", "", "opfuse::QuantizedConv(%x, %w, _, _, %ws)", "X (input 0) has dtype u8; expected f32"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.call);
    auto g = parse_graph(str_cat("graph @main (%x: ", c.x, ") {\n", w, c.decl, "  %y = ", c.call, "\n  return %y\n}\n"));
    const Status s = g.is_ok() ? Session::create(std::move(*g), SessionOptions{}).status() : g.status();
    EXPECT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("QuantizedConv"), std::string::npos) << s.message();
  }
}

TEST(IntegerProductsInFp32, SwitchedOffByNameKeepsTheIntegerProduct) {
  PassContext ctx;
  const Graph g = pipeline_without_rule(quantized_graph({.k = 8, .n = 4}), OptLevel::kO1, std::string(kRule), ctx);
  EXPECT_EQ(count_op(g, "MatMulInteger"), 1) << print_graph(g);
  for (const PassDecision& d : ctx.decisions) EXPECT_NE(d.pass, kRule);
}

}  // namespace
}  // namespace opfuse::testing_graphs
