// InstanceNormalization, LRN, MeanVarianceNormalization. Expected values: numpy formulas of the
// ONNX spec (np.var over the spatial axes; the LRN channel window; MVN's mean/std) on the same
// inputs, pasted as literals.
#include <cmath>

#include "tensor_test_util.h"

namespace opfuse::testing {
namespace {

// N=1, C=3, 2x2: channel 1 is constant (variance 0).
Tensor image() { return tv<float>({1, 3, 2, 2}, {1, 2, 3, 4, 0, 0, 0, 0, -1, 5, 2, 2}); }

void expect_near_all(const Tensor& t, const std::vector<double>& want) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(t.get_double(static_cast<int64_t>(i)), want[i], 2e-6) << i;
}

TEST(InstanceNormOp, PerSampleChannelThenScaleAndBias) {
  auto r = run_node("InstanceNormalization", {in(image()), in(tv<float>({3}, {1, 2, 0.5f})), in(tv<float>({3}, {0, 1, -1}))});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[1,3,2,2]");
  expect_near_all(r.outputs[0], {-1.3416354656, -0.4472118318, 0.4472118318, 1.3416354656, 1, 1, 1, 1, -1.7071059942,
                                 -0.2928940058, -1, -1});
}

TEST(InstanceNormOp, BadInputsAreUserErrors) {
  expect_user_error(run_node("InstanceNormalization", {in(image()), in(tv<float>({2}, {1, 1})), in(tv<float>({3}, {0, 0, 0}))}).build,
                    {"node 'n'", "scale [2]", "[1,3,2,2]"});
  expect_user_error(run_node("InstanceNormalization", {in(tv<int32_t>({1, 1, 1}, {1})), in(tv<int32_t>({1}, {1})),
                                                       in(tv<int32_t>({1}, {1}))}).build,
                    {"i32", "float"});
}

TEST(LrnOp, NeighbouringChannelWindow) {
  auto r = run_node("LRN", {in(image())}, {{"size", AttrValue(int64_t{2})}});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  expect_near_all(r.outputs[0], {0.9999625683, 1.9997000694, 2.9989879131, 3.9976015091, 0, 0, 0, 0, -0.9999625683,
                                 4.9953174591, 1.9997000694, 1.9997000694});
  auto nan = run_node("LRN", {in(tv<float>({1, 2, 1}, {NAN, 1}))}, {{"size", AttrValue(int64_t{3})}});
  ASSERT_TRUE(nan.run.is_ok());
  EXPECT_TRUE(std::isnan(nan.outputs[0].data<float>()[0]));
  EXPECT_TRUE(std::isnan(nan.outputs[0].data<float>()[1]));  // its window includes the NaN
  expect_user_error(run_node("LRN", {in(image())}, {{"size", AttrValue(int64_t{0})}}).build, {"node 'n'", "size 0"});
  expect_user_error(run_node("LRN", {in(tv<float>({2, 2}, {1, 2, 3, 4}))}, {{"size", AttrValue(int64_t{1})}}).build,
                    {"[2,2]", "rank >= 3"});
}

TEST(MeanVarianceNormOp, DefaultAxesAndConstantSlices) {
  auto r = run_node("MeanVarianceNormalization", {in(tv<float>({1, 2, 3, 1}, {1, 2, 3, 4, 5, 6}))});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  expect_near_all(r.outputs[0], {-1.2247450351, 0, 1.2247450351, -1.2247455120, 0, 1.2247455120});
  // A constant slice: 0 / (0 + 1e-9) = 0, not NaN.
  auto flat = run_node("MeanVarianceNormalization", {in(tv<float>({2, 2}, {3, 3, 1, 2}))},
                       {{"axes", AttrValue(std::vector<int64_t>{1})}});
  ASSERT_TRUE(flat.run.is_ok()) << flat.run.message();
  expect_near_all(flat.outputs[0], {0, 0, -1, 1});
  expect_user_error(run_node("MeanVarianceNormalization", {in(tv<float>({2, 2}, {3, 3, 1, 2}))}).build,
                    {"node 'n'", "axis"});
}

}  // namespace
}  // namespace opfuse::testing
