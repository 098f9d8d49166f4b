// DepthToSpace, SpaceToDepth, ReverseSequence. Expected values: the numpy reshape/transpose
// formulas of the ONNX spec and a hand-reversed sequence.
#include "tensor_test_util.h"

namespace opfuse::testing {
namespace {

Attributes block(int64_t b, const char* mode = nullptr) {
  Attributes a = {{"blocksize", AttrValue(b)}};
  if (mode != nullptr) a["mode"] = AttrValue(std::string(mode));
  return a;
}

TEST(DepthToSpaceOp, DcrAndCrdModes) {
  // x = arange(16).reshape(1, 8, 1, 2)
  auto dcr = run_node("DepthToSpace", {in(iota_f32({1, 8, 1, 2}))}, block(2));
  ASSERT_TRUE(dcr.run.is_ok()) << dcr.run.message();
  EXPECT_EQ(dcr.shape(), "[1,2,2,4]");
  expect_tensor<float>(dcr.outputs[0], {1, 2, 2, 4}, {0, 4, 1, 5, 8, 12, 9, 13, 2, 6, 3, 7, 10, 14, 11, 15});
  auto crd = run_node("DepthToSpace", {in(iota_f32({1, 8, 1, 2}))}, block(2, "CRD"));
  ASSERT_TRUE(crd.run.is_ok()) << crd.run.message();
  expect_tensor<float>(crd.outputs[0], {1, 2, 2, 4}, {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15});
}

TEST(SpaceToDepthOp, InvertsDepthToSpaceDcr) {
  auto s2d = run_node("SpaceToDepth", {in(iota_f32({1, 1, 4, 4}))}, block(2));
  ASSERT_TRUE(s2d.run.is_ok()) << s2d.run.message();
  EXPECT_EQ(s2d.shape(), "[1,4,2,2]");
  expect_tensor<float>(s2d.outputs[0], {1, 4, 2, 2}, {0, 2, 8, 10, 1, 3, 9, 11, 4, 6, 12, 14, 5, 7, 13, 15});
  auto back = run_node("DepthToSpace", {in(s2d.outputs[0])}, block(2));
  ASSERT_TRUE(back.run.is_ok()) << back.run.message();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(back.outputs[0].data<float>()[i], static_cast<float>(i));
}

TEST(BlockMoveOps, BadInputsAreUserErrors) {
  expect_user_error(run_node("DepthToSpace", {in(iota_f32({1, 6, 1, 1}))}, block(2)).build,
                    {"node 'n'", "channels 6", "blocksize^2"});
  expect_user_error(run_node("DepthToSpace", {in(iota_f32({1, 4, 1, 1}))}, block(2, "XYZ")).build, {"mode 'XYZ'"});
  expect_user_error(run_node("SpaceToDepth", {in(iota_f32({1, 1, 3, 4}))}, block(2)).build,
                    {"[1,1,3,4]", "not divisible by blocksize 2"});
  expect_user_error(run_node("SpaceToDepth", {in(iota_f32({4, 4}))}, block(2)).build, {"[4,4]", "4-D"});
  expect_user_error(run_node("SpaceToDepth", {in(iota_f32({1, 1, 2, 2}))}, block(0)).build, {"blocksize 0"});
}

TEST(ReverseSequenceOp, TimeMajorAndBatchMajor) {
  // time-major [T=3, B=2, 2]: batch 0 reverses 3 steps, batch 1 only 1 (unchanged).
  auto tm = run_node("ReverseSequence", {in(iota_f32({3, 2, 2})), in(i64s({3, 1}))});
  ASSERT_TRUE(tm.run.is_ok()) << tm.run.message();
  expect_tensor<float>(tm.outputs[0], {3, 2, 2}, {8, 9, 2, 3, 4, 5, 6, 7, 0, 1, 10, 11});
  // batch-major [B=2, T=3]: batch 0 reverses 2 steps, batch 1 all 3.
  auto bm = run_node("ReverseSequence", {in(tv<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6})), in(i64s({2, 3}))},
                     {{"batch_axis", AttrValue(int64_t{0})}, {"time_axis", AttrValue(int64_t{1})}});
  ASSERT_TRUE(bm.run.is_ok()) << bm.run.message();
  expect_tensor<int32_t>(bm.outputs[0], {2, 3}, {2, 1, 3, 6, 5, 4});
}

TEST(ReverseSequenceOp, BadInputsAreUserErrors) {
  expect_user_error(run_node("ReverseSequence", {in(iota_f32({3, 2})), in(i64s({1, 2, 3}))}).build,
                    {"node 'n'", "sequence_lens [3]", "input [3,2]"});
  expect_user_error(run_node("ReverseSequence", {in(iota_f32({3, 2})), in(i64s({4, 1}))}).run,
                    {"sequence_lens[0] = 4", "[0, 3]"});
  expect_user_error(run_node("ReverseSequence", {in(iota_f32({3, 2})), in(i64s({1, 1}))},
                             {{"batch_axis", AttrValue(int64_t{0})}}).build,
                    {"time_axis 0 and batch_axis 0"});
}

}  // namespace
}  // namespace opfuse::testing
