// Transpose, Expand, Tile, Pad, Concat, Split.
#include "tensor_test_util.h"

namespace opfuse::testing {
namespace {

TEST(TensorLayoutOps, Transpose) {
  // numpy: arange(24).reshape(2,3,4).transpose(1,0,2) and .transpose()
  auto r = run_node("Transpose", {in(iota_f32({2, 3, 4}))}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[3,2,4]");
  expect_tensor<float>(r.outputs[0], {3, 2, 4}, {0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 16, 17, 18, 19,
                                                 8, 9, 10, 11, 20, 21, 22, 23});
  auto d = run_node("Transpose", {in(iota_f32({2, 3, 4}))});
  EXPECT_EQ(d.shape(), "[4,3,2]");
  expect_tensor<float>(d.outputs[0], {4, 3, 2}, {0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21,
                                                 2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23});
  auto u8 = run_node("Transpose", {in(tv<uint8_t>({2, 2}, {1, 2, 3, 4}))});
  expect_tensor<uint8_t>(u8.outputs[0], {2, 2}, {1, 3, 2, 4});
  expect_user_error(run_node("Transpose", {in(iota_f32({2, 3}))}, {{"perm", std::vector<int64_t>{0, 0}}}).build,
                    {"Transpose node 'n'", "perm"});
  expect_user_error(run_node("Transpose", {in(iota_f32({2, 3}))}, {{"perm", std::vector<int64_t>{0}}}).build,
                    {"Transpose node 'n'", "perm"});
}

TEST(TensorLayoutOps, TransposeSymbolic) {
  Graph g;
  auto out = infer_node("Transpose", {{DType::kF32, sym({"batch", "seq", 768})}},
                        {{"perm", std::vector<int64_t>{0, 2, 1}}}, 1, &g);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(shape_to_string(*(*out)[0]->shape), "[batch,768,seq]");
  Graph g2;
  out = infer_node("Transpose", {{DType::kF32, std::nullopt}}, {{"perm", std::vector<int64_t>{1, 0}}}, 1, &g2);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(shape_to_string(*(*out)[0]->shape), "[?,?]");
}

TEST(TensorLayoutOps, Expand) {
  // numpy: broadcast_to(arange(3).reshape(3,1), (2,3,6))
  auto r = run_node("Expand", {in(tv<int64_t>({3, 1}, {0, 1, 2})), cst(i64s({2, 1, 6}))});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[2,3,6]");
  std::vector<int64_t> expected;
  for (int rep = 0; rep < 2; ++rep)
    for (int64_t v : {0, 1, 2})
      for (int j = 0; j < 6; ++j) expected.push_back(v);
  expect_tensor<int64_t>(r.outputs[0], {2, 3, 6}, expected);
  // The shape may be smaller than the input (bidirectional broadcast).
  auto small = run_node("Expand", {in(tv<bool>({2, 1}, {true, false})), in(i64s({2}))});
  ASSERT_TRUE(small.run.is_ok());
  EXPECT_EQ(small.shape(), "[2,?]");
  expect_tensor<bool>(small.outputs[0], {2, 2}, {true, true, false, false});
  expect_user_error(run_node("Expand", {in(iota_f32({3})), cst(i64s({4}))}).build, {"Expand node 'n'", "[3]", "[4]"});
  expect_user_error(run_node("Expand", {in(iota_f32({3})), in(i64s({4}))}).run, {"Expand node 'n'", "[3]", "[4]"});
  Graph g;
  Tensor shape = i64s({1, 4});
  auto out = infer_node("Expand", {{DType::kF32, sym({"batch", 1})}, {DType::kI64, {}, &shape}}, {}, 1, &g);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(shape_to_string(*(*out)[0]->shape), "[batch,4]");
}

TEST(TensorLayoutOps, Tile) {
  // numpy: tile([[1,2],[3,4]], (2,3))
  auto r = run_node("Tile", {in(tv<uint8_t>({2, 2}, {1, 2, 3, 4})), cst(i64s({2, 3}))});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[4,6]");
  expect_tensor<uint8_t>(r.outputs[0], {4, 6}, {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4,
                                                1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4});
  auto zero = run_node("Tile", {in(iota_f32({2})), in(i64s({0}))});
  ASSERT_TRUE(zero.run.is_ok());
  EXPECT_EQ(zero.outputs[0].dims(), (std::vector<int64_t>{0}));
  expect_user_error(run_node("Tile", {in(iota_f32({2})), cst(i64s({1, 2}))}).build, {"Tile node 'n'", "repeats"});
  Graph g;
  Tensor reps = i64s({1, 2});
  auto out = infer_node("Tile", {{DType::kF32, sym({"batch", 3})}, {DType::kI64, {}, &reps}}, {}, 1, &g);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(shape_to_string(*(*out)[0]->shape), "[batch,6]");
}

TEST(TensorLayoutOps, PadConstant) {
  // pads = [begin0, begin1, end0, end1]
  auto r = run_node("Pad", {in(tv<int32_t>({2, 2}, {1, 2, 3, 4})), cst(i64s({1, 0, 0, 1})),
                            in(Tensor::scalar<int32_t>(9))});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[3,3]");
  expect_tensor<int32_t>(r.outputs[0], {3, 3}, {9, 9, 9, 1, 2, 9, 3, 4, 9});
  // Negative pads crop; default constant is 0.
  auto crop = run_node("Pad", {in(tv<float>({5}, {1, 2, 3, 4, 5})), cst(i64s({-1, 2}))});
  ASSERT_TRUE(crop.run.is_ok()) << crop.run.message();
  EXPECT_EQ(crop.shape(), "[6]");
  expect_tensor<float>(crop.outputs[0], {6}, {2, 3, 4, 5, 0, 0});
}

TEST(TensorLayoutOps, PadReflectAndEdge) {
  // ONNX Pad example: reflect/edge with pads [0,2,0,0]
  Tensor x = tv<float>({3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f});
  auto reflect = run_node("Pad", {in(x), cst(i64s({0, 2, 0, 0}))}, {{"mode", std::string("reflect")}});
  ASSERT_TRUE(reflect.run.is_ok()) << reflect.run.message();
  expect_tensor<float>(reflect.outputs[0], {3, 4},
                       {1.0f, 1.2f, 1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f, 4.5f, 5.7f});
  auto edge = run_node("Pad", {in(x), cst(i64s({0, 2, 0, 0}))}, {{"mode", std::string("edge")}});
  expect_tensor<float>(edge.outputs[0], {3, 4},
                       {1.0f, 1.0f, 1.0f, 1.2f, 2.3f, 2.3f, 2.3f, 3.4f, 4.5f, 4.5f, 4.5f, 5.7f});
  // numpy: pad(arange(6).reshape(2,3), ((1,1),(2,0)), 'reflect') and ((1,0),(2,1)), 'edge'
  Tensor y = tv<int64_t>({2, 3}, {0, 1, 2, 3, 4, 5});
  auto r2 = run_node("Pad", {in(y), cst(i64s({1, 2, 1, 0}))}, {{"mode", std::string("reflect")}});
  expect_tensor<int64_t>(r2.outputs[0], {4, 5}, {5, 4, 3, 4, 5, 2, 1, 0, 1, 2, 5, 4, 3, 4, 5, 2, 1, 0, 1, 2});
  auto e2 = run_node("Pad", {in(y), cst(i64s({1, 2, 0, 1}))}, {{"mode", std::string("edge")}});
  expect_tensor<int64_t>(e2.outputs[0], {3, 6}, {0, 0, 0, 1, 2, 2, 0, 0, 0, 1, 2, 2, 3, 3, 3, 4, 5, 5});
  // Pads wider than the axis fold repeatedly, like numpy: pad([1,2,3], (5,4), 'reflect')
  auto wide = run_node("Pad", {in(tv<int64_t>({3}, {1, 2, 3})), cst(i64s({5, 4}))}, {{"mode", std::string("reflect")}});
  expect_tensor<int64_t>(wide.outputs[0], {12}, {2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3});
}

TEST(TensorLayoutOps, PadErrorsAndSymbolic) {
  expect_user_error(run_node("Pad", {in(iota_f32({2})), cst(i64s({1}))}).build, {"Pad node 'n'", "pads"});
  expect_user_error(run_node("Pad", {in(iota_f32({2})), in(i64s({-2, -1}))}).run, {"Pad node 'n'", "crop"});
  expect_user_error(run_node("Pad", {in(iota_f32({2})), cst(i64s({1, 1}))}, {{"mode", std::string("wrap")}}).build,
                    {"Pad node 'n'", "wrap"});
  Graph g;
  Tensor pads = i64s({0, 1, 0, 1});
  auto out = infer_node("Pad", {{DType::kF32, sym({"batch", 3})}, {DType::kI64, {}, &pads}}, {}, 1, &g);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(shape_to_string(*(*out)[0]->shape), "[batch,5]");
}

TEST(TensorLayoutOps, Concat) {
  auto r = run_node("Concat", {in(tv<int64_t>({2, 2}, {1, 2, 3, 4})), in(tv<int64_t>({2, 1}, {5, 6})),
                               in(Tensor::zeros(DType::kI64, {2, 0}).value())},
                    {{"axis", int64_t{-1}}});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[2,3]");
  expect_tensor<int64_t>(r.outputs[0], {2, 3}, {1, 2, 5, 3, 4, 6});
  auto a0 = run_node("Concat", {in(tv<bool>({1, 2}, {true, false})), in(tv<bool>({1, 2}, {false, true}))},
                     {{"axis", int64_t{0}}});
  expect_tensor<bool>(a0.outputs[0], {2, 2}, {true, false, false, true});
  expect_user_error(run_node("Concat", {in(iota_f32({2, 2})), in(iota_f32({3, 1}))}, {{"axis", int64_t{1}}}).build,
                    {"Concat node 'n'", "[3,1]"});
  expect_user_error(run_node("Concat", {in(iota_f32({2}))}).build, {"Concat node 'n'", "axis"});
}

TEST(TensorLayoutOps, ConcatSymbolic) {
  Graph g;
  auto out = infer_node("Concat", {{DType::kF32, sym({"batch", "seq", 64})}, {DType::kF32, sym({"batch", "seq", 64})}},
                        {{"axis", int64_t{-1}}}, 1, &g);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(shape_to_string(*(*out)[0]->shape), "[batch,seq,128]");
  Graph g2;
  out = infer_node("Concat", {{DType::kF32, sym({-1, 3})}, {DType::kF32, sym({"batch", "seq"})}},
                   {{"axis", int64_t{1}}}, 1, &g2);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(shape_to_string(*(*out)[0]->shape), "[batch,?]");
}

TEST(TensorLayoutOps, SplitEqualAndExplicit) {
  auto eq = run_node("Split", {in(tv<float>({6}, {1, 2, 3, 4, 5, 6}))}, {}, 3);
  ASSERT_TRUE(eq.run.is_ok()) << eq.run.message();
  EXPECT_EQ(eq.shape(2), "[2]");
  expect_tensor<float>(eq.outputs[0], {2}, {1, 2});
  expect_tensor<float>(eq.outputs[1], {2}, {3, 4});
  expect_tensor<float>(eq.outputs[2], {2}, {5, 6});
  // axis 1 with split [2, 4] on [[1..6],[7..12]] and a zero-size part
  auto ex = run_node("Split", {in(tv<int64_t>({2, 6}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})), cst(i64s({2, 0, 4}))},
                     {{"axis", int64_t{-1}}}, 3);
  ASSERT_TRUE(ex.run.is_ok()) << ex.run.message();
  EXPECT_EQ(ex.shape(0), "[2,2]");
  EXPECT_EQ(ex.shape(1), "[2,0]");
  EXPECT_EQ(ex.shape(2), "[2,4]");
  expect_tensor<int64_t>(ex.outputs[0], {2, 2}, {1, 2, 7, 8});
  expect_tensor<int64_t>(ex.outputs[1], {2, 0}, {});
  expect_tensor<int64_t>(ex.outputs[2], {2, 4}, {3, 4, 5, 6, 9, 10, 11, 12});
}

TEST(TensorLayoutOps, SplitErrorsAndSymbolic) {
  expect_user_error(run_node("Split", {in(iota_f32({6})), cst(i64s({2, 3}))}, {}, 2).build,
                    {"Split node 'n'", "[2,3]", "6"});
  expect_user_error(run_node("Split", {in(iota_f32({6})), in(i64s({2, 3}))}, {}, 2).run,
                    {"Split node 'n'", "[2,3]", "6"});
  expect_user_error(run_node("Split", {in(iota_f32({7}))}, {}, 2).build, {"Split node 'n'", "7"});
  Graph g;
  auto out = infer_node("Split", {{DType::kF32, sym({"batch", 768})}}, {{"axis", int64_t{-1}}}, 3, &g);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(shape_to_string(*(*out)[1]->shape), "[batch,256]");
}

}  // namespace
}  // namespace opfuse::testing
