// Trilu and EyeLike. Expected values: numpy.triu / numpy.tril / numpy.eye on the same inputs.
#include "tensor_test_util.h"

namespace opfuse::testing {
namespace {

TEST(TriluOp, UpperAndLowerWithOffsets) {
  // x = arange(12).reshape(3, 4)
  auto upper = run_node("Trilu", {in(iota_f32({3, 4}))});
  ASSERT_TRUE(upper.run.is_ok()) << upper.run.message();
  EXPECT_EQ(upper.shape(), "[3,4]");
  expect_tensor<float>(upper.outputs[0], {3, 4}, {0, 1, 2, 3, 0, 5, 6, 7, 0, 0, 10, 11});
  // np.tril(x, -1)
  auto lower = run_node("Trilu", {in(iota_f32({3, 4})), cst(tv<int64_t>({}, {-1}))},
                        {{"upper", AttrValue(int64_t{0})}});
  ASSERT_TRUE(lower.run.is_ok()) << lower.run.message();
  expect_tensor<float>(lower.outputs[0], {3, 4}, {0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0});
  // np.triu(x, 2) on a batch of two 2x3 int matrices
  auto batch = run_node("Trilu", {in(tv<int32_t>({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})),
                                  in(tv<int64_t>({1}, {2}))});
  ASSERT_TRUE(batch.run.is_ok()) << batch.run.message();
  expect_tensor<int32_t>(batch.outputs[0], {2, 2, 3}, {0, 0, 3, 0, 0, 0, 0, 0, 9, 0, 0, 0});
}

TEST(TriluOp, HugeOffsetsKeepAllOrNothing) {
  const Tensor x = tv<float>({2, 2}, {1, 2, 3, 4});
  auto none = run_node("Trilu", {in(x), cst(tv<int64_t>({}, {kI64Max}))});
  expect_tensor<float>(none.outputs[0], {2, 2}, {0, 0, 0, 0});
  auto all = run_node("Trilu", {in(x), cst(tv<int64_t>({}, {kI64Min}))});
  expect_tensor<float>(all.outputs[0], {2, 2}, {1, 2, 3, 4});
  auto lower_all = run_node("Trilu", {in(x), cst(tv<int64_t>({}, {kI64Max}))}, {{"upper", AttrValue(int64_t{0})}});
  expect_tensor<float>(lower_all.outputs[0], {2, 2}, {1, 2, 3, 4});
  auto lower_none = run_node("Trilu", {in(x), cst(tv<int64_t>({}, {kI64Min}))}, {{"upper", AttrValue(int64_t{0})}});
  expect_tensor<float>(lower_none.outputs[0], {2, 2}, {0, 0, 0, 0});
  auto empty = run_node("Trilu", {in(Tensor::zeros(DType::kF32, {3, 0, 2}).value())});
  ASSERT_TRUE(empty.run.is_ok()) << empty.run.message();
  EXPECT_EQ(empty.outputs[0].dims(), (std::vector<int64_t>{3, 0, 2}));
}

TEST(TriluOp, BadInputsAreUserErrors) {
  expect_user_error(run_node("Trilu", {in(tv<float>({3}, {1, 2, 3}))}).build, {"node 'n'", "[3]", "rank >= 2"});
  expect_user_error(run_node("Trilu", {in(iota_f32({2, 2})), in(tv<int32_t>({}, {1}))}).build, {"k has dtype i32"});
  expect_user_error(run_node("Trilu", {in(iota_f32({2, 2})), in(tv<int64_t>({2}, {1, 2}))}).build, {"k [2]"});
}

TEST(EyeLikeOp, DiagonalsAndDtype) {
  auto main = run_node("EyeLike", {in(Tensor::zeros(DType::kF32, {2, 3}).value())});
  ASSERT_TRUE(main.run.is_ok()) << main.run.message();
  expect_tensor<float>(main.outputs[0], {2, 3}, {1, 0, 0, 0, 1, 0});
  // np.eye(3, 2, k=-1, dtype=int64) from an int32 input
  auto below = run_node("EyeLike", {in(Tensor::zeros(DType::kI32, {3, 2}).value())},
                        {{"k", AttrValue(int64_t{-1})}, {"dtype", AttrValue(int64_t{7})}});
  ASSERT_TRUE(below.run.is_ok()) << below.run.message();
  EXPECT_EQ(below.values[0]->dtype, DType::kI64);
  expect_tensor<int64_t>(below.outputs[0], {3, 2}, {0, 0, 1, 0, 0, 1});
  auto far = run_node("EyeLike", {in(Tensor::zeros(DType::kF64, {2, 2}).value())}, {{"k", AttrValue(kI64Max)}});
  expect_tensor<double>(far.outputs[0], {2, 2}, {0, 0, 0, 0});
}

TEST(EyeLikeOp, BadInputsAreUserErrors) {
  expect_user_error(run_node("EyeLike", {in(iota_f32({2, 2, 2}))}).build, {"node 'n'", "[2,2,2]", "2-D"});
  expect_user_error(run_node("EyeLike", {in(iota_f32({2, 2}))}, {{"dtype", AttrValue(int64_t{8})}}).build,
                    {"dtype 8"});
}

}  // namespace
}  // namespace opfuse::testing
