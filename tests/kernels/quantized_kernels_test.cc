// The kernels quantized and float16 models run on, against the reference kernels, bit for bit:
// hwy.cast, hwy.dynamic_quantize, onednn.conv_integer (int8 with VNNI, an f32 convolution
// below; both exact for these sums, under 2^24), and the plain-layout pools cpu.max_pool and
// cpu.avg_pool.
#include <limits>

#include "core/target.h"
#include "hwy_test_util.h"

namespace opfuse::hwy_test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Attributes to(int64_t onnx_dtype) { return {{"to", AttrValue(onnx_dtype)}}; }

TEST(ConvertKernels, CastBetweenFloatAndSmallIntegersIsExact) {
  // int -> f32 (u8, i8; i32 beyond 2^24 rounds to nearest even like a C++ cast), odd lengths
  // for the scalar tails, and a length above the threading threshold.
  for (int64_t n : {1, 7, 33, 100003}) {
    SCOPED_TRACE(n);
    check_against_reference(*make_case("Cast", {In{{n}, DType::kU8, {}, 0, 255}}, to(1)), "hwy.cast", 0, 0);
    check_against_reference(*make_case("Cast", {In{{n}, DType::kI8, {}, -128, 127}}, to(1)), "hwy.cast", 0, 0);
    check_against_reference(*make_case("Cast", {In{{n}, DType::kI32, {}, -3e9 / 2, 3e9 / 2}}, to(1)), "hwy.cast", 0, 0);
    check_against_reference(*make_case("Cast", {In{{n}, DType::kBool}}, to(1)), "hwy.cast", 0, 0);
    check_against_reference(*make_case("Cast", {In{{n}}}, to(1)), "hwy.cast", 0, 0);  // f32 -> f32: a copy
  }
  // f32 <-> f16 with the values that are easy to get wrong: NaN, +-Inf, overflow to Inf above
  // 65504, f16 subnormals, f32 subnormals (which flush to +-0 in f16), ties of the rounding.
  const std::vector<float> specials = {kNaN,   kInf,     -kInf,   65504.0f, 65520.0f, 1e6f,    -70000.0f,
                                       6e-8f,  3e-5f,    -1e-7f,  1e-40f,   -1e-42f,  1.0f,    1.00048828125f,
                                       0.333f, -2.5e-3f, 2049.0f, 2051.0f,  0.0f,     -0.0f,   1234.5678f};
  auto halves = make_case("Cast", {In{{static_cast<int64_t>(specials.size())}, DType::kF32, {}, 0, 0, specials}}, to(10));
  const std::vector<Tensor> h = check_against_reference(*halves, "hwy.cast", 0, 0);
  // ... and back: every f16 value above, widened.
  auto widened = make_case("Cast", {In{{static_cast<int64_t>(specials.size())}, DType::kF16, {}, 0, 0}}, to(1));
  widened->inputs[0] = h[0];
  check_against_reference(*widened, "hwy.cast", 0, 0);
  // f32 -> u8 / i8: truncation toward zero and the low byte, as the reference's conversion
  // through int64; NaN, +-Inf and magnitudes of 2^31 and more give 0.
  const std::vector<float> bytes = {kNaN, kInf, -kInf, 0.0f, -0.0f, 0.7f, -0.7f, 1.5f, -1.5f, 127.9f, 128.0f,
                                    -128.0f, -129.0f, 255.0f, 256.0f, 257.5f, -300.25f, 1e6f, -1e6f, 2147483520.0f,
                                    2147483648.0f, -2147483648.0f, 3e9f, 1e20f, -1e20f, 65537.0f, 200.0f};
  for (int64_t code : {2, 3}) {
    SCOPED_TRACE(code);
    check_against_reference(*make_case("Cast", {In{{static_cast<int64_t>(bytes.size())}, DType::kF32, {}, 0, 0, bytes}}, to(code)),
                            "hwy.cast", 0, 0);
    check_against_reference(*make_case("Cast", {In{{100003}, DType::kF32, {}, -400, 400}}, to(code)), "hwy.cast", 0, 0);
  }
  // Pairs without a vector path stay on the reference kernel.
  EXPECT_EQ(compile(*make_case("Cast", {In{{5}}}, to(7)))->name(), "reference");
}

TEST(ConvertKernels, DynamicQuantizeLinearMatchesTheReference) {
  // Ranges of both signs, all positive (zero point 0), all negative (zero point 255), lengths
  // around the vector width and above the threading threshold.
  for (int64_t n : {1, 5, 16, 17, 1000, 70001}) {
    for (auto [lo, hi] : {std::pair{-3.0, 5.0}, std::pair{0.5, 2.0}, std::pair{-4.0, -1.0}}) {
      SCOPED_TRACE(str_cat(n, " in [", lo, ", ", hi, "]"));
      check_against_reference(*make_case("DynamicQuantizeLinear", {In{{n}, DType::kF32, {}, lo, hi}}, {}, 7, 3),
                              "hwy.dynamic_quantize", 0, 0);
    }
  }
  // All zeros (scale 1 by onnxruntime's convention), a 4-d activation, NaN (left out of the
  // range, quantized to 0), Inf (an infinite range), denormals, and ties of the rounding.
  const std::vector<std::vector<float>> data = {
      {0, 0, 0, 0, 0},
      {kNaN, 1, -2, 3, kNaN, 0.5f, 7, -1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 9},
      {kInf, 1, 2, -3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17},
      {1e-40f, -1e-39f, 3e-42f, 0, 1e-38f, 1e-45f, 2e-40f, 5e-39f, 1e-39f, 0, 0, 0, 0, 0, 0, 0, 0},
      {-1, 0.5f, 1.5f, 2.5f, 254, 255, -0.5f, 3.5f, 100.5f, 101.5f, 0, 0, 0, 0, 0, 0, 0, 0}};
  for (const auto& v : data) {
    check_against_reference(*make_case("DynamicQuantizeLinear", {In{{static_cast<int64_t>(v.size())}, DType::kF32, {}, 0, 0, v}}, {}, 1, 3),
                            "hwy.dynamic_quantize", 0, 0);
  }
  check_against_reference(*make_case("DynamicQuantizeLinear", {In{{2, 8, 13, 11}}}, {}, 5, 3), "hwy.dynamic_quantize", 0, 0);
}

// A ConvInteger with constant weights `w` (u8 or i8, [M, C/group, kh, kw]) and weight zero
// points `w_zero` (none, one, or one per output channel), on a run-time x and x zero point.
struct IntConv {
  std::vector<int64_t> x_dims;
  DType x_type = DType::kU8;
  Tensor w;
  std::optional<Tensor> w_zero;
  Attributes attrs;
  bool x_zero = true;
};

template <typename T>
Tensor random_ints(std::vector<int64_t> dims, uint64_t seed) {
  Tensor t = Tensor::zeros(DTypeOf<T>::value, std::move(dims)).value();
  Random rng(seed);
  fill_uniform(t, rng, std::numeric_limits<T>::lowest(), std::numeric_limits<T>::max());
  return t;
}

void check_conv_integer(const IntConv& conv, const std::string& what) {
  SCOPED_TRACE(what);
  const double lo = conv.x_type == DType::kU8 ? 0 : -128, hi = conv.x_type == DType::kU8 ? 255 : 127;
  std::vector<In> ins = {In{conv.x_dims, conv.x_type, {}, lo, hi}, In{conv.w.dims(), conv.w.dtype(), conv.w}};
  if (conv.x_zero || conv.w_zero) ins.push_back(In{{}, conv.x_type, {}, lo, hi});
  if (conv.w_zero) ins.push_back(In{conv.w_zero->dims(), conv.w_zero->dtype(), *conv.w_zero});
  auto c = make_case("ConvInteger", std::move(ins), conv.attrs, 11);
  // Full-range data is what saturates a non-VNNI int8 product; make sure the extremes occur.
  if (conv.x_type == DType::kU8) {
    c->inputs[0].data<uint8_t>()[0] = 255;
    c->inputs[0].data<uint8_t>()[1] = 0;
  }
  const auto k = compile(*c);
  const bool vnni = active_target().isa >= IsaTier::kAvx512CoreVnni;
  EXPECT_EQ(k->implementation().starts_with("f32 "), !vnni) << k->implementation();
  check_against_reference(*c, "onednn.conv_integer", 0, 0);
}

// Below VNNI the f32 convolution runs oneDNN's direct kernel on the target's blocked layout
// (nChw8c on AVX2), not its gemm convolution on plain NCHW (1.5-2x slower on IS-Net's convs).
TEST(ConvertKernels, ConvIntegerBelowVnniRunsADirectF32Kernel) {
  if (active_target().isa >= IsaTier::kAvx512CoreVnni) GTEST_SKIP() << "VNNI: the int8 path runs";
  auto c = make_case("ConvInteger",
                     {In{{1, 32, 20, 20}, DType::kU8, {}, 0, 255}, In{{32, 32, 3, 3}, DType::kU8, random_ints<uint8_t>({32, 32, 3, 3}, 1)},
                      In{{}, DType::kU8, {}, 0, 255}, In{{}, DType::kU8, Tensor::scalar<uint8_t>(120)}},
                     {{"pads", AttrValue(std::vector<int64_t>{1, 1, 1, 1})}}, 11);
  const auto k = compile(*c);
  EXPECT_TRUE(k->implementation().starts_with("f32 ")) << k->implementation();
  EXPECT_EQ(k->implementation().find("gemm"), std::string::npos) << k->implementation();
  check_against_reference(*c, "onednn.conv_integer", 0, 0);
}

TEST(ConvertKernels, ConvIntegerIsExactForEveryGeometryAndZeroPoint) {
  const Attributes same = {{"pads", AttrValue(std::vector<int64_t>{1, 1, 1, 1})}};
  // uint8 weights with a zero point, as onnxruntime's dynamic quantizer writes them.
  check_conv_integer({{1, 16, 10, 12}, DType::kU8, random_ints<uint8_t>({32, 16, 3, 3}, 1),
                      Tensor::scalar<uint8_t>(143), same},
                     "u8 x u8, scalar weight zero point, pads 1");
  check_conv_integer({{2, 5, 9, 9}, DType::kU8, random_ints<uint8_t>({7, 5, 3, 3}, 2),
                      random_ints<uint8_t>({7}, 3), {}},
                     "per-channel weight zero points, no padding, batch 2, odd channels");
  // Stride, dilation, asymmetric padding, groups, a 1x1 kernel.
  check_conv_integer({{1, 8, 17, 15}, DType::kU8, random_ints<uint8_t>({16, 8, 3, 3}, 4), Tensor::scalar<uint8_t>(98),
                      {{"strides", AttrValue(std::vector<int64_t>{2, 2})},
                       {"pads", AttrValue(std::vector<int64_t>{0, 1, 2, 1})}}},
                     "stride 2, asymmetric pads");
  check_conv_integer({{1, 8, 16, 16}, DType::kU8, random_ints<uint8_t>({8, 8, 3, 3}, 5), Tensor::scalar<uint8_t>(200),
                      {{"dilations", AttrValue(std::vector<int64_t>{2, 2})},
                       {"pads", AttrValue(std::vector<int64_t>{2, 2, 2, 2})}}},
                     "dilation 2");
  check_conv_integer({{1, 8, 9, 9}, DType::kU8, random_ints<uint8_t>({12, 2, 3, 3}, 6), random_ints<uint8_t>({12}, 7),
                      {{"group", AttrValue(int64_t{4})}, {"pads", AttrValue(std::vector<int64_t>{1, 1, 1, 1})}}},
                     "4 groups, per-channel zero points");
  check_conv_integer({{1, 24, 7, 7}, DType::kU8, random_ints<uint8_t>({16, 24, 1, 1}, 8), Tensor::scalar<uint8_t>(128), {}},
                     "1x1, weight zero point 128 (no window sums needed)");
  // int8 weights (symmetric, and with a zero point), int8 activations, no zero points at all.
  check_conv_integer({{1, 16, 8, 8}, DType::kU8, random_ints<int8_t>({16, 16, 3, 3}, 9), std::nullopt, same},
                     "u8 x i8, no weight zero point");
  check_conv_integer({{1, 16, 8, 8}, DType::kU8, random_ints<int8_t>({16, 16, 3, 3}, 10), Tensor::scalar<int8_t>(-5), same},
                     "u8 x i8, weight zero point -5");
  check_conv_integer({{1, 16, 8, 8}, DType::kI8, random_ints<int8_t>({16, 16, 3, 3}, 12), Tensor::scalar<int8_t>(3), same},
                     "i8 x i8");
  check_conv_integer({{1, 16, 8, 8}, DType::kU8, random_ints<uint8_t>({16, 16, 3, 3}, 13), std::nullopt, same, false},
                     "no zero points (x's is 0, w's is 0)");
}

TEST(ConvertKernels, ConvIntegerAfterDynamicQuantizeIsExactEndToEnd) {
  // The exporter's chain on real-valued data: the zero point is computed at run time.
  Graph g;
  g.opset_imports[""] = 13;
  Value* x = g.add_input("x", DType::kF32, make_shape({1, 32, 20, 20}));
  Value* w = g.add_constant("w", random_ints<uint8_t>({32, 32, 3, 3}, 21));
  Value* wz = g.add_constant("wz", Tensor::scalar<uint8_t>(121));
  Node* q = g.add_node("DynamicQuantizeLinear", {x}, {"xq", "xs", "xz"}).value();
  Node* conv = g.add_node("ConvInteger", {q->output(0), w, q->output(2), wz}, {"y"},
                          {{"pads", AttrValue(std::vector<int64_t>{1, 1, 1, 1})}})
                   .value();
  g.add_output(conv->output(0));
  ASSERT_TRUE(infer_shapes(g).is_ok());
  Tensor xt = Tensor::zeros(DType::kF32, {1, 32, 20, 20}).value();
  Random rng(3);
  fill_uniform(xt, rng, -0.7, 2.3);
  // The quantization by both kernels, then the convolution by both.
  std::vector<Tensor> qs;
  for (bool optimised : {true, false}) {
    KernelCompileContext qctx{*q, {nullptr}, 1};
    auto qk = optimised ? create_kernel(qctx) : Result<std::unique_ptr<Kernel>>(make_reference_kernel(*q));
    ASSERT_TRUE(qk.is_ok());
    std::vector<Tensor> outs = allocate_outputs(*q);
    std::vector<Tensor*> out_ptrs = {&outs[0], &outs[1], &outs[2]};
    const Tensor* in[] = {&xt};
    ASSERT_TRUE((*qk)->run(in, out_ptrs).is_ok());
    for (Tensor& t : outs) qs.push_back(t);
  }
  for (size_t i = 0; i < 3; ++i) expect_close(qs[i], qs[3 + i], 0, 0, str_cat("DynamicQuantizeLinear output ", i));
  EXPECT_NE(qs[2].get_int(0), 0);  // data of both signs: a zero point inside the range
  Case c;
  c.node = conv;
  c.inputs = {qs[0], *w->constant(), qs[2], *wz->constant()};
  check_against_reference(c, "onednn.conv_integer", 0, 0);
}

struct PoolCase {
  std::vector<int64_t> dims;
  Attributes attrs;
};

// `op` forced onto `kernel` (as a tuning record would: where oneDNN has a jit kernel for a case
// it comes first), bit for bit against the reference, with NaN, +-Inf and a denormal in the
// first plane.
void check_plain_pool(const std::string& op, const std::string& kernel, const std::vector<PoolCase>& cases) {
  for (const PoolCase& pc : cases) {
    SCOPED_TRACE(str_cat(op, " ", dims_to_string(pc.dims)));
    auto c = make_case(op, {In{pc.dims}}, pc.attrs, 9);
    float* x = c->inputs[0].data<float>();
    x[0] = kNaN;
    x[3] = kInf;
    x[5] = -kInf;
    x[pc.dims[3] + 1] = 1e-40f;
    x[c->inputs[0].numel() - 1] = kNaN;
    KernelCompileContext ctx{*c->node, {nullptr}, 1};
    ctx.kernel = kernel;
    auto k = create_kernel(ctx);
    ASSERT_TRUE(k.is_ok()) << k.status().message();
    ASSERT_EQ((*k)->name(), kernel);
    auto got = allocate_outputs(*c->node), want = allocate_outputs(*c->node);
    ASSERT_TRUE(run_kernel(**k, *c, got).is_ok());
    ASSERT_TRUE(run_kernel(*make_reference_kernel(*c->node), *c, want).is_ok());
    expect_close(got[0], want[0], 0, 0, op);
  }
}

TEST(ConvertKernels, PlainMaxPoolMatchesTheReference) {
  const std::vector<PoolCase> cases = {
      {{1, 3, 8, 8}, {{"kernel_shape", AttrValue(std::vector<int64_t>{2, 2})}, {"strides", AttrValue(std::vector<int64_t>{2, 2})}}},
      {{1, 4, 9, 7}, {{"kernel_shape", AttrValue(std::vector<int64_t>{2, 2})}, {"strides", AttrValue(std::vector<int64_t>{2, 2})},
                      {"ceil_mode", AttrValue(int64_t{1})}}},
      {{2, 3, 11, 13}, {{"kernel_shape", AttrValue(std::vector<int64_t>{3, 3})}, {"strides", AttrValue(std::vector<int64_t>{2, 2})},
                        {"pads", AttrValue(std::vector<int64_t>{1, 1, 1, 1})}}},
      {{1, 2, 12, 12}, {{"kernel_shape", AttrValue(std::vector<int64_t>{3, 2})}, {"dilations", AttrValue(std::vector<int64_t>{2, 3})},
                        {"pads", AttrValue(std::vector<int64_t>{0, 2, 1, 0})}, {"ceil_mode", AttrValue(int64_t{1})},
                        {"strides", AttrValue(std::vector<int64_t>{3, 2})}}},
      {{1, 32, 64, 64}, {{"kernel_shape", AttrValue(std::vector<int64_t>{2, 2})}, {"strides", AttrValue(std::vector<int64_t>{2, 2})},
                         {"ceil_mode", AttrValue(int64_t{1})}}},
      // M-LSD's local-maximum test: 3x3, stride 1, one plane (the contiguous sweep).
      {{1, 1, 19, 21}, {{"kernel_shape", AttrValue(std::vector<int64_t>{3, 3})}, {"pads", AttrValue(std::vector<int64_t>{1, 1, 1, 1})}}},
  };
  check_plain_pool("MaxPool", "cpu.max_pool", cases);
  // IS-Net's 2x2 ceil-mode pool on plain NCHW: oneDNN's simple_nchw is declined, so it is ours
  // unless oneDNN has a jit kernel for it.
  const std::string picked(compile(*make_case("MaxPool", {In{{1, 32, 64, 64}}}, cases[4].attrs))->name());
  EXPECT_TRUE(picked == "cpu.max_pool" || picked == "onednn.pool") << picked;
  // Three spatial dims and the Indices output are left to oneDNN and the reference.
  auto with_indices = make_case("MaxPool", {In{{1, 2, 4, 4}}}, {{"kernel_shape", AttrValue(std::vector<int64_t>{2, 2})}}, 1, 2);
  EXPECT_NE(compile(*with_indices)->name(), "cpu.max_pool");
}

TEST(ConvertKernels, PlainAveragePoolMatchesTheReference) {
  using Ints = std::vector<int64_t>;
  const AttrValue include(int64_t{1});
  const std::vector<PoolCase> cases = {
      {{1, 32, 64, 64}, {{"kernel_shape", AttrValue(Ints{2, 2})}, {"strides", AttrValue(Ints{2, 2})}}},  // fr_gender
      {{1, 4, 9, 7}, {{"kernel_shape", AttrValue(Ints{2, 2})}, {"strides", AttrValue(Ints{2, 2})}, {"ceil_mode", AttrValue(int64_t{1})}}},
      {{1, 4, 9, 7},
       {{"kernel_shape", AttrValue(Ints{3, 2})}, {"strides", AttrValue(Ints{2, 2})}, {"ceil_mode", AttrValue(int64_t{1})},
        {"pads", AttrValue(Ints{1, 0, 1, 1})}, {"count_include_pad", include}}},
      {{2, 3, 11, 13}, {{"kernel_shape", AttrValue(Ints{3, 3})}, {"pads", AttrValue(Ints{1, 1, 1, 1})}}},
      {{2, 3, 11, 13}, {{"kernel_shape", AttrValue(Ints{3, 3})}, {"pads", AttrValue(Ints{1, 1, 1, 1})}, {"count_include_pad", include}}},
      {{1, 10, 32, 32}, {{"kernel_shape", AttrValue(Ints{8, 8})}, {"strides", AttrValue(Ints{8, 8})}}},
  };
  check_plain_pool("AveragePool", "cpu.avg_pool", cases);
  // fr_gender's 2x2 pools on plain NCHW: oneDNN's simple_nchw is declined, so they are ours
  // unless oneDNN has a jit kernel for them.
  const std::string picked(compile(*make_case("AveragePool", {In{{1, 32, 64, 64}}}, cases[0].attrs))->name());
  EXPECT_TRUE(picked == "cpu.avg_pool" || picked == "onednn.pool") << picked;
}

}  // namespace
}  // namespace opfuse::hwy_test
