// The vector epilogue pass (kernels/cpu/hwy_epilogue.h) against the reference epilogue (the
// post-ops' expressions, derived from their op records, evaluated element by element), for
// every post-op of the vocabulary, on a sweep through each op's interesting range plus
// infinities, zeros, denormals and NaN, with lengths that leave a tail and that take the
// multi-threaded path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/hwy_epilogue.h"
#include "ops/reference.h"

namespace opfuse {
namespace {

std::vector<float> params_for(const PostOpSpec& spec) {
  if (spec.name == "leaky_relu" || spec.name == "elu") return {0.3f};
  if (spec.name == "clip") return {-0.5f, 0.7f};
  if (spec.name == "hardsigmoid") return {0.2f, 0.5f};
  if (spec.name == "linear") return {1.5f, -0.25f};
  if (spec.name == "selu") return {1.6732632f, 1.0507010f};
  return std::vector<float>(static_cast<size_t>(spec.num_params), 0.7f);  // celu, thresholded_relu
}

// n points through [-20, 20], then special values (NaN among them).
std::vector<float> sweep(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = -20.0f + 40.0f * static_cast<float>(i) / static_cast<float>(std::max<size_t>(n - 1, 1));
  const float inf = std::numeric_limits<float>::infinity();
  for (float special : {0.0f, -0.0f, inf, -inf, 1e-30f, -1e-30f, 88.0f, -88.0f, 1e-40f,
                        std::numeric_limits<float>::quiet_NaN()}) {
    x.push_back(special);
  }
  return x;
}

// The reference epilogue: the post-ops' composed expression evaluated element by element.
std::vector<float> reference(std::span<const PostOp> ops, const std::vector<float>& y, const std::vector<float>* r) {
  auto expr = epilogue_expr(ops);
  EXPECT_TRUE(expr.is_ok()) << expr.status().message();
  const std::vector<int64_t> dims = {static_cast<int64_t>(y.size())};
  Tensor out = Tensor::from_vector(dims, y);
  Tensor res = r ? Tensor::from_vector(dims, *r) : Tensor();
  EXPECT_TRUE(evaluate_f32_scalar_expr(*expr, {&out, r ? &res : nullptr}, out).is_ok());
  const float* d = out.data<float>();
  return std::vector<float>(d, d + y.size());
}

bool same(float got, float want) {
  if (std::isnan(want)) return std::isnan(got);
  return got == want || std::abs(got - want) <= 1e-5f * std::max(1.0f, std::abs(want));
}

TEST(HwyEpilogueTest, EveryPostOpMatchesItsReferenceNaNAndInfIncluded) {
  for (size_t n : {size_t{1}, size_t{13}, size_t{1001}, size_t{40000}}) {
    for (const PostOpSpec& spec : post_op_specs()) {
      if (spec.reads_residual) continue;  // "add": below
      SCOPED_TRACE(str_cat(spec.name, ", n = ", n));
      const PostOp op{&spec, params_for(spec)};
      const std::vector<float> x = sweep(n);
      const std::vector<float> want = reference(std::span<const PostOp>(&op, 1), x, nullptr);
      // The hand-written form where there is one, and the expression program.
      for (bool hand_written : {true, false}) {
        SCOPED_TRACE(hand_written ? "hand-written" : "program");
        auto vec = hwy_cpu::vector_epilogue(std::span<const PostOp>(&op, 1), hand_written);
        ASSERT_TRUE(vec.has_value());
        std::vector<float> y = x;
        hwy_cpu::apply_epilogue(*vec, y.data(), nullptr, static_cast<int64_t>(y.size()));
        int bad = 0;
        for (size_t i = 0; i < x.size(); ++i) {
          if (!same(y[i], want[i]) && ++bad <= 3) ADD_FAILURE() << "x = " << x[i] << ": got " << y[i] << ", want " << want[i];
        }
        EXPECT_EQ(bad, 0);
      }
    }
  }
}

// The reference is the op record's own math: a post-op computes what the op it absorbed does
// unfused, NaN included (Relu(NaN) is NaN, not 0).
TEST(HwyEpilogueTest, PostOpsDeriveFromTheirOpRecords) {
  const PostOp relu{find_post_op("relu"), {}};
  const std::vector<float> x = {-1.0f, 2.0f, std::numeric_limits<float>::quiet_NaN()};
  const std::vector<float> y = reference(std::span<const PostOp>(&relu, 1), x, nullptr);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 2.0f);
  EXPECT_TRUE(std::isnan(y[2]));
  // Activations without a hand-named post-op get one named after the op, with its float
  // attributes as params.
  const PostOpSpec* celu = find_post_op("celu");
  ASSERT_NE(celu, nullptr);
  EXPECT_EQ(celu->onnx_op, "Celu");
  EXPECT_EQ(celu->num_params, 1);
  const PostOpSpec* trelu = find_post_op("thresholded_relu");
  ASSERT_NE(trelu, nullptr);
  const PostOp op{trelu, {1.5f}};
  const std::vector<float> t = reference(std::span<const PostOp>(&op, 1), {1.0f, 1.5f, 2.0f}, nullptr);
  EXPECT_EQ(t, (std::vector<float>{0.0f, 0.0f, 2.0f}));
  EXPECT_EQ(find_post_op("p_relu"), nullptr);  // two inputs: not a post-op
}

TEST(HwyEpilogueTest, ChainsWithTheResidualApplyInOrder) {
  // add, then sigmoid_mul, then clip, then celu: y = celu(clip(silu(y + r))).
  std::vector<PostOp> ops = {{find_post_op("add"), {}},
                             {find_post_op("sigmoid_mul"), {}},
                             {find_post_op("clip"), {-0.2f, 3.0f}},
                             {find_post_op("celu"), {0.5f}}};
  auto vec = hwy_cpu::vector_epilogue(ops);
  ASSERT_TRUE(vec.has_value());
  EXPECT_TRUE(vec->reads_residual);
  EXPECT_TRUE(vec->fast.empty());  // celu has no hand-written form: the whole chain is one program
  const size_t n = 50003;
  std::vector<float> y(n), r(n);
  for (size_t i = 0; i < n; ++i) {
    y[i] = std::sin(0.37f * static_cast<float>(i)) * 6.0f;
    r[i] = std::cos(0.11f * static_cast<float>(i)) * 2.0f;
  }
  std::vector<float> want(n);
  for (size_t i = 0; i < n; ++i) {
    const float a = y[i] + r[i];
    const float s = a / (1.0f + std::exp(-a));
    const float c = std::min(std::max(s, -0.2f), 3.0f);
    want[i] = std::max(c, 0.0f) + std::min(0.5f * (std::exp(c / 0.5f) - 1.0f), 0.0f);
  }
  hwy_cpu::apply_epilogue(*vec, y.data(), r.data(), static_cast<int64_t>(n));
  for (size_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], want[i], 1e-5f * std::max(1.0f, std::abs(want[i]))) << i;
}

// The vector sigmoid (exp by its own range reduction, reciprocal by estimate + Newton step)
// against sigmoid in double over its whole range: a few ulp where the result is a normal float,
// exactly 0 where the reference's exp(-x) overflows, exactly 1 far right.
TEST(HwyEpilogueTest, SigmoidIsWithinFewUlpOverItsWholeRange) {
  const PostOp op{find_post_op("sigmoid"), {}};
  auto vec = hwy_cpu::vector_epilogue(std::span<const PostOp>(&op, 1));
  ASSERT_TRUE(vec.has_value());
  std::vector<float> x;
  for (float v = -100.0f; v <= 100.0f; v += 0.000731f) x.push_back(v);
  std::vector<float> y = x;
  hwy_cpu::apply_epilogue(*vec, y.data(), nullptr, static_cast<int64_t>(y.size()));
  int bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = 1.0 / (1.0 + std::exp(-static_cast<double>(x[i])));
    bool ok;
    if (x[i] < -88.73f) ok = y[i] == 0.0f;
    else if (want < std::numeric_limits<float>::min()) ok = std::abs(y[i]) < 2 * std::numeric_limits<float>::min();
    else ok = std::abs(y[i] - want) <= 4 * std::numeric_limits<float>::epsilon() * want;
    if (!ok && ++bad <= 3) ADD_FAILURE() << "x = " << x[i] << ": got " << y[i] << ", want " << want;
  }
  EXPECT_EQ(bad, 0);
}

// The vector GELU (x * Phi(x), Phi from a fitted log-CDF and an exponential, no erf) against
// GELU in double: within 2 ulp for x > 0, within 2 * 2^-24 of Phi (times |x|) for x < 0, where
// the reference's own 1 + erf(x / sqrt 2) is only that close; exactly x far right and -0 far left.
TEST(HwyEpilogueTest, GeluErfIsWithinFewUlpOfTheNormalCdf) {
  const PostOp op{find_post_op("gelu_erf"), {}};
  auto vec = hwy_cpu::vector_epilogue(std::span<const PostOp>(&op, 1));
  ASSERT_TRUE(vec.has_value());
  ASSERT_FALSE(vec->fast.empty());
  std::vector<float> x;
  for (float v = -12.0f; v <= 12.0f; v += 0.0000731f) x.push_back(v);
  std::vector<float> y = x;
  hwy_cpu::apply_epilogue(*vec, y.data(), nullptr, static_cast<int64_t>(y.size()));
  const double eps = std::numeric_limits<float>::epsilon();
  int bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i], want = 0.5 * v * std::erfc(-v / std::sqrt(2.0));
    bool ok;
    if (v >= 5.5) ok = y[i] == x[i];
    else if (v <= -5.5) ok = y[i] == 0.0f && std::signbit(y[i]);
    else if (v > 0) ok = std::abs(y[i] - want) <= 2 * eps * want;
    else ok = std::abs(y[i] - want) <= eps * std::abs(v);
    if (!ok && ++bad <= 3) ADD_FAILURE() << "x = " << x[i] << ": got " << y[i] << ", want " << want;
  }
  EXPECT_EQ(bad, 0);
}

TEST(HwyEpilogueTest, PostOpsOfUnknownOpsHaveNoVectorForm) {
  PostOpSpec fake;
  fake.name = "made_up";
  fake.onnx_op = "NoSuchOp";
  const PostOp op{&fake, {}};
  EXPECT_FALSE(hwy_cpu::vector_epilogue(std::span<const PostOp>(&op, 1)).has_value());
}

}  // namespace
}  // namespace opfuse
