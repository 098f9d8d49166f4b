// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss. Expected values come from the numpy
// reference functions in onnx/backend/test/case/node/{negativeloglikelihoodloss,
// softmaxcrossentropy}.py run on the same inputs (pasted as literals).
#include <cmath>

#include "tensor_test_util.h"

namespace opfuse::testing {
namespace {

// N=2, C=3, D=2: x[n, c, d].
Tensor scores() {
  return tv<float>({2, 3, 2}, {0.5f, -1.0f, 2.0f, 0.25f, -0.75f, 1.5f, 1.0f, 0.0f, -2.0f, 3.0f, 0.5f, 0.5f});
}
Tensor targets() { return tv<int64_t>({2, 2}, {0, 2, 1, 1}); }
Tensor class_weights() { return tv<float>({3}, {0.5f, 2.0f, 1.0f}); }

Attributes reduction(const char* r) { return {{"reduction", AttrValue(std::string(r))}}; }

TEST(LossOps, NllNoneKeepsPositions) {
  auto r = run_node("NegativeLogLikelihoodLoss", {in(scores()), in(targets())}, reduction("none"));
  ASSERT_TRUE(r.build.is_ok()) << r.build.message();
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(), "[2,2]");
  expect_tensor<float>(r.outputs[0], {2, 2}, {-0.5f, -1.5f, 2.0f, -3.0f});
}

TEST(LossOps, NllWeightedMeanDividesByAppliedWeights) {
  auto mean = run_node("NegativeLogLikelihoodLoss", {in(scores()), in(targets()), in(class_weights())});
  ASSERT_TRUE(mean.run.is_ok()) << mean.run.message();
  EXPECT_EQ(mean.shape(), "[]");
  expect_tensor<float>(mean.outputs[0], {}, {-0.6818182f});
  auto sum = run_node("NegativeLogLikelihoodLoss", {in(scores()), in(targets()), in(class_weights())},
                      reduction("sum"));
  ASSERT_TRUE(sum.run.is_ok()) << sum.run.message();
  expect_tensor<float>(sum.outputs[0], {}, {-3.75f});
}

TEST(LossOps, NllIgnoreIndexDropsPositionsFromSumAndCount) {
  Attributes attrs = reduction("mean");
  attrs["ignore_index"] = AttrValue(int64_t{-1});
  Tensor t = tv<int64_t>({2, 2}, {0, -1, 1, -1});
  auto weighted = run_node("NegativeLogLikelihoodLoss", {in(scores()), in(t), in(class_weights())}, attrs);
  ASSERT_TRUE(weighted.run.is_ok()) << weighted.run.message();
  expect_tensor<float>(weighted.outputs[0], {}, {1.5f});
  auto plain = run_node("NegativeLogLikelihoodLoss", {in(scores()), in(t)}, attrs);
  ASSERT_TRUE(plain.run.is_ok()) << plain.run.message();
  expect_tensor<float>(plain.outputs[0], {}, {0.75f});
  // Everything ignored: 0 / 0, NaN as in the ONNX reference (not an error).
  auto all = run_node("NegativeLogLikelihoodLoss",
                      {in(scores()), in(tv<int64_t>({2, 2}, {-1, -1, -1, -1}))}, attrs);
  ASSERT_TRUE(all.run.is_ok()) << all.run.message();
  EXPECT_TRUE(std::isnan(all.outputs[0].data<float>()[0]));
}

TEST(LossOps, NllOnNCInputAndF64) {
  // [N, C] with target [N]: the loss picks -x[n, t[n]].
  Tensor x = tv<double>({2, 3}, {0.1, 0.2, 0.7, 0.3, 0.3, 0.4});
  auto r = run_node("NegativeLogLikelihoodLoss", {in(x), in(tv<int32_t>({2}, {2, 0}))}, reduction("sum"));
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  expect_tensor<double>(r.outputs[0], {}, {-1.0});
}

TEST(LossOps, SoftmaxCrossEntropyWithLogProb) {
  auto r = run_node("SoftmaxCrossEntropyLoss", {in(scores()), in(targets())}, reduction("none"), 2);
  ASSERT_TRUE(r.build.is_ok()) << r.build.message();
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(0), "[2,2]");
  EXPECT_EQ(r.shape(1), "[2,3,2]");
  expect_tensor<float>(r.outputs[0], {2, 2}, {1.752359f, 0.31378078f, 3.504597f, 0.12387298f});
  expect_tensor<float>(r.outputs[1], {2, 3, 2},
                       {-1.7523590f, -2.8137808f, -0.2523590f, -1.5637809f, -3.0023589f, -0.3137808f,
                        -0.5045968f, -3.1238730f, -3.5045969f, -0.1238730f, -1.0045969f, -2.6238728f});
  auto mean = run_node("SoftmaxCrossEntropyLoss", {in(scores()), in(targets()), in(class_weights())});
  ASSERT_TRUE(mean.run.is_ok()) << mean.run.message();
  expect_tensor<float>(mean.outputs[0], {}, {1.5357999f});
}

TEST(LossOps, SoftmaxCrossEntropyIsStableForHugeScores) {
  // Naive exp overflows at 1000; the max-shifted log-softmax gives log(1 + e^-1) for the target.
  Tensor x = tv<float>({1, 2}, {1000.0f, 999.0f});
  auto r = run_node("SoftmaxCrossEntropyLoss", {in(x), in(tv<int64_t>({1}, {0}))});
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  expect_tensor<float>(r.outputs[0], {}, {static_cast<float>(std::log1p(std::exp(-1.0)))});
}

TEST(LossOps, NaNScoresPropagate) {
  Tensor x = tv<float>({1, 2}, {std::nanf(""), 1.0f});
  for (const char* op : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}) {
    auto r = run_node(op, {in(x), in(tv<int64_t>({1}, {0}))});
    ASSERT_TRUE(r.run.is_ok()) << r.run.message();
    EXPECT_TRUE(std::isnan(r.outputs[0].data<float>()[0])) << op;
  }
}

TEST(LossOps, BadInputsAreUserErrors) {
  // Target class out of range: a kernel error naming the value and the class count.
  auto range = run_node("NegativeLogLikelihoodLoss", {in(scores()), in(tv<int64_t>({2, 2}, {0, 3, 1, 1}))});
  ASSERT_TRUE(range.build.is_ok());
  expect_user_error(range.run, {"node 'n'", "target value 3", "[0, 3)"});
  // Target shape that is not the scores' without the class dim.
  auto shape = run_node("SoftmaxCrossEntropyLoss", {in(scores()), in(tv<int64_t>({2, 3}, {0, 0, 0, 0, 0, 0}))});
  expect_user_error(shape.build, {"node 'n'", "target [2,3]", "scores [2,3,2]"});
  auto rank = run_node("NegativeLogLikelihoodLoss", {in(tv<float>({3}, {1, 2, 3})), in(tv<int64_t>({}, {0}))});
  expect_user_error(rank.build, {"input [3]", "rank >= 2"});
  auto weight = run_node("NegativeLogLikelihoodLoss", {in(scores()), in(targets()), in(tv<float>({2}, {1, 1}))});
  expect_user_error(weight.build, {"weight [2]", "3 classes"});
  auto mode = run_node("NegativeLogLikelihoodLoss", {in(scores()), in(targets())}, reduction("max"));
  expect_user_error(mode.build, {"reduction 'max'"});
  auto dtype = run_node("NegativeLogLikelihoodLoss", {in(tv<int64_t>({1, 2}, {1, 2})), in(tv<int64_t>({1}, {0}))});
  expect_user_error(dtype.build, {"input has dtype i64", "float"});
  auto target_dtype = run_node("SoftmaxCrossEntropyLoss", {in(scores()), in(tv<float>({2, 2}, {0, 0, 0, 0}))});
  expect_user_error(target_dtype.build, {"target has dtype f32"});
}

}  // namespace
}  // namespace opfuse::testing
