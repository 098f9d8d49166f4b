// Det and Einsum. Expected values: numpy.linalg.det and numpy.einsum on the same inputs.
#include <cmath>

#include "tensor_test_util.h"

namespace opfuse::testing {
namespace {

Attributes equation(const char* e) { return {{"equation", AttrValue(std::string(e))}}; }

TEST(DetOp, BatchOfMatricesWithPivotingAndSingular) {
  // [[0, 2], [3, 4]] needs a row swap: det -6; [[1, 2], [2, 4]] is singular; 3x3 det 1.
  auto two = run_node("Det", {in(tv<float>({2, 2, 2}, {0, 2, 3, 4, 1, 2, 2, 4}))});
  ASSERT_TRUE(two.run.is_ok()) << two.run.message();
  EXPECT_EQ(two.shape(), "[2]");
  expect_tensor<float>(two.outputs[0], {2}, {-6, 0});
  auto three = run_node("Det", {in(tv<double>({3, 3}, {2, -3, 1, 2, 0, -1, 1, 4, 5}))});
  ASSERT_TRUE(three.run.is_ok()) << three.run.message();
  EXPECT_EQ(three.shape(), "[]");
  expect_tensor<double>(three.outputs[0], {}, {49});
  auto nan = run_node("Det", {in(tv<float>({2, 2}, {NAN, 1, 1, 1}))});
  EXPECT_TRUE(std::isnan(nan.outputs[0].data<float>()[0]));
  expect_user_error(run_node("Det", {in(tv<float>({2, 3}, {1, 2, 3, 4, 5, 6}))}).build, {"node 'n'", "[2,3]", "square"});
  expect_user_error(run_node("Det", {in(tv<int32_t>({1, 1}, {1}))}).build, {"i32"});
}

TEST(EinsumOp, MatmulTransposeTraceAndImplicitOutput) {
  const Tensor a = tv<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = tv<float>({3, 2}, {1, 0, 0, 1, 1, 1});
  auto mm = run_node("Einsum", {in(a), in(b)}, equation("ij,jk->ik"));
  ASSERT_TRUE(mm.run.is_ok()) << mm.run.message();
  EXPECT_EQ(mm.shape(), "[2,2]");
  expect_tensor<float>(mm.outputs[0], {2, 2}, {4, 5, 10, 11});
  auto transpose = run_node("Einsum", {in(a)}, equation("ij -> ji"));
  expect_tensor<float>(transpose.outputs[0], {3, 2}, {1, 4, 2, 5, 3, 6});
  auto implicit = run_node("Einsum", {in(a), in(b)}, equation("ij,jk"));  // implicit: "ik"
  expect_tensor<float>(implicit.outputs[0], {2, 2}, {4, 5, 10, 11});
  auto trace = run_node("Einsum", {in(tv<int64_t>({2, 2}, {1, 2, 3, 4}))}, equation("ii->"));
  ASSERT_TRUE(trace.run.is_ok()) << trace.run.message();
  expect_tensor<int64_t>(trace.outputs[0], {}, {5});
  // Batch diagonal through an ellipsis: np.einsum('...ii->...i', x)
  auto diag = run_node("Einsum", {in(iota_f32({2, 2, 2}))}, equation("...ii->...i"));
  ASSERT_TRUE(diag.run.is_ok()) << diag.run.message();
  EXPECT_EQ(diag.shape(), "[2,2]");
  expect_tensor<float>(diag.outputs[0], {2, 2}, {0, 3, 4, 7});
}

TEST(EinsumOp, BadEquationsAreUserErrors) {
  const Tensor a = tv<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_user_error(run_node("Einsum", {in(a), in(a)}, equation("ij,jk->ik")).build,
                    {"node 'n'", "label 'j'", "sizes 3 and 2"});
  expect_user_error(run_node("Einsum", {in(a)}, equation("ijk->i")).build, {"3 labels", "rank 2"});
  expect_user_error(run_node("Einsum", {in(a)}, equation("ij->iz")).build, {"output label 'z'"});
  expect_user_error(run_node("Einsum", {in(a)}, equation("ij,j->i")).build, {"2 operands", "1 inputs"});
  expect_user_error(run_node("Einsum", {in(a)}, equation("i1->i")).build, {"'1', not a letter"});
}

}  // namespace
}  // namespace opfuse::testing
