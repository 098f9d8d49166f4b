// CumSum, Hardmax, TopK. Expected values: numpy.cumsum (flipped / shifted for reverse and
// exclusive), the one-hot of numpy.argmax, and numpy sorting on the same inputs.
#include <cmath>

#include "tensor_test_util.h"

namespace opfuse::testing {
namespace {

Attributes flags(int64_t exclusive, int64_t reverse) {
  return {{"exclusive", AttrValue(exclusive)}, {"reverse", AttrValue(reverse)}};
}

TEST(CumSumOp, ExclusiveAndReverseAlongAxes) {
  const Tensor x = tv<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto plain = run_node("CumSum", {in(x), cst(tv<int32_t>({}, {1}))});
  ASSERT_TRUE(plain.run.is_ok()) << plain.run.message();
  expect_tensor<float>(plain.outputs[0], {2, 3}, {1, 3, 6, 4, 9, 15});
  auto rows = run_node("CumSum", {in(x), cst(tv<int64_t>({1}, {-2}))});
  expect_tensor<float>(rows.outputs[0], {2, 3}, {1, 2, 3, 5, 7, 9});
  auto excl = run_node("CumSum", {in(x), cst(tv<int64_t>({}, {1}))}, flags(1, 0));
  expect_tensor<float>(excl.outputs[0], {2, 3}, {0, 1, 3, 0, 4, 9});
  auto rev = run_node("CumSum", {in(x), cst(tv<int64_t>({}, {1}))}, flags(0, 1));
  expect_tensor<float>(rev.outputs[0], {2, 3}, {6, 5, 3, 15, 11, 6});
  auto both = run_node("CumSum", {in(x), cst(tv<int64_t>({}, {1}))}, flags(1, 1));
  expect_tensor<float>(both.outputs[0], {2, 3}, {5, 3, 0, 11, 6, 0});
}

TEST(CumSumOp, IntegersStayExactAndNaNPropagates) {
  // 2^53 + 1 is not a double: a sum through double would lose the 1.
  const int64_t big = (int64_t{1} << 53);
  auto ints = run_node("CumSum", {in(tv<int64_t>({3}, {big, 1, 1})), cst(tv<int64_t>({}, {0}))});
  ASSERT_TRUE(ints.run.is_ok()) << ints.run.message();
  expect_tensor<int64_t>(ints.outputs[0], {3}, {big, big + 1, big + 2});
  auto nan = run_node("CumSum", {in(tv<float>({3}, {1, NAN, 2})), cst(tv<int64_t>({}, {0}))});
  ASSERT_TRUE(nan.run.is_ok());
  EXPECT_EQ(nan.outputs[0].data<float>()[0], 1.0f);
  EXPECT_TRUE(std::isnan(nan.outputs[0].data<float>()[1]));
  EXPECT_TRUE(std::isnan(nan.outputs[0].data<float>()[2]));
}

TEST(CumSumOp, BadInputsAreUserErrors) {
  const Tensor x = tv<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_user_error(run_node("CumSum", {in(x), cst(tv<int64_t>({}, {2}))}).build, {"node 'n'", "axis 2"});
  expect_user_error(run_node("CumSum", {in(x), in(tv<int64_t>({}, {-3}))}).run, {"node 'n'", "axis -3"});
  expect_user_error(run_node("CumSum", {in(x), cst(tv<float>({}, {0}))}).build, {"axis"});
  expect_user_error(run_node("CumSum", {in(x), cst(tv<int64_t>({2}, {0, 1}))}).build, {"one value"});
  expect_user_error(run_node("CumSum", {in(tv<int8_t>({1}, {1})), cst(tv<int64_t>({}, {0}))}).build,
                    {"x has dtype i8"});
}

TEST(HardmaxOp, FirstMaximumAlongTheAxis) {
  const Tensor x = tv<float>({2, 3}, {3, 1, 3, -1, 5, 2});
  auto last = run_node("Hardmax", {in(x)});
  ASSERT_TRUE(last.run.is_ok()) << last.run.message();
  expect_tensor<float>(last.outputs[0], {2, 3}, {1, 0, 0, 0, 1, 0});
  auto first = run_node("Hardmax", {in(x)}, {{"axis", AttrValue(int64_t{0})}});
  expect_tensor<float>(first.outputs[0], {2, 3}, {1, 0, 1, 0, 1, 0});
  // numpy.argmax: the first NaN is the maximum.
  auto nan = run_node("Hardmax", {in(tv<float>({4}, {1, NAN, 9, NAN}))});
  expect_tensor<float>(nan.outputs[0], {4}, {0, 1, 0, 0});
  expect_user_error(run_node("Hardmax", {in(x)}, {{"axis", AttrValue(int64_t{2})}}).build, {"node 'n'", "axis 2"});
  expect_user_error(run_node("Hardmax", {in(tv<int32_t>({1}, {1}))}).build, {"i32"});
}

TEST(TopKOp, LargestSmallestAndTies) {
  const Tensor x = tv<float>({2, 4}, {1, 4, 4, 2, 0, -1, 7, 7});
  auto largest = run_node("TopK", {in(x), cst(i64s({2}))}, {}, 2);
  ASSERT_TRUE(largest.run.is_ok()) << largest.run.message();
  EXPECT_EQ(largest.shape(0), "[2,2]");
  expect_tensor<float>(largest.outputs[0], {2, 2}, {4, 4, 7, 7});
  expect_tensor<int64_t>(largest.outputs[1], {2, 2}, {1, 2, 2, 3});  // equal values: lower index first
  auto smallest = run_node("TopK", {in(x), cst(i64s({3}))}, {{"largest", AttrValue(int64_t{0})}}, 2);
  expect_tensor<float>(smallest.outputs[0], {2, 3}, {1, 2, 4, -1, 0, 7});
  expect_tensor<int64_t>(smallest.outputs[1], {2, 3}, {0, 3, 1, 1, 0, 2});
  auto columns = run_node("TopK", {in(x), in(i64s({1}))}, {{"axis", AttrValue(int64_t{0})}}, 2);
  ASSERT_TRUE(columns.run.is_ok()) << columns.run.message();
  EXPECT_EQ(columns.shape(0), "[?,4]");  // K not constant
  expect_tensor<float>(columns.outputs[0], {1, 4}, {1, 4, 7, 7});
  expect_tensor<int64_t>(columns.outputs[1], {1, 4}, {0, 0, 1, 1});
  // int64 values beyond double precision come back exactly; NaN ranks above every number.
  const int64_t big = (int64_t{1} << 60) + 1;
  auto ints = run_node("TopK", {in(tv<int64_t>({3}, {5, big, big - 1})), cst(i64s({1}))}, {}, 2);
  expect_tensor<int64_t>(ints.outputs[0], {1}, {big});
  auto nan = run_node("TopK", {in(tv<float>({3}, {1, NAN, 3})), cst(i64s({2}))}, {}, 2);
  expect_tensor<int64_t>(nan.outputs[1], {2}, {1, 2});
}

TEST(TopKOp, BadKIsAUserError) {
  const Tensor x = tv<float>({2, 4}, {1, 4, 4, 2, 0, -1, 7, 7});
  expect_user_error(run_node("TopK", {in(x), cst(i64s({5}))}, {}, 2).build, {"node 'n'", "K = 5", "[2,4]"});
  expect_user_error(run_node("TopK", {in(x), in(i64s({-1}))}, {}, 2).run, {"node 'n'", "K = -1"});
  expect_user_error(run_node("TopK", {in(x), cst(i64s({1}))}, {{"axis", AttrValue(int64_t{3})}}, 2).build,
                    {"axis 3"});
}

}  // namespace
}  // namespace opfuse::testing
