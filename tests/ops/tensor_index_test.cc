// Slice, Gather, GatherElements.
#include "tensor_test_util.h"

namespace opfuse::testing {
namespace {

TEST(TensorIndexOps, SliceTwoAxes) {
  // x = arange(12).reshape(3,4); x[0:2, 1:3]
  auto r = run_node("Slice", {in(iota_f32({3, 4})), cst(i64s({0, 1})), cst(i64s({2, 3}))});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[2,2]");
  expect_tensor<float>(r.outputs[0], {2, 2}, {1, 2, 5, 6});
}

TEST(TensorIndexOps, SliceNegativeStepsAndAxes) {
  // numpy: arange(60).reshape(3,4,5)[2:0:-1, ::2, -3:]
  auto r = run_node("Slice", {in(iota_f32({3, 4, 5})), cst(i64s({2, 0, -3})), cst(i64s({0, kI64Max, kI64Max})),
                              cst(i64s({0, -2, 2})), cst(i64s({-1, 2, 1}))});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[2,2,3]");
  expect_tensor<float>(r.outputs[0], {2, 2, 3}, {42, 43, 44, 52, 53, 54, 22, 23, 24, 32, 33, 34});
}

TEST(TensorIndexOps, SliceReverseWithInt64MinEnd) {
  // x[::-2] on 0..9 with start -1 and end INT64_MIN
  auto r = run_node("Slice", {in(tv<int64_t>({10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})), cst(i64s({-1})),
                              cst(i64s({kI64Min})), none(), cst(i64s({-2}))});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[5]");
  expect_tensor<int64_t>(r.outputs[0], {5}, {9, 7, 5, 3, 1});
}

TEST(TensorIndexOps, SliceClampsOutOfBounds) {
  Tensor x = tv<uint8_t>({5}, {1, 2, 3, 4, 5});
  auto past = run_node("Slice", {in(x), cst(i64s({20})), cst(i64s({30}))});
  ASSERT_TRUE(past.run.is_ok());
  EXPECT_EQ(past.shape(), "[0]");
  expect_tensor<uint8_t>(past.outputs[0], {0}, {});
  auto wide = run_node("Slice", {in(x), cst(i64s({-100})), cst(i64s({3}))});
  expect_tensor<uint8_t>(wide.outputs[0], {3}, {1, 2, 3});
  // Runtime starts/ends: same result, rank known but dim unknown at inference.
  auto late = run_node("Slice", {in(x), in(i64s({1})), in(i64s({kI64Max}))});
  ASSERT_TRUE(late.run.is_ok());
  EXPECT_EQ(late.shape(), "[?]");
  expect_tensor<uint8_t>(late.outputs[0], {4}, {2, 3, 4, 5});
}

TEST(TensorIndexOps, SliceBoolAndZeroSize) {
  auto r = run_node("Slice", {in(tv<bool>({2, 3}, {true, false, true, false, false, true})), cst(i64s({1})),
                              cst(i64s({3})), cst(i64s({1}))});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  expect_tensor<bool>(r.outputs[0], {2, 2}, {false, true, false, true});
  auto empty = run_node("Slice", {in(Tensor::zeros(DType::kF32, {0, 3}).value()), cst(i64s({-1})),
                                  cst(i64s({kI64Min})), cst(i64s({0})), cst(i64s({-1}))});
  ASSERT_TRUE(empty.run.is_ok()) << empty.run.message();
  EXPECT_EQ(empty.outputs[0].dims(), (std::vector<int64_t>{0, 3}));
}

TEST(TensorIndexOps, SliceSymbolicShapes) {
  Tensor starts = i64s({0, 0}), ends = i64s({kI64Max, 384}), axes = i64s({1, 2});
  Graph g;
  auto out = infer_node("Slice", {{DType::kF32, sym({"batch", "seq", 768})}, {DType::kI64, {}, &starts},
                                  {DType::kI64, {}, &ends}, {DType::kI64, {}, &axes}},
                        {}, 1, &g);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(shape_to_string(*(*out)[0]->shape), "[batch,seq,384]");
  Tensor one = i64s({1}), end = i64s({kI64Max}), axis1 = i64s({1});
  Graph g2;
  out = infer_node("Slice", {{DType::kF32, sym({"batch", "seq", 768})}, {DType::kI64, {}, &one},
                             {DType::kI64, {}, &end}, {DType::kI64, {}, &axis1}},
                   {}, 1, &g2);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(shape_to_string(*(*out)[0]->shape), "[batch,?,768]");
}

TEST(TensorIndexOps, SliceErrors) {
  expect_user_error(run_node("Slice", {in(iota_f32({4})), cst(i64s({0})), cst(i64s({4})), none(),
                                       cst(i64s({0}))}).build,
                    {"Slice node 'n'", "step"});
  expect_user_error(run_node("Slice", {in(iota_f32({4})), in(i64s({0, 1})), in(i64s({4}))}).run,
                    {"Slice node 'n'", "same length"});
  expect_user_error(run_node("Slice", {in(iota_f32({4})), cst(i64s({0})), cst(i64s({4})), cst(i64s({1}))}).build,
                    {"Slice node 'n'", "axis 1"});
}

TEST(TensorIndexOps, GatherAxis0) {
  auto r = run_node("Gather", {in(tv<float>({3, 2}, {1, 2, 3, 4, 5, 6})), in(tv<int64_t>({2, 2}, {0, 1, 1, 2}))});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[2,2,2]");
  expect_tensor<float>(r.outputs[0], {2, 2, 2}, {1, 2, 3, 4, 3, 4, 5, 6});
}

TEST(TensorIndexOps, GatherNegativeAxisAndIndices) {
  // axis -1 on [[1,2,3],[4,5,6]] with i32 indices [-1, 0]
  auto r = run_node("Gather", {in(tv<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6})), in(tv<int32_t>({2}, {-1, 0}))},
                    {{"axis", int64_t{-1}}});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  expect_tensor<int64_t>(r.outputs[0], {2, 2}, {3, 1, 6, 4});
  // A scalar index drops the axis.
  auto s = run_node("Gather", {in(tv<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6})), in(Tensor::scalar<int64_t>(1))});
  EXPECT_EQ(s.shape(), "[3]");
  expect_tensor<int64_t>(s.outputs[0], {3}, {4, 5, 6});
}

TEST(TensorIndexOps, GatherIndexOutOfRange) {
  auto late = run_node("Gather", {in(iota_f32({3, 2})), in(i64s({0, 3}))});
  ASSERT_TRUE(late.build.is_ok());
  expect_user_error(late.run, {"Gather node 'n'", "index 3"});
  auto early = run_node("Gather", {in(iota_f32({3, 2})), cst(i64s({-4}))});
  expect_user_error(early.build, {"Gather node 'n'", "index -4"});
  expect_user_error(run_node("Gather", {in(iota_f32({3, 2})), in(tv<float>({1}, {0}))}).build,
                    {"Gather node 'n'", "integer"});
}

TEST(TensorIndexOps, GatherSymbolicShapes) {
  Graph g;
  auto out = infer_node("Gather", {{DType::kF32, sym({30522, 768})}, {DType::kI64, sym({"batch", "seq"})}}, {},
                        1, &g);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(shape_to_string(*(*out)[0]->shape), "[batch,seq,768]");
}

TEST(TensorIndexOps, GatherElements) {
  // ONNX examples.
  auto a1 = run_node("GatherElements", {in(tv<float>({2, 2}, {1, 2, 3, 4})), in(tv<int64_t>({2, 2}, {0, 0, 1, 0}))},
                     {{"axis", int64_t{1}}});
  ASSERT_TRUE(a1.run.is_ok()) << a1.run.message();
  expect_tensor<float>(a1.outputs[0], {2, 2}, {1, 1, 4, 3});
  Tensor data = tv<int32_t>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto a0 = run_node("GatherElements", {in(data), in(tv<int64_t>({2, 3}, {1, 2, 0, 2, 0, 0}))});
  EXPECT_EQ(a0.shape(), "[2,3]");
  expect_tensor<int32_t>(a0.outputs[0], {2, 3}, {4, 8, 3, 7, 2, 3});
  auto neg = run_node("GatherElements", {in(data), in(tv<int64_t>({2, 3}, {-1, -2, 0, -2, 0, 0}))});
  expect_tensor<int32_t>(neg.outputs[0], {2, 3}, {7, 5, 3, 4, 2, 3});
  expect_user_error(run_node("GatherElements", {in(data), in(tv<int64_t>({1, 1}, {3}))}).run,
                    {"GatherElements node 'n'", "index 3"});
  expect_user_error(run_node("GatherElements", {in(data), in(tv<int64_t>({1}, {0}))}).build,
                    {"GatherElements node 'n'", "rank"});
}

}  // namespace
}  // namespace opfuse::testing
