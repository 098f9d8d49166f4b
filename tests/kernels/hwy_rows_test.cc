// Highway Softmax / LogSoftmax / LayerNormalization / Reduce* against the reference kernels.
//
// Tolerances (|got - ref| <= rel |ref| + abs):
//   Softmax, LogSoftmax: 1e-5 rel + 1e-6 abs. The reference sums exponentials in double, the
//     kernel in float vector lanes; for rows up to a few thousand the sum's relative error is
//     ~1e-7. Outputs below 1e-6 (exp(-14) of the max) only need the absolute bound.
//   LayerNormalization: 1e-5 rel + 1e-5 abs. Outputs are (x - mean) * inv_std: an element near
//     the mean is the difference of two O(1) numbers, so its error is relative to the row's
//     scale (~1), not to the element.
//   ReduceSum: 1e-5 rel + 1e-5 abs for the same reason (a sum of mixed signs near zero);
//   ReduceMean 1e-5 + 1e-6; ReduceMax/Min exact.
#include <limits>

#include "hwy_test_util.h"

namespace opfuse::hwy_test {
namespace {

Attributes axis_attr(int64_t axis) { return {{"axis", AttrValue(axis)}}; }

TEST(HwyRows, SoftmaxAndLogSoftmax) {
  const std::vector<std::vector<int64_t>> shapes = {{1}, {3, 1}, {2, 7}, {4, 5, 33}, {2, 3, 1000}, {1, 12, 128, 128}};
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    const std::string name = std::string(op) == "Softmax" ? "hwy.softmax" : "hwy.log_softmax";
    for (const auto& dims : shapes) {
      SCOPED_TRACE(str_cat(op, " ", dims_to_string(dims)));
      check_against_reference(*make_case(op, {In{dims, DType::kF32, {}, -20, 20}}), name);
    }
    // Large logits: exp would overflow without the max shift.
    check_against_reference(*make_case(op, {In{{3, 50}, DType::kF32, {}, 60, 90}}), name);
    // Axis with only 1s after it is a last-axis softmax.
    check_against_reference(*make_case(op, {In{{4, 9, 1, 1}}}, axis_attr(1)), name);
    // Specials: -inf entries (probability 0), a NaN row.
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> v = {1, -inf, 2, 3, -inf, 0.5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
                            std::numeric_limits<float>::quiet_NaN(), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    check_against_reference(*make_case(op, {In{{2, 17}, DType::kF32, {}, 0, 0, v}}), name);
    // Other axes are declined.
    EXPECT_EQ(compile(*make_case(op, {In{{3, 4}}}, axis_attr(0)))->name(), "reference");
  }
}

// Rows of up to 8 elements run a vector of rows at a time (one lane per row): whole vectors,
// leftover rows and every special in some lane, at both vector widths.
TEST(HwyRows, SoftmaxOfShortRows) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    const std::string name = std::string(op) == "Softmax" ? "hwy.softmax" : "hwy.log_softmax";
    for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{
             {1, 4420, 2}, {37, 5}, {100, 1}, {19, 8}, {3, 11, 3}, {60, 60, 60, 60}}) {
      SCOPED_TRACE(str_cat(op, " ", dims_to_string(dims)));
      check_against_reference(*make_case(op, {In{dims, DType::kF32, {}, -30, 30}}), name);
    }
    // Rows of 3, 40 of them (two 16-lane vectors and 8 left over; five 8-lane vectors): NaN,
    // +inf, -inf, all -inf, large logits and denormals, each in a different lane.
    std::vector<float> v(40 * 3);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7) - 3.0f;
    const std::vector<std::pair<size_t, std::vector<float>>> specials = {
        {1, {nan, 0, 1}}, {6, {inf, 2, 3}}, {9, {-inf, 2, 3}}, {14, {-inf, -inf, -inf}}, {17, {80, 85, 90}},
        {22, {1e-40f, -1e-39f, 0}}, {31, {2, nan, inf}}, {38, {-inf, inf, 0}}};
    for (const auto& [row, values] : specials) std::copy(values.begin(), values.end(), v.begin() + row * 3);
    check_against_reference(*make_case(op, {In{{40, 3}, DType::kF32, {}, 0, 0, v}}), name);
  }
}

// Logits far below the row's max: a term exp(x - max) below FLT_MIN is 0 in the kernel instead
// of subnormal (hwy_math-inl.h's SoftmaxExp: a subnormal result costs a microcode assist on AMD
// Zen), so an output the reference gives as subnormal may be 0; every output in the normal range
// must still match it to 1e-5 relative, however far below the max (-86.5 gives 2e-38).
TEST(HwyRows, SoftmaxTermsBelowTheNormalRange) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> offsets = {0,   -1,   -10,    -50,  -80,  -86.5f, -87.3f, -87.4f, -88,
                                      -90, -100, -103.5, -104, -150, -1e4f,  -inf,   -86.9f};
  // Rows of 51 (whole vectors at both widths plus a scalar tail), -200 but for the offsets at
  // columns [17 r, 17 r + 17) of row r, shifted by 0, 5 and 1000.
  std::vector<float> v;
  for (int r = 0; r < 3; ++r) {
    const float shift = r == 0 ? 0.0f : r == 1 ? 5.0f : 1000.0f;
    for (int j = 0; j < 51; ++j) v.push_back(shift + (j / 17 == r ? offsets[j % 17] : -200.0f));
  }
  auto c = make_case("Softmax", {In{{3, 51}, DType::kF32, {}, 0, 0, v}});
  auto k = compile(*c);
  ASSERT_EQ(k->name(), "hwy.softmax");
  auto got = allocate_outputs(*c->node), want = allocate_outputs(*c->node);
  ASSERT_TRUE(run_kernel(*k, *c, got).is_ok());
  ASSERT_TRUE(run_kernel(*make_reference_kernel(*c->node), *c, want).is_ok());
  int normal_outputs = 0;
  for (int64_t i = 0; i < want[0].numel(); ++i) {
    const float g = got[0].data<float>()[i], w = want[0].data<float>()[i];
    if (w >= std::numeric_limits<float>::min()) {
      ++normal_outputs;
      EXPECT_NEAR(g, w, 1e-5 * w) << "element " << i << " (logit " << v[i] << ")";
    } else {
      EXPECT_TRUE(g == 0 || std::fabs(g - w) <= 1e-5 * w) << "element " << i << " is " << g << ", reference " << w;
    }
  }
  EXPECT_EQ(normal_outputs, 3 * 7);  // 0 .. -80, -86.5 and -86.9 in each row
}

TEST(HwyRows, SoftmaxInPlace) {
  auto c = make_case("Softmax", {In{{6, 77}}});
  auto k = compile(*c);
  ASSERT_EQ(k->in_place_input(), 0);
  auto want = allocate_outputs(*c->node);
  ASSERT_TRUE(run_kernel(*make_reference_kernel(*c->node), *c, want).is_ok());
  std::vector<Tensor> alias = {c->inputs[0]};
  ASSERT_TRUE(run_kernel(*k, *c, alias).is_ok());
  expect_close(c->inputs[0], want[0], 1e-5, 1e-6, "in place");
}

TEST(HwyRows, LayerNormalization) {
  struct LnCase {
    std::vector<int64_t> x;
    int64_t axis;
    bool bias;
    int outputs;
  };
  for (const LnCase& t : std::vector<LnCase>{{{2, 5, 768}, -1, true, 1},
                                              {{2, 3, 4}, 1, true, 1},
                                              {{3, 33}, -1, false, 1},
                                              {{7, 1}, -1, true, 3},
                                              {{4, 5, 6}, -1, true, 3},
                                              {{128, 768}, -1, true, 1}}) {
    SCOPED_TRACE(dims_to_string(t.x));
    const std::vector<int64_t> norm(t.x.begin() + (t.axis < 0 ? t.axis + t.x.size() : t.axis), t.x.end());
    std::vector<In> ins = {In{t.x, DType::kF32, {}, -2, 3}, In{norm}};
    if (t.bias) ins.push_back(In{norm});
    check_against_reference(*make_case("LayerNormalization", ins, axis_attr(t.axis), 3, t.outputs),
                            "hwy.layer_norm", 1e-5, 1e-5);
  }
  // A constant row: variance 0, output = bias.
  check_against_reference(*make_case("LayerNormalization", {In{{2, 40}, DType::kF32, {}, 0, 0, std::vector<float>{1.5f}},
                                                            In{{40}}, In{{40}}}),
                          "hwy.layer_norm", 1e-5, 1e-5);
  // Broadcast scale is declined.
  EXPECT_EQ(compile(*make_case("LayerNormalization", {In{{2, 8}}, In{{1}}}))->name(), "reference");
}

TEST(HwyRows, Reductions) {
  struct RCase {
    const char* op;
    std::vector<int64_t> x;
    std::vector<int64_t> axes;
    int64_t keepdims;
  };
  const std::vector<RCase> cases = {
      {"ReduceMean", {1, 128, 768}, {-1}, 1}, {"ReduceMean", {3, 7}, {1}, 0},
      {"ReduceSum", {2, 3, 1000}, {2}, 0},    {"ReduceSum", {4, 5, 6}, {1, 2}, 1},
      {"ReduceMax", {3, 4, 5}, {1, 2}, 1},    {"ReduceMin", {3, 4, 5}, {}, 0},
      {"ReduceMean", {2, 3, 40}, {1}, 1},     {"ReduceSum", {5, 300, 70}, {0}, 0},
      {"ReduceMax", {2, 9, 17}, {1}, 0},      {"ReduceMin", {1, 1, 1}, {2}, 1},
      {"ReduceSum", {64, 1024}, {1}, 1},      {"ReduceMean", {1, 64, 56, 56}, {2, 3}, 1}};
  for (const RCase& t : cases) {
    SCOPED_TRACE(str_cat(t.op, " ", dims_to_string(t.x)));
    Attributes attrs = {{"keepdims", AttrValue(t.keepdims)}};
    std::vector<In> ins = {In{t.x}};
    if (std::string(t.op) == "ReduceSum") {
      if (!t.axes.empty()) {
        ins.push_back(In{{static_cast<int64_t>(t.axes.size())}, DType::kI64,
                         Tensor::from_vector<int64_t>({static_cast<int64_t>(t.axes.size())}, t.axes)});
      }
    } else if (!t.axes.empty()) {
      attrs["axes"] = AttrValue(t.axes);
    }
    const bool sum = std::string(t.op) == "ReduceSum";
    check_against_reference(*make_case(t.op, ins, attrs), "hwy.reduce", 1e-5, sum ? 1e-5 : 1e-6);
  }
  // NaN propagates through Max.
  std::vector<float> v = {1, 2, std::numeric_limits<float>::quiet_NaN(), 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
  check_against_reference(*make_case("ReduceMax", {In{{2, 18}, DType::kF32, {}, 0, 0, v}},
                                     {{"axes", AttrValue(std::vector<int64_t>{1})}}),
                          "hwy.reduce");
  // Axes that are not one block go to the reference.
  EXPECT_EQ(compile(*make_case("ReduceSum", {In{{2, 3, 4}}, In{{2}, DType::kI64,
                                             Tensor::from_vector<int64_t>({2}, {0, 2})}}))->name(),
            "reference");
  // Run-time axes are unknown at compile time.
  EXPECT_EQ(compile(*make_case("ReduceSum", {In{{2, 3}}, In{{1}, DType::kI64}}))->name(), "reference");
}

}  // namespace
}  // namespace opfuse::hwy_test
