// The quantization ops (ops/quantize.cc, integer_matmul.cc, integer_conv.cc) on what the ONNX node
// tests leave out: ties, saturation at both ends, NaN, negative axes, degenerate ranges, non-zero
// zero points checked against float computations, symbolic shapes and the errors.
#include <cmath>
#include <limits>

#include "core/random.h"
#include "tensor_test_util.h"

namespace opfuse::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Tensor f32s(std::vector<float> v) { return tv<float>({static_cast<int64_t>(v.size())}, v); }

// QuantizeLinear of a 1-d x with one scale and zero point of type Q.
template <typename Q>
NodeRun quantize(std::vector<float> x, float scale, Q zero_point) {
  return run_node("QuantizeLinear", {in(f32s(std::move(x))), cst(Tensor::scalar<float>(scale)),
                                     cst(Tensor::scalar<Q>(zero_point))});
}

TEST(QuantizeLinear, RoundsHalfToEven) {
  auto r = quantize<int8_t>({0.5f, 1.5f, 2.5f, 3.5f, -0.5f, -1.5f, -2.5f, -3.5f, 2.4999998f, 2.5000002f},
                            1.0f, 0);
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  expect_tensor<int8_t>(r.outputs[0], {10}, {0, 2, 2, 4, 0, -2, -2, -4, 2, 3});
  // The tie is x / scale's, before the zero point is added: 5 / 2 = 2.5 -> 2, + 10 = 12.
  auto s = quantize<uint8_t>({5, 7, -5}, 2.0f, 10);
  expect_tensor<uint8_t>(s.outputs[0], {3}, {12, 14, 8});
}

TEST(QuantizeLinear, SaturatesAtBothEnds) {
  auto u = quantize<uint8_t>({-1, -0.5f, 255, 255.5f, 256, 1e10f, -1e10f, kInf, -kInf}, 1.0f, 0);
  ASSERT_TRUE(u.run.is_ok()) << u.run.message();
  expect_tensor<uint8_t>(u.outputs[0], {9}, {0, 0, 255, 255, 255, 255, 0, 255, 0});
  auto i = quantize<int8_t>({-129, -128, 127, 128, 1e30f, -1e30f, kInf, -kInf}, 1.0f, 0);
  expect_tensor<int8_t>(i.outputs[0], {8}, {-128, -128, 127, 127, 127, -128, 127, -128});
  // The zero point shifts the range the rounded value may take.
  auto shifted = quantize<uint8_t>({10, -300, 4}, 1.0f, 250);
  expect_tensor<uint8_t>(shifted.outputs[0], {3}, {255, 0, 254});
  auto signed_shift = quantize<int8_t>({-100, 100}, 1.0f, -50);
  expect_tensor<int8_t>(signed_shift.outputs[0], {2}, {-128, 50});
}

// NaN has no quantized value in the spec; ONNX's reference (rint, cast to int32, clip) gives the
// low end of the range on x86, and so do we, whatever the zero point.
TEST(QuantizeLinear, NaNBecomesTheLowestValue) {
  expect_tensor<uint8_t>(quantize<uint8_t>({kNaN, 1}, 1.0f, 7).outputs[0], {2}, {0, 8});
  expect_tensor<int8_t>(quantize<int8_t>({kNaN, -kNaN}, 0.5f, 3).outputs[0], {2}, {-128, -128});
}

TEST(QuantizeLinear, DefaultZeroPointIsUint8Zero) {
  auto r = run_node("QuantizeLinear", {in(f32s({-3, 3.5f, 600})), cst(Tensor::scalar<float>(1))});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.values[0]->dtype, DType::kU8);
  expect_tensor<uint8_t>(r.outputs[0], {3}, {0, 4, 255});
}

TEST(QuantizeLinear, PerAxisWithNegativeAxis) {
  const Tensor x = tv<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  // axis -1: one (scale, zero point) per column.
  auto cols = run_node("QuantizeLinear", {in(x), cst(f32s({1, 2, 4})), cst(tv<int8_t>({3}, {0, -1, 10}))},
                       {{"axis", int64_t{-1}}});
  ASSERT_TRUE(cols.run.is_ok()) << cols.run.message();
  EXPECT_EQ(cols.shape(), "[2,3]");
  // 2/2 = 1 - 1 = 0; 3/4 = 0.75 -> 1 + 10; 4/1 = 4; 5/2 = 2.5 -> 2 - 1; 6/4 = 1.5 -> 2 + 10.
  expect_tensor<int8_t>(cols.outputs[0], {2, 3}, {1, 0, 11, 4, 1, 12});
  // axis -2: one per row.
  auto rows = run_node("QuantizeLinear", {in(x), cst(f32s({1, 0.5f})), cst(tv<uint8_t>({2}, {100, 0}))},
                       {{"axis", int64_t{-2}}});
  expect_tensor<uint8_t>(rows.outputs[0], {2, 3}, {101, 102, 103, 8, 10, 12});
  auto dq = run_node("DequantizeLinear", {in(tv<int8_t>({2, 3}, {1, 0, 11, 4, 1, 12})), cst(f32s({1, 2, 4})),
                                          cst(tv<int8_t>({3}, {0, -1, 10}))},
                     {{"axis", int64_t{-1}}});
  ASSERT_TRUE(dq.run.is_ok()) << dq.run.message();
  expect_tensor<float>(dq.outputs[0], {2, 3}, {1, 2, 4, 4, 4, 8});
}

TEST(QuantizeLinear, ParameterErrorsNameTheNodeAndShapes) {
  const Tensor x = tv<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_user_error(run_node("QuantizeLinear", {in(x), cst(f32s({1, 2, 3, 4}))}, {{"axis", int64_t{1}}}).build,
                    {"QuantizeLinear node 'n'", "scale (input 1)", "[4]", "[2,3]"});
  expect_user_error(run_node("QuantizeLinear", {in(x), cst(f32s({1, 2, 3}))}, {{"axis", int64_t{-3}}}).build,
                    {"QuantizeLinear node 'n'", "axis -3"});
  expect_user_error(run_node("QuantizeLinear", {in(x), cst(f32s({1, 2, 3})), cst(tv<uint8_t>({2}, {0, 0}))}).build,
                    {"zero point (input 2)", "scale (input 1)"});
  expect_user_error(run_node("QuantizeLinear", {in(x), cst(Tensor::scalar<float>(1)),
                                                cst(Tensor::scalar<int32_t>(0))}).build,
                    {"zero point (input 2)", "i32", "u8 or i8"});
}

TEST(DequantizeLinear, Int32HasNoZeroPoint) {
  auto ok = run_node("DequantizeLinear", {in(tv<int32_t>({3}, {-5, 100000, 7})), cst(Tensor::scalar<float>(0.5f))});
  ASSERT_TRUE(ok.run.is_ok()) << ok.run.message();
  expect_tensor<float>(ok.outputs[0], {3}, {-2.5f, 50000, 3.5f});
  auto zero = run_node("DequantizeLinear", {in(tv<int32_t>({1}, {4})), cst(Tensor::scalar<float>(2)),
                                            cst(Tensor::scalar<int32_t>(0))});
  expect_tensor<float>(zero.outputs[0], {1}, {8});
  expect_user_error(run_node("DequantizeLinear", {in(tv<int32_t>({1}, {4})), cst(Tensor::scalar<float>(2)),
                                                  cst(Tensor::scalar<int32_t>(1))}).run,
                    {"DequantizeLinear node 'n'", "zero point must be 0"});
  expect_user_error(run_node("DequantizeLinear", {in(tv<uint8_t>({1}, {4})), cst(Tensor::scalar<float>(2)),
                                                  cst(Tensor::scalar<int8_t>(1))}).build,
                    {"zero point (input 2)", "i8", "u8"});
}

TEST(DynamicQuantizeLinear, AllZerosHasScaleOne) {
  auto r = run_node("DynamicQuantizeLinear", {in(tv<float>({2, 2}, {0, 0, -0.0f, 0}))}, {}, 3);
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  expect_tensor<uint8_t>(r.outputs[0], {2, 2}, {0, 0, 0, 0});
  expect_tensor<float>(r.outputs[1], {}, {1.0f});
  expect_tensor<uint8_t>(r.outputs[2], {}, {0});
}

// The range always includes 0: all-positive data has zero point 0, all-negative 255. The
// expected values are numpy's, computed in f32 as the ONNX node tests do (127.49999 -> 127).
TEST(DynamicQuantizeLinear, OneSignedDataKeepsZeroInRange) {
  auto pos = run_node("DynamicQuantizeLinear", {in(f32s({1, 2, 4, 3.3f}))}, {}, 3);
  ASSERT_TRUE(pos.run.is_ok()) << pos.run.message();
  expect_tensor<uint8_t>(pos.outputs[0], {4}, {64, 127, 255, 210});
  expect_tensor<float>(pos.outputs[1], {}, {4.0f / 255.0f});
  expect_tensor<uint8_t>(pos.outputs[2], {}, {0});
  auto neg = run_node("DynamicQuantizeLinear", {in(f32s({-1, -2.5f, -4}))}, {}, 3);
  expect_tensor<uint8_t>(neg.outputs[0], {3}, {191, 96, 0});
  expect_tensor<uint8_t>(neg.outputs[2], {}, {255});
}

TEST(QuantizationOps, SymbolicShapes) {
  Graph g;
  auto q = infer_node("QuantizeLinear", {{DType::kF32, sym({"batch", 3})}, {DType::kF32, sym({3})},
                                         {DType::kI8, sym({3})}},
                      {}, 1, &g);
  ASSERT_TRUE(q.is_ok()) << q.status().message();
  EXPECT_EQ((*q)[0]->dtype, DType::kI8);
  EXPECT_EQ(shape_to_string(*(*q)[0]->shape), "[batch,3]");
  Graph g2;
  auto d = infer_node("DynamicQuantizeLinear", {{DType::kF32, sym({"batch", "seq"})}}, {}, 3, &g2);
  ASSERT_TRUE(d.is_ok()) << d.status().message();
  EXPECT_EQ(shape_to_string(*(*d)[0]->shape), "[batch,seq]");
  EXPECT_EQ(shape_to_string(*(*d)[1]->shape), "[]");
  EXPECT_EQ((*d)[2]->dtype, DType::kU8);
  Graph g3;
  auto m = infer_node("MatMulInteger", {{DType::kU8, sym({"batch", "seq", 8})}, {DType::kI8, sym({8, 16})}},
                      {}, 1, &g3);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ((*m)[0]->dtype, DType::kI32);
  EXPECT_EQ(shape_to_string(*(*m)[0]->shape), "[batch,seq,16]");
  Graph g4;
  auto c = infer_node("ConvInteger", {{DType::kU8, sym({"n", 3, "h", 10})}, {DType::kU8, sym({4, 3, 3, 3})}},
                      {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{1, 2}}},
                      1, &g4);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ((*c)[0]->dtype, DType::kI32);
  EXPECT_EQ(shape_to_string(*(*c)[0]->shape), "[n,4,?,5]");
  Graph g5;
  auto bad = infer_node("MatMulInteger", {{DType::kU8, sym({"b", 4, 8})}, {DType::kF32, sym({8, 2})}}, {}, 1, &g5);
  expect_user_error(bad.status(), {"MatMulInteger node 'n'", "B (input 1)", "f32"});
}

// Uniform integers in [lo, hi] as a tensor of T.
template <typename T>
Tensor random_ints(std::vector<int64_t> dims, int lo, int hi, uint64_t seed) {
  Tensor f = Tensor::zeros(DType::kF32, dims).value();
  Random rng(seed);
  fill_uniform(f, rng, static_cast<float>(lo), static_cast<float>(hi) + 0.999f);
  Tensor t = Tensor::zeros(DTypeOf<T>::value, dims).value();
  for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(std::floor(f.data<float>()[i]));
  return t;
}

// x less its zero point, as f32 (exact: small integers), with the zero point per entry of
// `axis` (size 1 per tensor).
Tensor shifted_f32(const Tensor& x, const std::vector<int>& zero, int64_t axis) {
  Tensor out = Tensor::zeros(DType::kF32, x.dims()).value();
  int64_t inner = 1;
  for (int64_t i = axis + 1; i < x.rank(); ++i) inner *= x.dim(i);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int z = zero.size() == 1 ? zero[0] : zero[(i / inner) % static_cast<int64_t>(zero.size())];
    out.data<float>()[i] = static_cast<float>(x.get_int(i) - z);
  }
  return out;
}

void expect_int32_equals_float(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.dtype(), DType::kI32);
  ASSERT_EQ(got.dims(), want.dims());
  int64_t bad = 0;
  for (int64_t i = 0; i < got.numel(); ++i) bad += got.data<int32_t>()[i] != static_cast<int32_t>(want.data<float>()[i]);
  EXPECT_EQ(bad, 0) << "of " << got.numel();
}

TEST(MatMulInteger, ZeroPointsMatchAFloatMatMul) {
  // Broadcast batch dims, u8 A with a per-tensor zero point, i8 B with one per column.
  const Tensor a = random_ints<uint8_t>({2, 1, 3, 5}, 0, 255, 1);
  const Tensor b = random_ints<int8_t>({4, 5, 6}, -128, 127, 2);
  const std::vector<int> bz = {3, -7, 0, 127, -128, 1};
  std::vector<int8_t> bz8(bz.begin(), bz.end());
  auto r = run_node("MatMulInteger", {in(a), in(b), cst(Tensor::scalar<uint8_t>(131)), cst(tv<int8_t>({6}, bz8))});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[2,4,3,6]");
  auto f = run_node("MatMul", {in(shifted_f32(a, {131}, 0)), in(shifted_f32(b, bz, 2))});
  ASSERT_TRUE(f.run.is_ok()) << f.run.message();
  expect_int32_equals_float(r.outputs[0], f.outputs[0]);

  // A 2-d A with one zero point per row.
  const Tensor a2 = random_ints<int8_t>({3, 5}, -128, 127, 3);
  const Tensor b2 = random_ints<uint8_t>({5, 2}, 0, 255, 4);
  auto rows = run_node("MatMulInteger", {in(a2), in(b2), cst(tv<int8_t>({3}, {-5, 0, 90})),
                                         cst(Tensor::scalar<uint8_t>(200))});
  ASSERT_TRUE(rows.run.is_ok()) << rows.run.message();
  auto f2 = run_node("MatMul", {in(shifted_f32(a2, {-5, 0, 90}, 0)), in(shifted_f32(b2, {200}, 0))});
  expect_int32_equals_float(rows.outputs[0], f2.outputs[0]);

  expect_user_error(run_node("MatMulInteger", {in(a2), in(b2), cst(tv<int8_t>({2}, {1, 2}))}).run,
                    {"MatMulInteger node 'n'", "zero point (input 2)", "i8[2]", "per-row", "[3,1]"});
}

TEST(ConvInteger, ZeroPointsMatchAFloatConv) {
  // Padding, stride, dilation and two groups; x u8 with a zero point, w i8 per output channel.
  const Tensor x = random_ints<uint8_t>({2, 4, 7, 6}, 0, 255, 5);
  const Tensor w = random_ints<int8_t>({6, 2, 3, 2}, -128, 127, 6);
  const std::vector<int> wz = {0, 5, -3, 127, -128, 9};
  std::vector<int8_t> wz8(wz.begin(), wz.end());
  const Attributes attrs = {{"pads", std::vector<int64_t>{1, 0, 2, 1}},
                            {"strides", std::vector<int64_t>{2, 1}},
                            {"dilations", std::vector<int64_t>{1, 2}},
                            {"group", int64_t{2}}};
  auto r = run_node("ConvInteger", {in(x), in(w), cst(Tensor::scalar<uint8_t>(77)), cst(tv<int8_t>({6}, wz8))},
                    attrs);
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  // The float Conv pads x - 77 with zeros: a padded element counts as the zero point.
  auto f = run_node("Conv", {in(shifted_f32(x, {77}, 0)), in(shifted_f32(w, wz, 0))}, attrs);
  ASSERT_TRUE(f.run.is_ok()) << f.run.message();
  EXPECT_EQ(r.shape(), f.shape());
  expect_int32_equals_float(r.outputs[0], f.outputs[0]);

  expect_user_error(run_node("ConvInteger", {in(x), in(w), cst(tv<uint8_t>({2}, {1, 2}))}, attrs).run,
                    {"ConvInteger node 'n'", "zero point (input 2)", "per tensor"});
  expect_user_error(run_node("ConvInteger", {in(x), in(w), none(), cst(tv<int8_t>({4}, {1, 2, 3, 4}))}, attrs).run,
                    {"ConvInteger node 'n'", "zero point (input 3)", "i8[4]", "6"});
}

// With power-of-two scales every dequantized value, product and sum is exact in f32, so the
// quantized conv must equal quantizing the float conv of the dequantized operands.
TEST(QLinearConv, MatchesQuantizedFloatConvWithPerChannelScales) {
  const Tensor x = random_ints<uint8_t>({1, 3, 6, 5}, 0, 255, 7);
  const Tensor w = random_ints<int8_t>({4, 3, 3, 3}, -128, 127, 8);
  const std::vector<float> w_scale = {0.25f, 0.5f, 0.125f, 1.0f};
  const Tensor bias = tv<int32_t>({4}, {100, -3000, 7, 0});
  const Attributes attrs = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  auto q = run_node("QLinearConv",
                    {in(x), cst(Tensor::scalar<float>(0.125f)), cst(Tensor::scalar<uint8_t>(120)), in(w),
                     cst(f32s(w_scale)), cst(tv<int8_t>({4}, {0, 0, 0, 0})), cst(Tensor::scalar<float>(64.0f)),
                     cst(Tensor::scalar<int8_t>(-10)), cst(bias)},
                    attrs);
  ASSERT_TRUE(q.run.is_ok()) << q.run.message();
  // Float: Conv(dq(x), dq(w)) + bias * x_scale * w_scale, then QuantizeLinear.
  Tensor xf = shifted_f32(x, {120}, 0), wf = shifted_f32(w, {0}, 0);
  for (float& v : xf.values<float>()) v *= 0.125f;
  for (int64_t i = 0; i < wf.numel(); ++i) wf.data<float>()[i] *= w_scale[i / 27];
  std::vector<float> bf(4);
  for (int i = 0; i < 4; ++i) bf[i] = static_cast<float>(bias.data<int32_t>()[i]) * 0.125f * w_scale[i];
  auto conv = run_node("Conv", {in(xf), in(wf), in(f32s(bf))}, attrs);
  ASSERT_TRUE(conv.run.is_ok()) << conv.run.message();
  auto want = run_node("QuantizeLinear", {in(conv.outputs[0]), cst(Tensor::scalar<float>(64.0f)),
                                          cst(Tensor::scalar<int8_t>(-10))});
  ASSERT_TRUE(want.run.is_ok()) << want.run.message();
  ASSERT_EQ(q.outputs[0].dims(), want.outputs[0].dims());
  int64_t bad = 0, saturated = 0;
  for (int64_t i = 0; i < q.outputs[0].numel(); ++i) {
    bad += q.outputs[0].data<int8_t>()[i] != want.outputs[0].data<int8_t>()[i];
    saturated += std::abs(q.outputs[0].data<int8_t>()[i]) >= 127;
  }
  EXPECT_EQ(bad, 0);
  EXPECT_LT(saturated, q.outputs[0].numel() / 2) << "the scales should keep most outputs in range";
}

}  // namespace
}  // namespace opfuse::testing
