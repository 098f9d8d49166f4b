// Resize. Expected values: torch 1.13 F.interpolate output pasted as literals (nearest ==
// asymmetric + floor, bilinear align_corners=True == align_corners, align_corners=False ==
// half_pixel / pytorch_half_pixel, bicubic == cubic a=-0.75 half_pixel), hand-computed cases,
// and the ONNX conformance data.
#include <cmath>

#include "reduction_onnx_case.h"
#include "reduction_test_util.h"

namespace opfuse {
namespace {

using testing_ops::contains;
using testing_ops::expect_values;
using testing_ops::i64s;
using testing_ops::infer_and_run;
using testing_ops::make_node;

Tensor f32s(const std::vector<float>& v) {
  return Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v);
}

// x = [[1, 2, 4], [3, -1, 0.5]] as 1x1x2x3, resized to 1x1x3x5 by sizes.
Tensor image() { return Tensor::from_vector<float>({1, 1, 2, 3}, {1, 2, 4, 3, -1, 0.5f}); }

std::vector<Tensor> resize_to_3x5(Attributes attrs) {
  auto n = make_node("Resize", image(), {std::nullopt, std::nullopt, i64s({1, 1, 3, 5})},
                     std::move(attrs));
  return infer_and_run(*n);
}

TEST(ResizeTest, NearestAsymmetricFloorMatchesTorchNearest) {
  auto out = resize_to_3x5({{"coordinate_transformation_mode", std::string("asymmetric")},
                            {"nearest_mode", std::string("floor")}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{1, 1, 3, 5}));
  expect_values(out[0], {1, 1, 2, 2, 4, 1, 1, 2, 2, 4, 3, 3, -1, -1, 0.5});
}

TEST(ResizeTest, LinearAlignCornersMatchesTorch) {
  auto out = resize_to_3x5({{"mode", std::string("linear")},
                            {"coordinate_transformation_mode", std::string("align_corners")}});
  expect_values(out[0], {1.0, 1.5, 2.0, 3.0, 4.0, 2.0, 1.25, 0.5, 1.375, 2.25, 3.0, 1.0, -1.0,
                         -0.25, 0.5});
}

TEST(ResizeTest, LinearPytorchHalfPixelMatchesTorch) {
  auto out = resize_to_3x5({{"mode", std::string("linear")},
                            {"coordinate_transformation_mode", std::string("pytorch_half_pixel")}});
  expect_values(out[0], {1.0, 1.4000000953674316, 2.0, 3.200000286102295, 4.0, 2.0,
                         1.399999976158142, 0.5000001192092896, 1.5500001907348633, 2.25, 3.0,
                         1.399999737739563, -0.9999998807907104, -0.09999987483024597, 0.5});
  // Downsampling 5x6 -> 2x4 (scales as torch computes them from the sizes).
  std::vector<float> v(30);
  for (int i = 0; i < 30; ++i) v[i] = static_cast<float>(i + 1);
  auto n = make_node("Resize", Tensor::from_vector<float>({1, 1, 5, 6}, v),
                     {std::nullopt, std::nullopt, i64s({1, 1, 2, 4})},
                     {{"mode", std::string("linear")},
                      {"coordinate_transformation_mode", std::string("pytorch_half_pixel")}});
  expect_values(infer_and_run(*n)[0], {5.75, 7.25, 8.75, 10.25, 20.75, 22.25, 23.75, 25.25});
}

// A length-1 output is where pytorch_half_pixel and half_pixel differ: the ONNX spec maps it to
// source coordinate 0 (row 0), half_pixel to the centre (row 2; what torch 1.13 does).
TEST(ResizeTest, PytorchHalfPixelLengthOneOutput) {
  std::vector<float> v(30);
  for (int i = 0; i < 30; ++i) v[i] = static_cast<float>(i + 1);
  const Tensor x = Tensor::from_vector<float>({1, 1, 5, 6}, v);
  auto pt = make_node("Resize", x, {std::nullopt, std::nullopt, i64s({1, 1, 1, 4})},
                      {{"mode", std::string("linear")},
                       {"coordinate_transformation_mode", std::string("pytorch_half_pixel")}});
  // Row 0 = 1..6 sampled at 0.25, 1.75, 3.25, 4.75.
  expect_values(infer_and_run(*pt)[0], {1.25, 2.75, 4.25, 5.75});
  auto hp = make_node("Resize", x, {std::nullopt, std::nullopt, i64s({1, 1, 1, 4})},
                      {{"mode", std::string("linear")}});
  expect_values(infer_and_run(*hp)[0], {13.25, 14.75, 16.25, 17.75});  // torch literal
}

TEST(ResizeTest, TrilinearOn5dMatchesTorch) {
  Tensor x = Tensor::from_vector<float>({1, 1, 2, 2, 2}, {1, 5, 2, -3, 0, 4, 8, 6});
  auto n = make_node("Resize", x, {std::nullopt, std::nullopt, i64s({1, 1, 3, 4, 3})},
                     {{"mode", std::string("linear")}});
  expect_values(
      infer_and_run(*n)[0],
      {1.0, 3.0, 5.0, 1.25, 2.125, 2.999999761581421, 1.75, 0.375, -0.9999999403953552, 2.0, -0.5,
       -3.0, 0.5, 2.5, 4.5, 1.625, 2.6875, 3.749999761581421, 3.875, 3.0625, 2.25, 5.0, 3.25, 1.5,
       0.0, 2.0, 3.999999761581421, 2.0, 3.25, 4.499999523162842, 6.0, 5.75, 5.499999523162842,
       7.999999523162842, 6.999999523162842, 5.999999523162842});
}

TEST(ResizeTest, CubicHalfPixelMatchesTorchBicubic) {
  auto out = resize_to_3x5({{"mode", std::string("cubic")}});
  expect_values(out[0],
                {0.6887224912643433, 1.2356677055358887, 2.2604174613952637, 3.614230155944824,
                 4.4999871253967285, 2.1440000534057617, 1.2919999361038208, 0.5000001192092896,
                 1.4630004167556763, 2.4180002212524414, 3.5992777347564697, 1.3483325242996216,
                 -1.2604161500930786, -0.688227653503418, 0.33601468801498413},
                1e-5);
}

// Hand-computed 1-D cases with scales: [0, 10, 20, 30] x 2.
TEST(ResizeTest, OneDimensionalHandComputed) {
  const Tensor x = f32s({0, 10, 20, 30});
  auto lin = make_node("Resize", x, {std::nullopt, f32s({2})}, {{"mode", std::string("linear")}});
  // half_pixel: source = (i + .5) / 2 - .5 = -.25, .25, .75, ... clamped at the ends.
  expect_values(infer_and_run(*lin)[0], {0, 2.5, 7.5, 12.5, 17.5, 22.5, 27.5, 30});

  auto ceil = make_node("Resize", x, {std::nullopt, f32s({2})},
                        {{"nearest_mode", std::string("round_prefer_ceil")},
                         {"coordinate_transformation_mode", std::string("asymmetric")}});
  // source i / 2: 0, .5 -> 1, 1, 1.5 -> 2, ...
  expect_values(infer_and_run(*ceil)[0], {0, 10, 10, 20, 20, 30, 30, 30});
  auto pfloor = make_node("Resize", x, {std::nullopt, f32s({2})},
                          {{"coordinate_transformation_mode", std::string("asymmetric")}});
  expect_values(infer_and_run(*pfloor)[0], {0, 0, 10, 10, 20, 20, 30, 30});
  auto cl = make_node("Resize", x, {std::nullopt, f32s({0.5f})},
                      {{"nearest_mode", std::string("ceil")}});
  // half_pixel downsample: source = 2i + .5 -> ceil 1, 3.
  expect_values(infer_and_run(*cl)[0], {10, 30});
}

TEST(ResizeTest, TfCropAndResizeExtrapolates) {
  const Tensor x = f32s({0, 10, 20, 30});
  // Crop [0.5, 1.5] of the axis to 3 samples: source 1.5, 3, 4.5 (outside -> extrapolation).
  auto n = make_node("Resize", x, {f32s({0.5f, 1.5f}), std::nullopt, i64s({3})},
                     {{"mode", std::string("linear")},
                      {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                      {"extrapolation_value", -7.0f}});
  expect_values(infer_and_run(*n)[0], {15, 30, -7});
}

TEST(ResizeTest, IntegerNearestIsExactAndLinearRounds) {
  const int64_t big = (int64_t{1} << 53) + 1;
  Tensor x = Tensor::from_vector<int64_t>({2}, {big, 3});
  auto n = make_node("Resize", x, {std::nullopt, f32s({2})});
  auto out = infer_and_run(*n);
  EXPECT_EQ(out[0].dtype(), DType::kI64);
  EXPECT_EQ(out[0].to_int_vector(), (std::vector<int64_t>{big, big, 3, 3}));

  // Cubic overshoots the step (ONNX reference: -8.96, -26.9, 57.77, 197.23, 281.9, 263.96):
  // a uint8 result must saturate, not wrap, and round to nearest.
  Tensor u = Tensor::from_vector<uint8_t>({4}, {0, 0, 255, 255});
  auto c = make_node("Resize", u, {std::nullopt, f32s({2})}, {{"mode", std::string("cubic")}});
  out = infer_and_run(*c);
  EXPECT_EQ(out[0].to_int_vector(), (std::vector<int64_t>{0, 0, 0, 58, 197, 255, 255, 255}));
}

TEST(ResizeTest, ErrorsAreUserErrorsNamingTheProblem) {
  auto both = make_node("Resize", image(), {std::nullopt, f32s({1, 1, 2, 2}), i64s({1, 1, 4, 6})});
  Status s = infer_shapes(both->g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.kind(), ErrorKind::kUser);
  EXPECT_TRUE(contains(s.message(), "both scales and sizes")) << s.message();
  EXPECT_TRUE(contains(s.message(), "node_under_test")) << s.message();
  EXPECT_FALSE(testing_ops::run(*both).is_ok());

  // An empty scales tensor is "not given" (opset-11 style): with no sizes that is neither.
  auto neither = make_node("Resize", image(), {std::nullopt, f32s({})});
  s = infer_shapes(neither->g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "neither scales nor sizes")) << s.message();
  EXPECT_FALSE(testing_ops::run(*neither).is_ok());

  auto len = make_node("Resize", image(), {std::nullopt, f32s({2, 2})});
  s = infer_shapes(len->g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "scales has 2 entries") && contains(s.message(), "rank 4"))
      << s.message();
  auto r = testing_ops::run(*len);
  ASSERT_FALSE(r.is_ok());
  EXPECT_TRUE(contains(r.status().message(), "scales has 2 entries"));

  auto mode = make_node("Resize", image(), {std::nullopt, f32s({1, 1, 2, 2})},
                        {{"mode", std::string("bilinear")}});
  s = infer_shapes(mode->g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "'bilinear'") &&
              contains(s.message(), "nearest, linear, cubic"))
      << s.message();
  EXPECT_FALSE(testing_ops::run(*mode).is_ok());

  auto coord = make_node("Resize", image(), {std::nullopt, f32s({1, 1, 2, 2})},
                         {{"coordinate_transformation_mode", std::string("corners")}});
  s = infer_shapes(coord->g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "'corners'") && contains(s.message(), "align_corners"))
      << s.message();

  auto neg = make_node("Resize", image(), {std::nullopt, f32s({1, 1, -2, 2})});
  s = infer_shapes(neg->g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "scales[2]")) << s.message();

  auto crop = make_node("Resize", image(), {std::nullopt, f32s({1, 1, 2, 2})},
                        {{"coordinate_transformation_mode", std::string("tf_crop_and_resize")}});
  s = infer_shapes(crop->g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "roi")) << s.message();
}

TEST(ResizeTest, InferenceFromConstantsSymbolsAndRuntimeInputs) {
  // Constant scales on a symbolic batch: scale 1 keeps the symbol, known dims are scaled.
  const Shape sym = {Dim::symbol("N"), Dim(3), Dim(5), Dim::unknown()};
  auto n = make_node("Resize", Tensor::from_vector<float>({1, 3, 5, 7}, {}),
                     {std::nullopt, f32s({1, 1, 0.7f, 2})}, {}, 1, sym);
  ASSERT_TRUE(infer_shapes(n->g).is_ok());
  EXPECT_EQ(*n->node->output(0)->shape, (Shape{Dim::symbol("N"), Dim(3), Dim(3), Dim::unknown()}));

  // floor(10 * 0.7f) is 7 (the float product rounds to 7.0), as in onnxruntime.
  auto f = make_node("Resize", Tensor::from_vector<float>({10}, {}), {std::nullopt, f32s({0.7f})});
  auto out = infer_and_run(*f);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{7}));

  // Runtime sizes: the rank is known, the dims are not.
  Graph g;
  Value* x = g.add_input("x", DType::kF32, {Dim::symbol("N"), Dim(3), Dim(8), Dim(8)});
  Value* sizes = g.add_input("sizes", DType::kI64, make_shape({4}));
  auto node = g.add_node("Resize", {x, nullptr, nullptr, sizes}, {"y"});
  ASSERT_TRUE(node.is_ok());
  ASSERT_TRUE(infer_shapes(g).is_ok());
  EXPECT_EQ(*(*node)->output(0)->shape, Shape(4, Dim::unknown()));
  EXPECT_EQ((*node)->output(0)->dtype, DType::kF32);
}

// A 1x3x64x80 image upsampled to 1x3x128x120 takes the OpenMP path; compare with a plain
// bilinear (half_pixel) loop written from the formula.
TEST(ResizeTest, LargeBilinearMatchesPlainLoop) {
  const int64_t c = 3, h = 64, w = 80, oh = 128, ow = 120;
  std::vector<float> v(c * h * w);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(0.01 * i) * 100);
  Tensor x = Tensor::from_vector<float>({1, c, h, w}, v);
  auto n = make_node("Resize", x, {std::nullopt, std::nullopt, i64s({1, c, oh, ow})},
                     {{"mode", std::string("linear")}});
  auto out = infer_and_run(*n);
  auto src = [](int64_t o, int64_t in_len, int64_t out_len) {
    double s = (o + 0.5) * in_len / out_len - 0.5;
    return std::min<double>(std::max(s, 0.0), in_len - 1);
  };
  double worst = 0;
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t i = 0; i < oh; ++i) {
      const double sy = src(i, h, oh);
      const int64_t y0 = static_cast<int64_t>(sy), y1 = std::min(y0 + 1, h - 1);
      for (int64_t j = 0; j < ow; ++j) {
        const double sx = src(j, w, ow);
        const int64_t x0 = static_cast<int64_t>(sx), x1 = std::min(x0 + 1, w - 1);
        auto at = [&](int64_t yy, int64_t xx) { return double(v[(ch * h + yy) * w + xx]); };
        const double fy = sy - y0, fx = sx - x0;
        const double want = (1 - fy) * ((1 - fx) * at(y0, x0) + fx * at(y0, x1)) +
                            fy * ((1 - fx) * at(y1, x0) + fx * at(y1, x1));
        worst = std::max(worst, std::fabs(out[0].data<float>()[(ch * oh + i) * ow + j] - want));
      }
    }
  }
  EXPECT_LT(worst, 1e-3);
}

TEST(ResizeTest, OnnxConformance) {
  int ran = 0;
  for (const std::string& name : testing_onnx::onnx_cases("test_resize_")) {
    ran += testing_onnx::run_onnx_node_case(name) ? 1 : 0;
  }
  if (ran == 0) GTEST_SKIP() << "ONNX conformance data not installed";
  EXPECT_GE(ran, 20);
}

}  // namespace
}  // namespace opfuse
