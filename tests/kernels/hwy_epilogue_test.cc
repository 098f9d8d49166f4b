// The vector epilogue pass (kernels/cpu/hwy_epilogue.h) against the post-ops' scalar reference
// (ops/fused.cc, PostOpSpec::apply), for every post-op of the vocabulary, on a sweep through
// each op's interesting range plus infinities, zeros and NaN, with lengths that leave a tail
// and that take the multi-threaded path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/hwy_epilogue.h"

namespace opfuse {
namespace {

std::vector<float> params_for(std::string_view name) {
  if (name == "leaky_relu" || name == "elu") return {0.3f};
  if (name == "clip") return {-0.5f, 0.7f};
  if (name == "hardsigmoid") return {0.2f, 0.5f};
  if (name == "linear") return {1.5f, -0.25f};
  return {};
}

// n points through [-20, 20], then 8 special values.
std::vector<float> sweep(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = -20.0f + 40.0f * static_cast<float>(i) / static_cast<float>(std::max<size_t>(n - 1, 1));
  const float inf = std::numeric_limits<float>::infinity();
  for (float special : {0.0f, -0.0f, inf, -inf, 1e-30f, -1e-30f, 88.0f, -88.0f}) x.push_back(special);
  return x;
}

TEST(HwyEpilogueTest, EveryPostOpMatchesItsScalarReference) {
  for (size_t n : {size_t{1}, size_t{13}, size_t{1001}, size_t{40000}}) {
    for (const PostOpSpec& spec : post_op_specs()) {
      if (spec.apply == nullptr) continue;  // "add": below
      SCOPED_TRACE(str_cat(spec.name, ", n = ", n));
      const PostOp op{&spec, params_for(spec.name)};
      ASSERT_EQ(static_cast<int>(op.params.size()), spec.num_params);
      auto vec = hwy_cpu::vector_post_ops(std::span<const PostOp>(&op, 1));
      ASSERT_TRUE(vec.has_value());
      std::vector<float> y = sweep(n);
      std::vector<float> x = y;
      hwy_cpu::apply_post_ops(*vec, y.data(), nullptr, static_cast<int64_t>(y.size()));
      int bad = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const float want = spec.apply(x[i], op.params.data());
        const bool same = std::isnan(want) ? std::isnan(y[i])
                                           : std::abs(y[i] - want) <= 1e-5f * std::max(1.0f, std::abs(want)) ||
                                                 y[i] == want;
        if (!same && ++bad <= 3) ADD_FAILURE() << "x = " << x[i] << ": got " << y[i] << ", want " << want;
      }
      EXPECT_EQ(bad, 0);
    }
  }
}

TEST(HwyEpilogueTest, NaNPassesThrough) {
  for (const PostOpSpec& spec : post_op_specs()) {
    // The scalar hardsigmoid's min/max turn NaN into 1 (std::min(1, NaN) is 1); NaN in, NaN
    // out is what the vector pass does.
    if (spec.apply == nullptr || spec.name == "hardsigmoid") continue;
    SCOPED_TRACE(spec.name);
    const PostOp op{&spec, params_for(spec.name)};
    auto vec = hwy_cpu::vector_post_ops(std::span<const PostOp>(&op, 1));
    std::vector<float> y(19, std::numeric_limits<float>::quiet_NaN());
    hwy_cpu::apply_post_ops(*vec, y.data(), nullptr, 19);
    const bool want_nan = std::isnan(spec.apply(y[0], op.params.data()));
    for (float v : y) EXPECT_EQ(std::isnan(v), want_nan);
  }
}

TEST(HwyEpilogueTest, ChainsWithTheResidualApplyInOrder) {
  // add, then sigmoid_mul, then clip: y = clip(silu(y + r)).
  std::vector<PostOp> ops = {{find_post_op("add"), {}},
                             {find_post_op("sigmoid_mul"), {}},
                             {find_post_op("clip"), {-0.2f, 3.0f}}};
  auto vec = hwy_cpu::vector_post_ops(ops);
  ASSERT_TRUE(vec.has_value());
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
    want[i] = std::min(std::max(s, -0.2f), 3.0f);
  }
  hwy_cpu::apply_post_ops(*vec, y.data(), r.data(), static_cast<int64_t>(n));
  for (size_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], want[i], 1e-5f * std::max(1.0f, std::abs(want[i]))) << i;
}

// The vector sigmoid (exp by its own range reduction, reciprocal by estimate + Newton step)
// against sigmoid in double over its whole range: a few ulp where the result is a normal float,
// exactly 0 where the reference's exp(-x) overflows, exactly 1 far right.
TEST(HwyEpilogueTest, SigmoidIsWithinFewUlpOverItsWholeRange) {
  const PostOp op{find_post_op("sigmoid"), {}};
  auto vec = hwy_cpu::vector_post_ops(std::span<const PostOp>(&op, 1));
  ASSERT_TRUE(vec.has_value());
  std::vector<float> x;
  for (float v = -100.0f; v <= 100.0f; v += 0.000731f) x.push_back(v);
  std::vector<float> y = x;
  hwy_cpu::apply_post_ops(*vec, y.data(), nullptr, static_cast<int64_t>(y.size()));
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

TEST(HwyEpilogueTest, UnknownPostOpsHaveNoVectorForm) {
  static const PostOpSpec fake{"made_up", "", 0, nullptr, DnnlPostOp::kNone, nullptr, nullptr, nullptr};
  const PostOp op{&fake, {}};
  EXPECT_FALSE(hwy_cpu::vector_post_ops(std::span<const PostOp>(&op, 1)).has_value());
}

}  // namespace
}  // namespace opfuse
