// The trigonometric and hyperbolic ops (Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh),
// IsInf, Shrink and CastLike: values against numpy (float32 inputs, float64 results pasted as
// literals), IEEE special values, bad inputs, and graph mode at every level (where the region
// fuser composes the new scalar primitives into generated kernels) against eager mode.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "frontend/builder/model_builder.h"
#include "pipelines/pipeline.h"
#include "runtime/compare.h"
#include "runtime/session.h"
#include "tensor_test_util.h"

namespace opfuse::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

void expect_close(const Tensor& t, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size())) << what;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double got = t.get_double(i), w = want[static_cast<size_t>(i)];
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(got)) << what << " element " << i << ": got " << got;
    } else if (std::isinf(w)) {
      EXPECT_EQ(got, w) << what << " element " << i;
    } else {
      EXPECT_NEAR(got, w, 1e-6 + 4e-6 * std::fabs(w)) << what << " element " << i;
    }
  }
}

struct TrigCase {
  const char* op;
  std::vector<float> x;
  std::vector<double> want;
};

const std::vector<float> kUnit = {-0.9f, -0.5f, 0.0f, 0.3f, 0.75f};

TEST(TrigOps, MatchNumpyOnF32) {
  const std::vector<TrigCase> cases = {
      {"Tan", kUnit, {-1.26015816, -0.54630249, 0, 0.309336263, 0.93159646}},
      {"Asin", kUnit, {-1.11976946, -0.523598776, 0, 0.304692667, 0.848062079}},
      {"Acos", kUnit, {2.69056579, 2.0943951, 1.57079633, 1.26610366, 0.722734248}},
      {"Atan", kUnit, {-0.732815089, -0.463647609, 0, 0.291456805, 0.643501109}},
      {"Sinh", kUnit, {-1.02651669, -0.521095305, 0, 0.304520306, 0.822316732}},
      {"Cosh", kUnit, {1.43308636, 1.12762597, 1, 1.04533852, 1.29468328}},
      {"Asinh", kUnit, {-0.808866918, -0.481211825, 0, 0.295673059, 0.693147181}},
      {"Atanh", kUnit, {-1.47221936, -0.549306144, 0, 0.309519617, 0.972955075}},
      {"Acosh", {1.0f, 1.5f, 2.0f, 10.0f, 100.0f}, {0, 0.96242365, 1.3169579, 2.99322285, 5.29829237}},
  };
  for (const TrigCase& c : cases) {
    auto r = run_node(c.op, {in(tv<float>({5}, c.x))});
    ASSERT_TRUE(r.build.is_ok()) << c.op << ": " << r.build.message();
    ASSERT_TRUE(r.run.is_ok()) << c.op << ": " << r.run.message();
    EXPECT_EQ(r.outputs[0].dtype(), DType::kF32) << c.op;
    expect_close(r.outputs[0], c.want, c.op);
  }
}

// Outside each domain the result is NaN (not an error), the poles are infinities, and NaN
// propagates; f64 keeps double precision.
TEST(TrigOps, SpecialValues) {
  const double half_pi = std::numbers::pi / 2;
  const std::vector<TrigCase> cases = {
      {"Asin", {2.0f, -1.0f, kNaN, kInf}, {NAN, -half_pi, NAN, NAN}},
      {"Acos", {-2.0f, 1.0f, kNaN, -kInf}, {NAN, 0, NAN, NAN}},
      {"Atan", {kInf, -kInf, kNaN, 0.0f}, {half_pi, -half_pi, NAN, 0}},
      {"Atanh", {1.0f, -1.0f, 1.5f, kNaN}, {INFINITY, -INFINITY, NAN, NAN}},
      {"Acosh", {0.5f, kInf, kNaN, 1.0f}, {NAN, INFINITY, NAN, 0}},
      {"Asinh", {kInf, -kInf, kNaN, 0.0f}, {INFINITY, -INFINITY, NAN, 0}},
      {"Sinh", {kInf, -kInf, 100.0f, kNaN}, {INFINITY, -INFINITY, INFINITY, NAN}},
      {"Cosh", {kInf, -kInf, -100.0f, kNaN}, {INFINITY, INFINITY, INFINITY, NAN}},
      {"Tan", {kInf, kNaN, 0.0f, -0.0f}, {NAN, NAN, 0, 0}},
  };
  for (const TrigCase& c : cases) {
    auto r = run_node(c.op, {in(tv<float>({4}, c.x))});
    ASSERT_TRUE(r.run.is_ok()) << c.op << ": " << r.run.message();
    expect_close(r.outputs[0], c.want, c.op);
  }
  auto f64 = run_node("Sinh", {in(tv<double>({1}, {1e-10}))});
  ASSERT_TRUE(f64.run.is_ok());
  EXPECT_EQ(f64.outputs[0].dtype(), DType::kF64);
  EXPECT_DOUBLE_EQ(f64.outputs[0].data<double>()[0], std::sinh(1e-10));  // no exp(x)-exp(-x) cancellation
}

TEST(TrigOps, IntegerInputIsAUserError) {
  for (const char* op : {"Tan", "Acosh", "Atanh"}) {
    auto r = run_node(op, {in(tv<int64_t>({2}, {1, 2}))});
    expect_user_error(r.build, {op, "node 'n'", "i64"});
  }
}

TEST(IsInfOp, DetectsTheSignsAskedFor) {
  const Tensor x = tv<float>({5}, {kInf, -kInf, kNaN, 0.0f, 3.0e38f});
  auto both = run_node("IsInf", {in(x)});
  ASSERT_TRUE(both.run.is_ok()) << both.run.message();
  expect_tensor<bool>(both.outputs[0], {5}, {true, true, false, false, false});
  auto pos = run_node("IsInf", {in(x)}, {{"detect_negative", AttrValue(int64_t{0})}});
  expect_tensor<bool>(pos.outputs[0], {5}, {true, false, false, false, false});
  auto neg = run_node("IsInf", {in(x)}, {{"detect_positive", AttrValue(int64_t{0})}});
  expect_tensor<bool>(neg.outputs[0], {5}, {false, true, false, false, false});
  auto none = run_node("IsInf", {in(x)}, {{"detect_positive", AttrValue(int64_t{0})},
                                          {"detect_negative", AttrValue(int64_t{0})}});
  expect_tensor<bool>(none.outputs[0], {5}, {false, false, false, false, false});
  auto f64 = run_node("IsInf", {in(tv<double>({2}, {-INFINITY, 1e300}))});
  expect_tensor<bool>(f64.outputs[0], {2}, {true, false});
  expect_user_error(run_node("IsInf", {in(tv<int32_t>({1}, {1}))}).build, {"IsInf", "i32"});
}

TEST(ShrinkOp, SoftAndHardShrink) {
  // numpy: np.where(x < -l, x + b, np.where(x > l, x - b, 0))
  const Tensor x = tv<float>({7}, {-2.0f, -1.5f, -1.0f, 0.0f, 1.0f, 1.5f, 2.0f});
  auto soft = run_node("Shrink", {in(x)}, {{"lambd", AttrValue(1.5f)}, {"bias", AttrValue(1.5f)}});
  ASSERT_TRUE(soft.run.is_ok()) << soft.run.message();
  expect_tensor<float>(soft.outputs[0], {7}, {-0.5f, 0, 0, 0, 0, 0, 0.5f});
  auto hard = run_node("Shrink", {in(x)}, {{"lambd", AttrValue(1.5f)}});
  expect_tensor<float>(hard.outputs[0], {7}, {-2.0f, 0, 0, 0, 0, 0, 2.0f});
  // Integer input: comparisons against a fractional lambd are exact for integers.
  auto ints = run_node("Shrink", {in(tv<int32_t>({5}, {-3, -1, 0, 1, 3}))},
                       {{"lambd", AttrValue(1.5f)}, {"bias", AttrValue(1.0f)}});
  ASSERT_TRUE(ints.run.is_ok()) << ints.run.message();
  expect_tensor<int32_t>(ints.outputs[0], {5}, {-2, 0, 0, 0, 2});
  auto nan = run_node("Shrink", {in(tv<float>({2}, {kNaN, -kInf}))});
  ASSERT_TRUE(nan.run.is_ok());
  EXPECT_EQ(nan.outputs[0].data<float>()[0], 0.0f);  // NaN is neither below nor above: 0, as in numpy
  EXPECT_EQ(nan.outputs[0].data<float>()[1], -kInf);
  expect_user_error(run_node("Shrink", {in(tv<bool>({1}, {true}))}).build, {"Shrink", "bool"});
}

TEST(CastLikeOp, TakesTheTargetDtypeOnly) {
  auto r = run_node("CastLike", {in(tv<float>({3}, {1.7f, -2.5f, 0.0f})), in(tv<int32_t>({1, 1}, {9}))});
  ASSERT_TRUE(r.build.is_ok()) << r.build.message();
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[3]");
  expect_tensor<int32_t>(r.outputs[0], {3}, {1, -2, 0});
  auto to_bool = run_node("CastLike", {in(tv<float>({2}, {0.0f, kNaN})), in(tv<bool>({}, {false}))});
  expect_tensor<bool>(to_bool.outputs[0], {2}, {false, true});
  auto missing = run_node("CastLike", {in(tv<float>({1}, {1.0f}))});
  expect_user_error(missing.build, {"CastLike"});
}

// A chain of the new primitives compiled at each level (region fusion composes them at O1+)
// against eager mode, on inputs that include NaN, the infinities and out-of-domain values.
TEST(TrigOps, GraphModeMatchesEagerAtEveryLevel) {
  auto build = [] {
    ModelBuilder b("trig", 0);
    Var x = b.input("x", {2, 9});
    Var t = b.op("Atan", {b.op("Sinh", {x})}) + b.op("Cosh", {x * 0.5}) * b.op("Tan", {x});
    Var u = b.op("Asin", {x}) - b.op("Acos", {x * 0.25}) + b.op("Asinh", {x});
    Var v = b.op("Acosh", {x + 2.0}) + b.op("Atanh", {x * 0.5});
    Var s = b.op("Shrink", {t + u + v}, {{"lambd", AttrValue(0.25f)}, {"bias", AttrValue(0.1f)}});
    b.output(s, "y");
    b.output(b.op("IsInf", {x * 1e38}), "inf");
    auto g = b.finish();
    EXPECT_TRUE(g.is_ok()) << g.status().message();
    return std::move(*g);
  };
  const TensorMap inputs = {
      {"x", tv<float>({2, 9}, {-0.9f, -0.5f, 0.0f, 0.3f, 0.75f, 1.0f, 1.5f, -1.0f, 2.5f, kNaN, kInf, -kInf, 0.1f,
                              -0.2f, 0.6f, -0.7f, 1.2f, -3.0f})}};
  SessionOptions eager_options;
  eager_options.mode = ExecutionMode::kEager;
  auto eager = Session::create(build(), eager_options);
  ASSERT_TRUE(eager.is_ok()) << eager.status().message();
  auto want = eager->run(inputs);
  ASSERT_TRUE(want.is_ok()) << want.status().message();
  for (OptLevel level : {OptLevel::kO0, OptLevel::kO1, OptLevel::kO2, OptLevel::kO3}) {
    SessionOptions o;
    o.mode = ExecutionMode::kGraph;
    o.level = level;
    auto s = Session::create(build(), o);
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    auto got = s->run(inputs);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    // Element by element: the outputs hold infinities, which a norm-relative measure would hide.
    const Tensor& y = want->at("y");
    std::vector<double> want_y;
    for (int64_t i = 0; i < y.numel(); ++i) want_y.push_back(y.get_double(i));
    expect_close(got->at("y"), want_y, str_cat("y at ", opt_level_name(level)));
    EXPECT_EQ(max_relative_difference(got->at("inf"), want->at("inf")), 0) << opt_level_name(level);
  }
}

}  // namespace
}  // namespace opfuse::testing
