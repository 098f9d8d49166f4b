// Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout, Shape, Size.
#include "tensor_test_util.h"

namespace opfuse::testing {
namespace {

TEST(TensorShapeOps, ReshapeInfersMinusOneAndSharesStorage) {
  Tensor x = iota_f32({2, 3, 4});
  auto r = run_node("Reshape", {in(x), cst(i64s({4, -1}))});
  ASSERT_TRUE(r.build.is_ok()) << r.build.message();
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[4,6]");
  ASSERT_EQ(r.outputs[0].dims(), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(r.outputs[0].raw_data(), x.raw_data());  // a view, not a copy
  EXPECT_EQ(r.outputs[0].data<float>()[23], 23.0f);
}

TEST(TensorShapeOps, ReshapeZeroCopiesInputDim) {
  auto r = run_node("Reshape", {in(iota_f32({2, 3, 4})), cst(i64s({0, -1}))});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[2,12]");
  EXPECT_EQ(r.outputs[0].dims(), (std::vector<int64_t>{2, 12}));
}

TEST(TensorShapeOps, ReshapeAllowZeroKeepsZero) {
  // allowzero=1: a 0 entry is a real 0-size dim (input has 0 elements).
  auto r = run_node("Reshape", {in(Tensor::zeros(DType::kF32, {3, 0}).value()), cst(i64s({0, 3}))},
                    {{"allowzero", int64_t{1}}});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[0,3]");
  EXPECT_EQ(r.outputs[0].dims(), (std::vector<int64_t>{0, 3}));
  // Without allowzero the 0 copies dim 0 (3) and 3*3 != 0 elements.
  auto bad = run_node("Reshape", {in(Tensor::zeros(DType::kF32, {3, 0}).value()), cst(i64s({0, 3}))});
  expect_user_error(bad.build, {"Reshape node 'n'", "[3,0]", "[0,3]"});
}

TEST(TensorShapeOps, ReshapeRuntimeShapeInput) {
  auto r = run_node("Reshape", {in(tv<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6})), in(i64s({3, 1, 2}))});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[?,?,?]");  // rank from the shape input's length, dims unknown
  expect_tensor<int64_t>(r.outputs[0], {3, 1, 2}, {1, 2, 3, 4, 5, 6});
}

TEST(TensorShapeOps, ReshapeErrors) {
  auto two = run_node("Reshape", {in(iota_f32({2, 3})), cst(i64s({-1, -1}))});
  expect_user_error(two.build, {"Reshape node 'n'", "-1", "[2,3]"});
  auto count = run_node("Reshape", {in(iota_f32({2, 3})), cst(i64s({4, 2}))});
  expect_user_error(count.build, {"Reshape node 'n'", "[2,3]", "[4,2]"});
  // The same mismatch found only at run time (shape not a constant).
  auto late = run_node("Reshape", {in(iota_f32({2, 3})), in(i64s({4, 2}))});
  ASSERT_TRUE(late.build.is_ok());
  expect_user_error(late.run, {"Reshape node 'n'", "[2,3]", "[4,2]"});
  auto indivisible = run_node("Reshape", {in(iota_f32({2, 3})), in(i64s({4, -1}))});
  expect_user_error(indivisible.run, {"Reshape node 'n'", "[2,3]", "[4,-1]"});
  auto zero_past_rank = run_node("Reshape", {in(iota_f32({6})), cst(i64s({3, 0}))});
  expect_user_error(zero_past_rank.build, {"Reshape node 'n'"});
}

TEST(TensorShapeOps, ReshapeSymbolicShapes) {
  Graph g;
  Tensor heads = i64s({0, 0, 12, 64});
  auto out = infer_node("Reshape", {{DType::kF32, sym({"batch", "seq", 768})}, {DType::kI64, {}, &heads}},
                        {}, 1, &g);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(shape_to_string(*(*out)[0]->shape), "[batch,seq,12,64]");

  Graph g2;
  Tensor merge = i64s({0, 0, -1});
  out = infer_node("Reshape", {{DType::kF32, sym({"batch", "seq", 12, 64})}, {DType::kI64, {}, &merge}},
                   {}, 1, &g2);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(shape_to_string(*(*out)[0]->shape), "[batch,seq,768]");

  // -1 absorbs the one symbol left after cancelling: [batch,seq,768] -> [-1,768] is batch*seq.
  Graph g3;
  Tensor flat = i64s({-1, 768});
  out = infer_node("Reshape", {{DType::kF32, sym({"batch", "seq", 768})}, {DType::kI64, {}, &flat}},
                   {}, 1, &g3);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(shape_to_string(*(*out)[0]->shape), "[?,768]");
  Graph g4;
  out = infer_node("Reshape", {{DType::kF32, sym({"batch", 12, 64})}, {DType::kI64, {}, &flat}}, {}, 1, &g4);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(shape_to_string(*(*out)[0]->shape), "[batch,768]");
}

TEST(TensorShapeOps, Flatten) {
  auto r = run_node("Flatten", {in(iota_f32({2, 3, 4}))}, {{"axis", int64_t{2}}});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[6,4]");
  EXPECT_EQ(r.outputs[0].dims(), (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(run_node("Flatten", {in(iota_f32({2, 3, 4}))}, {{"axis", int64_t{0}}}).outputs[0].dims(),
            (std::vector<int64_t>{1, 24}));
  EXPECT_EQ(run_node("Flatten", {in(iota_f32({2, 3, 4}))}, {{"axis", int64_t{-1}}}).outputs[0].dims(),
            (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(run_node("Flatten", {in(iota_f32({2, 3, 4}))}, {{"axis", int64_t{3}}}).outputs[0].dims(),
            (std::vector<int64_t>{24, 1}));
  EXPECT_EQ(run_node("Flatten", {in(iota_f32({2, 3, 4}))}).outputs[0].dims(),  // default axis 1
            (std::vector<int64_t>{2, 12}));
  expect_user_error(run_node("Flatten", {in(iota_f32({2, 3, 4}))}, {{"axis", int64_t{4}}}).build,
                    {"Flatten node 'n'", "axis 4"});
  Graph g;
  auto out = infer_node("Flatten", {{DType::kF32, sym({"batch", 3, 4})}}, {}, 1, &g);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(shape_to_string(*(*out)[0]->shape), "[batch,12]");
}

TEST(TensorShapeOps, Squeeze) {
  auto r = run_node("Squeeze", {in(iota_f32({1, 3, 1, 2})), cst(i64s({-2}))});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[1,3,2]");
  EXPECT_EQ(r.outputs[0].dims(), (std::vector<int64_t>{1, 3, 2}));
  auto all = run_node("Squeeze", {in(iota_f32({1, 3, 1, 2}))});
  ASSERT_TRUE(all.run.is_ok()) << all.run.message();
  EXPECT_EQ(all.shape(), "[3,2]");
  EXPECT_EQ(all.outputs[0].dims(), (std::vector<int64_t>{3, 2}));
  expect_user_error(run_node("Squeeze", {in(iota_f32({1, 3})), cst(i64s({1}))}).build,
                    {"Squeeze node 'n'", "axis 1"});
  expect_user_error(run_node("Squeeze", {in(iota_f32({1, 3})), in(i64s({1}))}).run,
                    {"Squeeze node 'n'", "axis 1"});
  Graph g;
  Tensor axes = i64s({1});
  auto out = infer_node("Squeeze", {{DType::kF32, sym({"batch", 1, 768})}, {DType::kI64, {}, &axes}}, {}, 1, &g);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(shape_to_string(*(*out)[0]->shape), "[batch,768]");
}

TEST(TensorShapeOps, Unsqueeze) {
  auto r = run_node("Unsqueeze", {in(tv<uint8_t>({3}, {7, 8, 9})), cst(i64s({0, -1}))});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[1,3,1]");
  expect_tensor<uint8_t>(r.outputs[0], {1, 3, 1}, {7, 8, 9});
  auto unsorted = run_node("Unsqueeze", {in(iota_f32({3, 4})), cst(i64s({3, 0}))});
  ASSERT_TRUE(unsorted.run.is_ok());
  EXPECT_EQ(unsorted.outputs[0].dims(), (std::vector<int64_t>{1, 3, 4, 1}));
  expect_user_error(run_node("Unsqueeze", {in(iota_f32({3})), cst(i64s({0, 0}))}).build,
                    {"Unsqueeze node 'n'", "repeat"});
  expect_user_error(run_node("Unsqueeze", {in(iota_f32({3})), in(i64s({5}))}).run,
                    {"Unsqueeze node 'n'", "axis 5"});
  Graph g;
  Tensor axes = i64s({1});
  auto out = infer_node("Unsqueeze", {{DType::kF32, sym({"batch", "seq"})}, {DType::kI64, {}, &axes}}, {}, 1, &g);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(shape_to_string(*(*out)[0]->shape), "[batch,1,seq]");
}

TEST(TensorShapeOps, IdentityAndDropout) {
  auto id = run_node("Identity", {in(tv<bool>({2}, {true, false}))});
  ASSERT_TRUE(id.run.is_ok());
  expect_tensor<bool>(id.outputs[0], {2}, {true, false});

  auto d = run_node("Dropout", {in(tv<float>({3}, {1.5f, -2, 0})), cst(Tensor::scalar<float>(0.5f))}, {}, 2);
  ASSERT_TRUE(d.run.is_ok()) << d.run.message();
  EXPECT_EQ(d.values[1]->dtype, DType::kBool);
  EXPECT_EQ(d.shape(1), "[3]");
  expect_tensor<float>(d.outputs[0], {3}, {1.5f, -2, 0});
  expect_tensor<bool>(d.outputs[1], {3}, {true, true, true});

  auto train = run_node("Dropout", {in(iota_f32({2})), none(), cst(Tensor::scalar<bool>(true))});
  expect_user_error(train.build, {"Dropout node 'n'", "training_mode"});
  auto late = run_node("Dropout", {in(iota_f32({2})), none(), in(Tensor::scalar<bool>(true))});
  expect_user_error(late.run, {"Dropout node 'n'", "training_mode"});
  EXPECT_TRUE(run_node("Dropout", {in(iota_f32({2})), none(), in(Tensor::scalar<bool>(false))}).run.is_ok());
}

TEST(TensorShapeOps, ShapeWithStartEnd) {
  auto r = run_node("Shape", {in(iota_f32({2, 3, 4, 5}))});
  ASSERT_TRUE(r.run.is_ok());
  EXPECT_EQ(r.values[0]->dtype, DType::kI64);
  EXPECT_EQ(r.shape(), "[4]");
  expect_tensor<int64_t>(r.outputs[0], {4}, {2, 3, 4, 5});
  auto mid = run_node("Shape", {in(iota_f32({2, 3, 4, 5}))}, {{"start", int64_t{1}}, {"end", int64_t{-1}}});
  EXPECT_EQ(mid.shape(), "[2]");
  expect_tensor<int64_t>(mid.outputs[0], {2}, {3, 4});
  auto clipped = run_node("Shape", {in(iota_f32({2, 3}))}, {{"start", int64_t{-10}}, {"end", int64_t{10}}});
  expect_tensor<int64_t>(clipped.outputs[0], {2}, {2, 3});
  auto empty = run_node("Shape", {in(iota_f32({2, 3}))}, {{"start", int64_t{2}}, {"end", int64_t{1}}});
  expect_tensor<int64_t>(empty.outputs[0], {0}, {});
  Graph g;
  auto out = infer_node("Shape", {{DType::kF32, sym({"batch", "seq", 768})}}, {}, 1, &g);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(shape_to_string(*(*out)[0]->shape), "[3]");
}

TEST(TensorShapeOps, Size) {
  auto r = run_node("Size", {in(iota_f32({2, 3, 4}))});
  ASSERT_TRUE(r.run.is_ok());
  EXPECT_EQ(r.shape(), "[]");
  expect_tensor<int64_t>(r.outputs[0], {}, {24});
  expect_tensor<int64_t>(run_node("Size", {in(iota_f32({2, 0}))}).outputs[0], {}, {0});
}

}  // namespace
}  // namespace opfuse::testing
