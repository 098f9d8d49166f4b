// The Highway elementwise kernel against the reference scalar-expression evaluator.
//
// Tolerance: |got - ref| <= 1e-5 |ref| + 1e-6. Each vector instruction is within a few ulp
// (<= 4e-7 relative) of the libm call the reference makes, so a single op is far inside 1e-5;
// compositions like Gelu = 0.5 x (1 + erf(x / sqrt 2)) cancel in their tails (1 + erf(-3) is
// 2e-5 with float rounding of 6e-8 on the erf), where the relative error grows but the value is
// tiny: the 1e-6 absolute term covers that. Comparisons, select, min/max, floor/ceil/round,
// abs/neg are exact.
#include <limits>

#include "hwy_test_util.h"

namespace opfuse::hwy_test {
namespace {

constexpr const char* kName = "hwy.elementwise";
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

const std::vector<std::vector<int64_t>> kShapes = {{1}, {7}, {3, 5}, {2, 1, 33}, {1000}, {}};

TEST(HwyElementwise, UnaryOpsOnOddShapes) {
  for (const char* op : {"Tanh", "Erf", "Exp", "Log", "Sqrt", "Reciprocal", "Neg", "Abs", "Floor", "Ceil",
                         "Round", "Sign", "Sin", "Cos", "Sigmoid", "Relu", "Softplus", "Softsign", "Elu",
                         "Selu", "HardSigmoid", "HardSwish", "Mish", "LeakyRelu", "Celu", "Gelu",
                         "ThresholdedRelu", "IsNaN", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh",
                         "Acosh", "Atanh", "IsInf", "Shrink"}) {
    for (const auto& dims : kShapes) {
      SCOPED_TRACE(str_cat(op, " ", dims_to_string(dims)));
      auto c = make_case(op, {In{dims, DType::kF32, {}, -4, 4}});
      check_against_reference(*c, kName);
    }
  }
  auto c = make_case("Gelu", {In{{3, 129}, DType::kF32, {}, -6, 6}},
                     {{"approximate", AttrValue(std::string("tanh"))}});
  check_against_reference(*c, kName);
}

// Inputs that cover each transcendental's range: overflow, underflow to subnormals and zero,
// saturation, special values.
TEST(HwyElementwise, TranscendentalRanges) {
  std::vector<float> wide;
  for (int i = 0; i <= 4000; ++i) wide.push_back(-100.0f + 0.05f * static_cast<float>(i));
  for (float v : {kInf, -kInf, kNaN, 0.0f, -0.0f, 88.7f, 88.8f, -87.3f, -103.0f, -104.0f}) wide.push_back(v);
  for (const char* op : {"Exp", "Tanh", "Sigmoid", "Erf", "Softplus", "Gelu", "Sin", "Cos", "Elu", "Tan", "Asin",
                         "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "IsInf"}) {
    SCOPED_TRACE(op);
    check_against_reference(*make_case(op, {In{{static_cast<int64_t>(wide.size())}, DType::kF32, {}, 0, 0, wide}}), kName);
  }
  // erf near zero (relative accuracy of x * P(x^2)) and across the 1 and 3.95 switch points.
  std::vector<float> erf_in;
  for (float x = 1e-30f; x < 1.0f; x *= 1.7f) {
    erf_in.push_back(x);
    erf_in.push_back(-x);
  }
  for (int i = 0; i <= 2000; ++i) erf_in.push_back(0.9f + 0.0035f * static_cast<float>(i));
  check_against_reference(*make_case("Erf", {In{{static_cast<int64_t>(erf_in.size())}, DType::kF32, {}, 0, 0, erf_in}}),
                          kName);
  // log over many binades, subnormals, zero, negatives, inf.
  std::vector<float> log_in = {0.0f, -0.0f, -1.0f, kInf, kNaN, 1e-45f, 1e-40f, 1e-38f, 1.0f};
  for (float x = 1e-37f; x < 1e37f; x *= 3.1f) log_in.push_back(x);
  check_against_reference(*make_case("Log", {In{{static_cast<int64_t>(log_in.size())}, DType::kF32, {}, 0, 0, log_in}}),
                          kName);
  // Sin/Cos beyond Highway's accurate range take libm's path.
  std::vector<float> trig = {1e5f, -3e6f, 1e20f, 40000.0f, 38999.0f, 0.5f, -2.0f, 7.0f, 1.0f, 2.0f, 3.0f,
                             4.0f, 5.0f, 6.0f, 8.0f, 9.0f, 10.0f};
  for (const char* op : {"Sin", "Cos"}) {
    check_against_reference(*make_case(op, {In{{static_cast<int64_t>(trig.size())}, DType::kF32, {}, 0, 0, trig}}), kName);
  }
}

// Independent expected values (Python's math.erf, double precision): 2e-7 relative is the
// documented accuracy of the approximation (2.5 ulp).
TEST(HwyElementwise, ErfMatchesKnownValues) {
  const std::vector<std::pair<float, double>> known = {
      {0.0f, 0.0}, {1e-30f, 1.1283791670955127e-30}, {1e-4f, 0.00011283791633342487},
      {0.3f, 0.3286267594591274}, {0.5f, 0.5204998778130465}, {0.99f, 0.8385080695553698},
      {1.0f, 0.8427007929497149}, {1.5f, 0.9661051464753108}, {2.0f, 0.9953222650189527},
      {3.0f, 0.9999779095030014}, {3.9f, 0.9999999652077514}, {4.0f, 0.9999999845827421},
      {10.0f, 1.0}, {-2.0f, -0.9953222650189527}, {-0.5f, -0.5204998778130465}};
  std::vector<float> xs;
  for (const auto& [x, e] : known) xs.push_back(x);
  auto c = make_case("Erf", {In{{static_cast<int64_t>(xs.size())}, DType::kF32, {}, 0, 0, xs}});
  auto k = compile(*c);
  ASSERT_EQ(k->name(), kName);
  auto out = allocate_outputs(*c->node);
  ASSERT_TRUE(run_kernel(*k, *c, out).is_ok());
  for (size_t i = 0; i < known.size(); ++i) {
    // The float argument is not exactly x (0.3f != 0.3): compare at the float input.
    const double x = static_cast<double>(xs[i]);
    const double want = std::erf(x);
    EXPECT_NEAR(want, known[i].second, 1e-7 * std::fabs(known[i].second) + 1e-30) << x;
    EXPECT_NEAR(out[0].data<float>()[i], want, 2e-7 * std::fabs(want) + 1e-37) << "erf(" << x << ")";
  }
}

// tanh is a rational approximation (hwy_math-inl.h) documented within 6.5 ulp: checked against
// double-precision tanh over a dense grid of [0, 12] (both signs), tiny inputs (tanh(x) = x),
// the 9.1 clamp, infinities and NaN.
TEST(HwyElementwise, TanhWithinDocumentedUlp) {
  std::vector<float> xs;
  for (float x = 1e-30f; x < 1e-3f; x *= 1.9f) xs.push_back(x);
  for (int i = 0; i <= 120000; ++i) xs.push_back(1e-4f * static_cast<float>(i));
  for (float v : {9.0f, 9.1f, 9.2f, 20.0f, 1e30f}) xs.push_back(v);
  const size_t positive = xs.size();
  for (size_t i = 0; i < positive; ++i) xs.push_back(-xs[i]);
  xs.push_back(kInf);
  xs.push_back(-kInf);
  xs.push_back(kNaN);
  auto c = make_case("Tanh", {In{{static_cast<int64_t>(xs.size())}, DType::kF32, {}, 0, 0, xs}});
  auto k = compile(*c);
  ASSERT_EQ(k->name(), kName);
  auto out = allocate_outputs(*c->node);
  ASSERT_TRUE(run_kernel(*k, *c, out).is_ok());
  const float* got = out[0].data<float>();
  double worst = 0;
  for (size_t i = 0; i + 1 < xs.size(); ++i) {
    const double want = std::tanh(static_cast<double>(xs[i]));
    // A float ulp in want's binade (inputs are normal floats, so want is 0 only at 0).
    const double ulp = want == 0 ? 1e-45 : std::ldexp(1.0, std::ilogb(want) - 23);
    worst = std::max(worst, std::fabs(got[i] - want) / ulp);
    ASSERT_LE(std::fabs(got[i] - want), 6.5 * ulp + 1e-45) << "tanh(" << xs[i] << ") = " << got[i];
  }
  EXPECT_TRUE(std::isnan(got[xs.size() - 1]));
  EXPECT_EQ(got[xs.size() - 2], -1.0f);
  EXPECT_EQ(got[xs.size() - 3], 1.0f);
  EXPECT_GT(worst, 0.0);  // the grid does reach rounding error (the check is not vacuous)
}

TEST(HwyElementwise, BinaryBroadcasting) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> pairs = {
      {{2, 3}, {2, 3}},          {{5}, {}},          {{}, {4, 3}},         {{1}, {6}},
      {{2, 3, 768}, {768}},      {{2, 4, 3, 5}, {1, 4, 1, 1}},             {{3, 1}, {1, 4}},
      {{2, 1, 5}, {2, 7, 1}},    {{5, 1, 3}, {1, 4, 1}},                   {{4, 300}, {300}},
      {{4, 1}, {4, 300}},        {{3, 2, 513}, {3, 1, 513}},               {{1, 1}, {1, 1}},
      {{2, 700}, {2, 1}},        {{6, 1, 1, 9}, {1, 5, 7, 1}}};
  // PRelu has its own kernel (hwy_prelu_test.cc).
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod"}) {
    for (const auto& [a, b] : pairs) {
      SCOPED_TRACE(str_cat(op, " ", dims_to_string(a), " ", dims_to_string(b)));
      In x{a}, y{b};
      if (std::string(op) == "Pow") x.lo = 0.1, x.hi = 3;
      check_against_reference(*make_case(op, {x, y}), kName);
    }
  }
  Attributes fmod = {{"fmod", AttrValue(int64_t{1})}};
  check_against_reference(*make_case("Mod", {In{{5, 7}}, In{{7}}}, fmod), kName);
  check_against_reference(*make_case("Sum", {In{{3, 4}}, In{{4}}, In{{3, 1}}}), kName);
  check_against_reference(*make_case("Mean", {In{{3, 4}}, In{{4}}, In{{3, 1}}}), kName);
  check_against_reference(*make_case("Max", {In{{33}}}), kName);  // a lone input: a copy
  check_against_reference(*make_case("Clip", {In{{40}}, In{{}, DType::kF32, Tensor::scalar(-1.0f)},
                                               In{{}, DType::kF32, Tensor::scalar(0.5f)}}), kName);
}

TEST(HwyElementwise, MinMaxNaNFollowTheReference) {
  const std::vector<float> a = {kNaN, 1.0f, kNaN, 2.0f, -kInf, 0.0f, -0.0f};
  const std::vector<float> b = {1.0f, kNaN, kNaN, 3.0f, 5.0f, -0.0f, 0.0f};
  for (const char* op : {"Max", "Min"}) {
    check_against_reference(*make_case(op, {In{{7}, DType::kF32, {}, 0, 0, a}, In{{7}, DType::kF32, {}, 0, 0, b}}), kName);
  }
}

TEST(HwyElementwise, PowConstantExponents) {
  for (float e : {2.0f, 3.0f, 1.0f, -1.0f, 0.5f, 2.5f}) {
    SCOPED_TRACE(e);
    check_against_reference(*make_case("Pow", {In{{5, 37}}, In{{}, DType::kF32, Tensor::scalar(e)}}), kName);
  }
}

TEST(HwyElementwise, ComparisonsGiveBool) {
  for (const char* op : {"Less", "Greater", "Equal", "LessOrEqual", "GreaterOrEqual"}) {
    SCOPED_TRACE(op);
    In a{{4, 70}, DType::kF32, {}, -2, 2}, b{{70}, DType::kF32, {}, -2, 2};
    auto out = check_against_reference(*make_case(op, {a, b}), kName);
    EXPECT_EQ(out[0].dtype(), DType::kBool);
  }
  // Equal on rounded values so some elements are equal.
  auto c = make_case("Equal", {In{{50}, DType::kF32, {}, 0, 0, std::vector<float>{1, 2, 3}},
                               In{{50}, DType::kF32, {}, 0, 0, std::vector<float>{1, 5, 3, 3}}});
  check_against_reference(*c, kName);
}

TEST(HwyElementwise, WhereWithBoolCondition) {
  for (const auto& cond : std::vector<std::vector<int64_t>>{{3, 300}, {300}, {3, 1}, {}}) {
    SCOPED_TRACE(dims_to_string(cond));
    check_against_reference(*make_case("Where", {In{cond, DType::kBool}, In{{3, 300}}, In{{1}}}), kName);
  }
}

TEST(HwyElementwise, LargeTensorsRunInParallel) {
  check_against_reference(*make_case("Add", {In{{64, 1024}}, In{{1024}}}), kName);
  check_against_reference(*make_case("Gelu", {In{{1, 128, 3072}, DType::kF32, {}, -5, 5}}), kName);
  check_against_reference(*make_case("Mul", {In{{8, 64, 9, 9}}, In{{1, 64, 1, 1}}}), kName);
  check_against_reference(*make_case("Div", {In{{3, 50000}}, In{{3, 1}, DType::kF32, {}, 0.5, 2}}), kName);
}

TEST(HwyElementwise, InPlaceGivesTheSameResult) {
  for (const char* op : {"Add", "Mul", "Sub"}) {
    expect_in_place_matches_reference(*make_case(op, {In{{70, 1000}}, In{{1000}}}), kName, 1e-6, 0, op);
  }
  expect_in_place_matches_reference(*make_case("Gelu", {In{{5, 999}}}), kName, 1e-5, 1e-6, "Gelu in place");
  // Broadcasting input 0 to a bigger output cannot run in place.
  EXPECT_EQ(compile(*make_case("Add", {In{{4}}, In{{3, 4}}}))->in_place_input(), -1);
}

TEST(HwyElementwise, DeclinesNonF32) {
  EXPECT_EQ(compile(*make_case("Add", {In{{3}, DType::kI64}, In{{3}, DType::kI64}}))->name(), "reference");
  EXPECT_EQ(compile(*make_case("Add", {In{{3}, DType::kF64}, In{{3}, DType::kF64}}))->name(), "reference");
  EXPECT_EQ(compile(*make_case("And", {In{{3}, DType::kBool}, In{{3}, DType::kBool}}))->name(), "reference");
  // Cast has its own kernel (hwy.cast) for the float and small-integer pairs, not this one.
  EXPECT_EQ(compile(*make_case("Cast", {In{{3}}}, {{"to", AttrValue(int64_t{7})}}))->name(), "reference");
}

}  // namespace
}  // namespace opfuse::hwy_test
