// GatherND, ScatterND, ScatterElements. Expected values: the ONNX spec's examples and numpy
// fancy indexing (np.add.at etc. for reductions) on the same inputs.
#include "tensor_test_util.h"

namespace opfuse::testing {
namespace {

Attributes reduction(const char* r) { return {{"reduction", AttrValue(std::string(r))}}; }

TEST(GatherNDOp, TuplesSlicesAndBatchDims) {
  const Tensor data = tv<int32_t>({2, 2}, {0, 1, 2, 3});
  auto elems = run_node("GatherND", {in(data), in(tv<int64_t>({2, 2}, {0, 0, 1, 1}))});
  ASSERT_TRUE(elems.run.is_ok()) << elems.run.message();
  EXPECT_EQ(elems.shape(), "[2]");
  expect_tensor<int32_t>(elems.outputs[0], {2}, {0, 3});
  auto rows = run_node("GatherND", {in(data), in(tv<int64_t>({2, 1}, {1, -2}))});
  expect_tensor<int32_t>(rows.outputs[0], {2, 2}, {2, 3, 0, 1});
  // batch_dims = 1: data [2,2,2], indices [2,1] pick data[b, indices[b]].
  auto batched = run_node("GatherND", {in(tv<float>({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7})), in(tv<int64_t>({2, 1}, {1, 0}))},
                          {{"batch_dims", AttrValue(int64_t{1})}});
  ASSERT_TRUE(batched.run.is_ok()) << batched.run.message();
  EXPECT_EQ(batched.shape(), "[2,2]");
  expect_tensor<float>(batched.outputs[0], {2, 2}, {2, 3, 4, 5});
}

TEST(GatherNDOp, BadInputsAreUserErrors) {
  const Tensor data = tv<int32_t>({2, 2}, {0, 1, 2, 3});
  expect_user_error(run_node("GatherND", {in(data), in(tv<int64_t>({1, 3}, {0, 0, 0}))}).build,
                    {"node 'n'", "indices [1,3]", "[1, 2]"});
  expect_user_error(run_node("GatherND", {in(data), in(tv<int64_t>({1, 2}, {0, 2}))}).run,
                    {"node 'n'", "index 2", "size 2"});
  expect_user_error(run_node("GatherND", {in(data), in(tv<float>({1, 2}, {0, 0}))}).build, {"indices"});
}

TEST(ScatterNDOp, OverwriteAndReductions) {
  const Tensor data = tv<float>({4}, {1, 2, 3, 4});
  const Tensor idx = tv<int64_t>({3, 1}, {1, 3, 1});
  const Tensor upd = tv<float>({3}, {10, 20, 30});
  auto none = run_node("ScatterND", {in(data), in(idx), in(upd)});
  ASSERT_TRUE(none.run.is_ok()) << none.run.message();
  expect_tensor<float>(none.outputs[0], {4}, {1, 30, 3, 20});  // the last duplicate wins
  expect_tensor<float>(run_node("ScatterND", {in(data), in(idx), in(upd)}, reduction("add")).outputs[0], {4},
                       {1, 42, 3, 24});
  expect_tensor<float>(run_node("ScatterND", {in(data), in(idx), in(upd)}, reduction("mul")).outputs[0], {4},
                       {1, 600, 3, 80});
  expect_tensor<float>(run_node("ScatterND", {in(data), in(idx), in(tv<float>({3}, {-5, 20, 0}))}, reduction("max"))
                           .outputs[0],
                       {4}, {1, 2, 3, 20});
  expect_tensor<float>(run_node("ScatterND", {in(data), in(idx), in(tv<float>({3}, {-5, 20, 0}))}, reduction("min"))
                           .outputs[0],
                       {4}, {1, -5, 3, 4});
  // Slices: data [2,3], indices [1,1] replace row -1.
  auto row = run_node("ScatterND", {in(tv<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6})), in(tv<int64_t>({1, 1}, {-1})),
                                    in(tv<int64_t>({1, 3}, {7, 8, 9}))});
  ASSERT_TRUE(row.run.is_ok()) << row.run.message();
  expect_tensor<int64_t>(row.outputs[0], {2, 3}, {1, 2, 3, 7, 8, 9});
}

TEST(ScatterNDOp, BadInputsAreUserErrors) {
  const Tensor data = tv<float>({4}, {1, 2, 3, 4});
  expect_user_error(run_node("ScatterND", {in(data), in(tv<int64_t>({2, 1}, {0, 1})), in(tv<float>({3}, {1, 2, 3}))}).build,
                    {"node 'n'", "updates [3]", "[2]"});
  expect_user_error(run_node("ScatterND", {in(data), in(tv<int64_t>({1, 1}, {4})), in(tv<float>({1}, {1}))}).run,
                    {"index 4", "size 4"});
  expect_user_error(run_node("ScatterND", {in(data), in(tv<int64_t>({1, 1}, {0})), in(tv<float>({1}, {1}))},
                             reduction("avg"))
                        .build,
                    {"reduction 'avg'"});
  expect_user_error(run_node("ScatterND", {in(data), in(tv<int64_t>({1, 1}, {0})), in(tv<double>({1}, {1}))}).build,
                    {"updates have dtype f64", "f32"});
}

TEST(ScatterElementsOp, AxisAndReductions) {
  // ONNX example: data zeros(3,3), indices [[1,0,2],[0,2,1]], updates [[1,1.1,1.2],[2,2.1,2.2]], axis 0
  const Tensor data = Tensor::zeros(DType::kF32, {3, 3}).value();
  const Tensor idx = tv<int64_t>({2, 3}, {1, 0, 2, 0, 2, 1});
  const Tensor upd = tv<float>({2, 3}, {1.0f, 1.1f, 1.2f, 2.0f, 2.1f, 2.2f});
  auto rows = run_node("ScatterElements", {in(data), in(idx), in(upd)});
  ASSERT_TRUE(rows.run.is_ok()) << rows.run.message();
  expect_tensor<float>(rows.outputs[0], {3, 3}, {2.0f, 1.1f, 0, 1.0f, 0, 2.2f, 0, 2.1f, 1.2f});
  // axis 1 with a negative index and duplicate targets added
  auto cols = run_node("ScatterElements", {in(tv<int32_t>({1, 5}, {1, 2, 3, 4, 5})), in(tv<int64_t>({1, 3}, {1, -2, 1})),
                                           in(tv<int32_t>({1, 3}, {10, 20, 30}))},
                       {{"axis", AttrValue(int64_t{1})}, {"reduction", AttrValue(std::string("add"))}});
  ASSERT_TRUE(cols.run.is_ok()) << cols.run.message();
  expect_tensor<int32_t>(cols.outputs[0], {1, 5}, {1, 42, 3, 24, 5});
  auto mx = run_node("ScatterElements", {in(tv<float>({3}, {1, 5, 3})), in(tv<int64_t>({2}, {1, 2})),
                                         in(tv<float>({2}, {4, 9}))},
                     reduction("max"));
  expect_tensor<float>(mx.outputs[0], {3}, {1, 5, 9});
}

TEST(ScatterElementsOp, BadInputsAreUserErrors) {
  const Tensor data = tv<float>({2, 2}, {0, 0, 0, 0});
  expect_user_error(run_node("ScatterElements", {in(data), in(tv<int64_t>({2}, {0, 1})), in(tv<float>({2}, {1, 1}))}).build,
                    {"node 'n'", "indices [2]", "rank of data [2,2]"});
  expect_user_error(run_node("ScatterElements", {in(data), in(tv<int64_t>({1, 1}, {2})), in(tv<float>({1, 1}, {1}))}).run,
                    {"index 2", "axis 0 of size 2"});
  expect_user_error(run_node("ScatterElements", {in(data), in(tv<int64_t>({1, 1}, {0})), in(tv<float>({1, 2}, {1, 1}))}).build,
                    {"updates [1,2]", "indices [1,1]"});
}

TEST(OneHotOp, AxesNegativeAndOutOfRangeIndices) {
  // numpy: off everywhere, on at [i, idx[i]] with idx wrapped by depth when negative.
  const Tensor values = tv<float>({2}, {-1, 5});
  auto last = run_node("OneHot", {in(tv<int64_t>({3}, {0, -1, 7})), cst(tv<int64_t>({}, {3})), in(values)});
  ASSERT_TRUE(last.run.is_ok()) << last.run.message();
  EXPECT_EQ(last.shape(), "[3,3]");
  expect_tensor<float>(last.outputs[0], {3, 3}, {5, -1, -1, -1, -1, 5, -1, -1, -1});  // 7: all off
  auto first = run_node("OneHot", {in(tv<float>({2}, {1.9f, 0})), cst(tv<float>({1}, {2.0f})), in(values)},
                        {{"axis", AttrValue(int64_t{0})}});
  ASSERT_TRUE(first.run.is_ok()) << first.run.message();
  EXPECT_EQ(first.shape(), "[2,2]");
  expect_tensor<float>(first.outputs[0], {2, 2}, {-1, 5, 5, -1});  // 1.9 truncates to 1
  auto runtime_depth = run_node("OneHot", {in(tv<int32_t>({1}, {1})), in(tv<int32_t>({}, {2})),
                                           in(tv<int64_t>({2}, {0, 1}))});
  ASSERT_TRUE(runtime_depth.run.is_ok()) << runtime_depth.run.message();
  EXPECT_EQ(runtime_depth.shape(), "[1,?]");
  expect_tensor<int64_t>(runtime_depth.outputs[0], {1, 2}, {0, 1});
}

TEST(OneHotOp, BadInputsAreUserErrors) {
  const Tensor values = tv<float>({2}, {0, 1});
  expect_user_error(run_node("OneHot", {in(i64s({1})), cst(tv<int64_t>({}, {0})), in(values)}).build,
                    {"node 'n'", "depth 0"});
  expect_user_error(run_node("OneHot", {in(i64s({1})), cst(tv<int64_t>({}, {2})), in(tv<float>({3}, {0, 1, 2}))}).build,
                    {"values [3]"});
  expect_user_error(run_node("OneHot", {in(i64s({1})), cst(tv<int64_t>({}, {2})), in(values)},
                             {{"axis", AttrValue(int64_t{3})}}).build,
                    {"axis 3"});
}

}  // namespace
}  // namespace opfuse::testing
