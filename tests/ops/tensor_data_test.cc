// Constant, ConstantOfShape, Range, and the family's records.
#include "ops/registry.h"
#include "tensor_test_util.h"

namespace opfuse::testing {
namespace {

TEST(TensorDataOps, ConstantForms) {
  auto t = run_node("Constant", {}, {{"value", tv<int32_t>({2}, {5, -6})}});
  ASSERT_TRUE(t.run.is_ok()) << t.run.message();
  EXPECT_EQ(t.values[0]->dtype, DType::kI32);
  EXPECT_EQ(t.shape(), "[2]");
  expect_tensor<int32_t>(t.outputs[0], {2}, {5, -6});
  expect_tensor<float>(run_node("Constant", {}, {{"value_float", 2.5f}}).outputs[0], {}, {2.5f});
  expect_tensor<float>(run_node("Constant", {}, {{"value_floats", std::vector<float>{1, 2}}}).outputs[0], {2}, {1, 2});
  expect_tensor<int64_t>(run_node("Constant", {}, {{"value_int", int64_t{-3}}}).outputs[0], {}, {-3});
  expect_tensor<int64_t>(run_node("Constant", {}, {{"value_ints", std::vector<int64_t>{4, 5, 6}}}).outputs[0], {3},
                         {4, 5, 6});
  expect_user_error(run_node("Constant", {}).build, {"Constant node 'n'", "exactly one"});
  expect_user_error(run_node("Constant", {}, {{"value_int", int64_t{1}}, {"value_float", 1.0f}}).build,
                    {"Constant node 'n'", "exactly one"});
}

TEST(TensorDataOps, ConstantOfShape) {
  auto d = run_node("ConstantOfShape", {cst(i64s({2, 3}))});
  ASSERT_TRUE(d.run.is_ok()) << d.run.message();
  EXPECT_EQ(d.shape(), "[2,3]");
  expect_tensor<float>(d.outputs[0], {2, 3}, {0, 0, 0, 0, 0, 0});
  auto v = run_node("ConstantOfShape", {in(i64s({3}))}, {{"value", tv<int64_t>({1}, {7})}});
  ASSERT_TRUE(v.run.is_ok()) << v.run.message();
  EXPECT_EQ(v.values[0]->dtype, DType::kI64);
  EXPECT_EQ(v.shape(), "[?]");
  expect_tensor<int64_t>(v.outputs[0], {3}, {7, 7, 7});
  auto z = run_node("ConstantOfShape", {in(i64s({0}))}, {{"value", tv<bool>({1}, {true})}});
  expect_tensor<bool>(z.outputs[0], {0}, {});
  expect_user_error(run_node("ConstantOfShape", {cst(i64s({2, -1}))}).build, {"ConstantOfShape node 'n'", "negative"});
}

TEST(TensorDataOps, Range) {
  // ONNX examples: int32 (10, 4, -3) -> [10, 7]; float (1, 5, 2) -> [1, 3]
  auto i = run_node("Range", {in(Tensor::scalar<int32_t>(10)), in(Tensor::scalar<int32_t>(4)),
                              in(Tensor::scalar<int32_t>(-3))});
  ASSERT_TRUE(i.run.is_ok()) << i.run.message();
  EXPECT_EQ(i.shape(), "[?]");
  expect_tensor<int32_t>(i.outputs[0], {2}, {10, 7});
  auto f = run_node("Range", {cst(Tensor::scalar<float>(1)), cst(Tensor::scalar<float>(5)), cst(Tensor::scalar<float>(2))});
  EXPECT_EQ(f.shape(), "[2]");
  expect_tensor<float>(f.outputs[0], {2}, {1, 3});
  // numpy.arange(0, 0.3, 0.1) has 3 elements.
  auto d = run_node("Range", {in(Tensor::scalar<double>(0)), in(Tensor::scalar<double>(0.3)),
                              in(Tensor::scalar<double>(0.1))});
  expect_tensor<double>(d.outputs[0], {3}, {0.0, 0.1, 0.2});
  auto l = run_node("Range", {cst(Tensor::scalar<int64_t>(0)), cst(Tensor::scalar<int64_t>(10)),
                              cst(Tensor::scalar<int64_t>(3))});
  EXPECT_EQ(l.shape(), "[4]");
  expect_tensor<int64_t>(l.outputs[0], {4}, {0, 3, 6, 9});
  auto empty = run_node("Range", {in(Tensor::scalar<int64_t>(5)), in(Tensor::scalar<int64_t>(1)),
                                  in(Tensor::scalar<int64_t>(1))});
  expect_tensor<int64_t>(empty.outputs[0], {0}, {});
  expect_user_error(run_node("Range", {in(Tensor::scalar<int64_t>(0)), in(Tensor::scalar<int64_t>(1)),
                                       in(Tensor::scalar<int64_t>(0))}).run,
                    {"Range node 'n'", "delta"});
  expect_user_error(run_node("Range", {in(Tensor::scalar<int64_t>(0)), in(Tensor::scalar<float>(1)),
                                       in(Tensor::scalar<int64_t>(1))}).build,
                    {"Range node 'n'", "f32"});
}

TEST(TensorDataOps, RecordsCarryKindsAndTraits) {
  const OpRegistry& r = OpRegistry::global();
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Transpose", "Slice",
                         "Concat", "Gather", "GatherElements", "Expand", "Pad", "Tile", "Split"}) {
    const OpDef* def = r.find("", op);
    ASSERT_NE(def, nullptr) << op;
    EXPECT_EQ(def->kind, FusionKind::kInjective) << op;
  }
  for (const char* op : {"Shape", "Size", "Constant", "ConstantOfShape", "Range"}) {
    const OpDef* def = r.find("", op);
    ASSERT_NE(def, nullptr) << op;
    EXPECT_EQ(def->kind, FusionKind::kOpaque) << op;
  }
  EXPECT_TRUE(r.find("", "Shape")->traits.reads_shape_only);
  EXPECT_TRUE(r.find("", "Size")->traits.reads_shape_only);
  EXPECT_FALSE(r.find("", "Reshape")->traits.reads_shape_only);
  const AttrSpec* axis = r.find("", "Flatten")->find_attr("axis");
  ASSERT_NE(axis, nullptr);
  EXPECT_EQ(std::get<int64_t>(*axis->default_value), 1);
  EXPECT_EQ(std::get<std::string>(*r.find("", "Pad")->find_attr("mode")->default_value), "constant");
}

}  // namespace
}  // namespace opfuse::testing
