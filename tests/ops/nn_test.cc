// The nn op family: hand-checked cases, PyTorch-computed literals (torch 1.13, generated with
// the `seq` formula of nn_test_util.h), user errors, symbolic shape inference, records, flops.
#include "ops/registry.h"
#include "nn_test_util.h"

namespace opfuse {
namespace {

using namespace nn_test;
using Ints = std::vector<int64_t>;

Tensor f32(Ints dims, std::vector<float> v) { return Tensor::from_vector<float>(dims, v); }

// ---------------------------------------------------------------- hand-checked

TEST(NnConv, HandCheckedOnesKernelWithAsymmetricPads) {
  // x = 1..9 in 3x3, 2x2 kernel of ones, pads top=1 left=0 bottom=0 right=1: each output is the
  // sum of a 2x2 window of the padded image.
  Tensor x = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor w = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  OpRun r = run_op("Conv", {x, w}, {{"pads", Ints{1, 0, 0, 1}}});
  ASSERT_TRUE(r.status.is_ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].dims(), (Ints{1, 1, 3, 3}));
  expect_near_values(r.outputs[0], {3, 5, 3, 12, 16, 9, 24, 28, 15});
}

TEST(NnConv, AutoPadSameUpperPutsTheExtraPaddingAtTheEnd) {
  // 1-d: x = [1,2,3,4], kernel [1,10], stride 1: total padding 1 goes after the input for
  // SAME_UPPER (y[i] = x[i] + 10 x[i+1]) and before it for SAME_LOWER (y[i] = x[i-1] + 10 x[i]).
  Tensor x = f32({1, 1, 4}, {1, 2, 3, 4});
  Tensor w = f32({1, 1, 2}, {1, 10});
  OpRun upper = run_op("Conv", {x, w}, {{"auto_pad", std::string("SAME_UPPER")}});
  ASSERT_TRUE(upper.status.is_ok()) << upper.status.message();
  expect_near_values(upper.outputs[0], {21, 32, 43, 4});
  OpRun lower = run_op("Conv", {x, w}, {{"auto_pad", std::string("SAME_LOWER")}});
  ASSERT_TRUE(lower.status.is_ok()) << lower.status.message();
  expect_near_values(lower.outputs[0], {10, 21, 32, 43});
}

TEST(NnConv, GroupedConvMatchesTorch) {
  Tensor x = seq({1, 2, 4, 4});
  Tensor w = seq({2, 1, 3, 3}, 5, 13, 6, 0.125);
  Tensor b = f32({2}, {0.5f, -1.0f});
  OpRun r = run_op("Conv", {x, w, b},
                   {{"group", int64_t{2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  ASSERT_TRUE(r.status.is_ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].dims(), (Ints{1, 2, 2, 2}));
  expect_near_values(r.outputs[0],
                     {1.28125f, 1.6875f, 1.03125f, 0.03125f, -0.96875f, -0.0625f, -0.71875f, -1.15625f});
}

TEST(NnConvTranspose, GroupsStridesDilationsOutputPaddingMatchTorch) {
  Tensor x = seq({1, 4, 3, 3});
  Tensor w = seq({4, 1, 3, 2}, 5, 13, 6, 0.125);
  Tensor b = f32({2}, {0.5f, -1.0f});
  OpRun r = run_op("ConvTranspose", {x, w, b},
                   {{"group", int64_t{2}},
                    {"strides", Ints{2, 1}},
                    {"pads", Ints{1, 0, 1, 0}},
                    {"output_padding", Ints{1, 0}},
                    {"dilations", Ints{1, 2}}});
  ASSERT_TRUE(r.status.is_ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].dims(), (Ints{1, 2, 6, 5}));
  EXPECT_EQ(shape_to_string(r.inferred[0]), "[1,2,6,5]");
  expect_near_values(
      r.outputs[0],
      {-0.59375f, 0.90625f, 1.65625f, 0.25f, 0.75f, -0.25f, 0.34375f, -1.28125f, 0.75f,
       1.15625f, 0.8125f, 0.9375f, -1.28125f, 0.375f, 0.875f, 0.15625f, 0.40625f, 2.40625f,
       0.59375f, -0.03125f, 0.84375f, 0.96875f, -1.125f, 0.5f, 1.f, 0.78125f, 0.03125f,
       1.65625f, 0.78125f, -0.625f, -1.28125f, -0.5f, -0.625f, -2.125f, -0.625f, -1.8125f,
       -0.25f, -1.46875f, 0.25f, -1.21875f, -1.34375f, -0.5625f, -0.65625f, -2.09375f,
       -0.59375f, -1.9375f, 0.3125f, -1.53125f, -1.75f, -1.15625f, -1.40625f, -0.96875f,
       -0.6875f, -0.6875f, -0.5625f, -0.75f, -1.625f, -1.96875f, -0.53125f, -1.28125f});
}

TEST(NnConvTranspose, OutputShapeLargerThanFullLeavesZerosAtTheEnd) {
  // x = [1, 2], kernel [1, 1], stride 2: the unpadded output is [1, 1, 2, 2] (size
  // 2*(2-1)+2 = 4); output_shape 5 adds one untouched element at the end.
  Tensor x = f32({1, 1, 2}, {1, 2});
  Tensor w = f32({1, 1, 2}, {1, 1});
  OpRun r = run_op("ConvTranspose", {x, w}, {{"strides", Ints{2}}, {"output_shape", Ints{5}}});
  ASSERT_TRUE(r.status.is_ok()) << r.status.message();
  expect_near_values(r.outputs[0], {1, 1, 2, 2, 0});
}

TEST(NnMaxPool, CeilModeDropsWindowsStartingInEndPaddingAndReportsIndices) {
  // 5x5, kernel 2, stride 2, pad 1, ceil_mode: ceil((5+2-2)/2)+1 = 4, but the 4th window would
  // start in the end padding, so 3 (PyTorch agrees).
  Tensor x = seq({1, 1, 5, 5}, 3, 17, 8, 1.0);
  OpRun r = run_op("MaxPool", {x},
                   {{"kernel_shape", Ints{2, 2}},
                    {"strides", Ints{2, 2}},
                    {"pads", Ints{1, 1, 1, 1}},
                    {"ceil_mode", int64_t{1}}},
                   2);
  ASSERT_TRUE(r.status.is_ok()) << r.status.message();
  EXPECT_EQ(shape_to_string(r.inferred[0]), "[1,1,3,3]");
  EXPECT_EQ(shape_to_string(r.inferred[1]), "[1,1,3,3]");
  expect_near_values(r.outputs[0], {-8, -2, 4, 7, 8, 2, 3, 7, -2});
  ASSERT_EQ(r.outputs[1].dtype(), DType::kI64);
  EXPECT_EQ(r.outputs[1].to_int_vector(), (Ints{0, 2, 4, 5, 11, 9, 15, 22, 19}));
}

TEST(NnMaxPool, Uint8AndDilation) {
  // 1-d, kernel 2 dilated by 2: y[i] = max(x[i], x[i+2]).
  Tensor x = Tensor::from_vector<uint8_t>({1, 1, 5}, {3, 250, 7, 1, 9});
  OpRun r = run_op("MaxPool", {x}, {{"kernel_shape", Ints{2}}, {"dilations", Ints{2}}});
  ASSERT_TRUE(r.status.is_ok()) << r.status.message();
  ASSERT_EQ(r.outputs[0].dtype(), DType::kU8);
  EXPECT_EQ(r.outputs[0].to_int_vector(), (Ints{7, 250, 9}));
}

TEST(NnAveragePool, CeilModeDivisorClipsAtEndPaddingLikeTorch) {
  // 6x6, kernel 3, stride 2, pad 1, ceil_mode -> 4x4; the last window covers input row 5, one
  // end-padding row and one row past the padding: count_include_pad divides by 2 per dim.
  Tensor x = seq({1, 1, 6, 6}, 5, 19, 9, 0.5);
  Attributes attrs = {{"kernel_shape", Ints{3, 3}},
                      {"strides", Ints{2, 2}},
                      {"pads", Ints{1, 1, 1, 1}},
                      {"ceil_mode", int64_t{1}}};
  Attributes with_pad = attrs;
  with_pad["count_include_pad"] = int64_t{1};
  OpRun incl = run_op("AveragePool", {x}, with_pad);
  ASSERT_TRUE(incl.status.is_ok()) << incl.status.message();
  expect_near_values(incl.outputs[0],
                     {-0.222222222f, 0.0555555556f, 0.222222222f, 0.416666667f, -0.111111111f,
                      -0.111111111f, 0.666666667f, 0.f, -0.166666667f, -0.722222222f,
                      0.0555555556f, -0.833333333f, 0.166666667f, -0.25f, 0.666666667f, -0.625f});
  OpRun excl = run_op("AveragePool", {x}, attrs);
  ASSERT_TRUE(excl.status.is_ok()) << excl.status.message();
  expect_near_values(excl.outputs[0],
                     {-0.5f, 0.0833333333f, 0.333333333f, 1.25f, -0.166666667f, -0.111111111f,
                      0.666666667f, 0.f, -0.25f, -0.722222222f, 0.0555555556f, -1.66666667f,
                      0.5f, -0.5f, 1.33333333f, -2.5f});
}

TEST(NnGlobalPool, AverageAndMaxOverSpatialDims) {
  Tensor x = f32({1, 2, 2, 2}, {1, 2, 3, 6, -1, -5, -2, -4});
  OpRun avg = run_op("GlobalAveragePool", {x});
  ASSERT_TRUE(avg.status.is_ok()) << avg.status.message();
  EXPECT_EQ(avg.outputs[0].dims(), (Ints{1, 2, 1, 1}));
  expect_near_values(avg.outputs[0], {3, -3});
  OpRun mx = run_op("GlobalMaxPool", {x});
  ASSERT_TRUE(mx.status.is_ok()) << mx.status.message();
  expect_near_values(mx.outputs[0], {6, -1});
}

TEST(NnBatchNorm, MatchesTorchEval) {
  Tensor x = seq({2, 3, 2, 2});
  OpRun r = run_op("BatchNormalization",
                   {x, f32({3}, {1.0f, -2.0f, 0.5f}), f32({3}, {0.0f, 0.25f, -1.0f}),
                    f32({3}, {0.1f, -0.2f, 0.3f}), f32({3}, {0.5f, 1.5f, 2.0f})},
                   {{"epsilon", 1e-3f}});
  ASSERT_TRUE(r.status.is_ok()) << r.status.message();
  expect_near_values(
      r.outputs[0],
      {-1.90728198f, 0.565120587f, -0.84768088f, 1.62472169f, -0.484602096f, 1.14784701f,
       -1.70893892f, -0.0764898206f, -1.45950455f, -0.840940734f, -1.19440577f, -1.5478708f,
       0.565120587f, -0.84768088f, 1.62472169f, 0.21192022f, 1.14784701f, -1.70893892f,
       -0.0764898206f, 1.55595928f, -0.840940734f, -1.19440577f, -1.5478708f, -0.929306993f});
}

TEST(NnMatMul, BroadcastBatchAndOneDimOperandsMatchTorch) {
  OpRun r4 = run_op("MatMul", {seq({2, 1, 3, 4}), seq({3, 4, 2}, 5, 13, 6, 0.5)});
  ASSERT_TRUE(r4.status.is_ok()) << r4.status.message();
  EXPECT_EQ(r4.outputs[0].dims(), (Ints{2, 3, 3, 2}));
  expect_near_values(r4.outputs[0],
                     {3.25f,  0.f,    -1.75f, 4.375f, 5.625f, -3.625f, 3.25f,   3.25f,   -1.5f,
                      -1.875f, 4.75f, -2.875f, 3.25f,  3.25f,  -1.25f,  -1.625f, 3.875f,  -3.75f,
                      -2.125f, 4.875f, 5.25f, -3.125f, -3.875f, -2.875f, -1.375f, -2.5f,  4.875f,
                      -3.5f,  -4.f,   5.125f, -0.625f, -1.75f, 4.5f,    -3.875f, -4.125f, 5.f});
  OpRun r1a = run_op("MatMul", {seq({4}), seq({2, 4, 3}, 5, 13, 6, 0.5)});
  ASSERT_TRUE(r1a.status.is_ok()) << r1a.status.message();
  EXPECT_EQ(r1a.outputs[0].dims(), (Ints{2, 3}));
  expect_near_values(r1a.outputs[0], {3.25f, 3.25f, -1.625f, -4.875f, 3.25f, 3.25f});
  OpRun r1b = run_op("MatMul", {seq({2, 3, 4}), seq({4}, 5, 13, 6, 0.5)});
  ASSERT_TRUE(r1b.status.is_ok()) << r1b.status.message();
  EXPECT_EQ(r1b.outputs[0].dims(), (Ints{2, 3}));
  expect_near_values(r1b.outputs[0], {0.f, 1.625f, 4.625f, 0.75f, 3.75f, -5.625f});
  // Vector . vector is a scalar.
  OpRun dot = run_op("MatMul", {f32({3}, {1, 2, 3}), f32({3}, {4, 5, 6})});
  ASSERT_TRUE(dot.status.is_ok()) << dot.status.message();
  EXPECT_EQ(dot.outputs[0].rank(), 0);
  expect_near_values(dot.outputs[0], {32});
}

TEST(NnGemm, TransposesAlphaBetaAndColumnBias) {
  // A^T = [[1,2],[3,4]] (A stored [[1,3],[2,4]]), B^T = [[1,0],[1,1]] (B stored [[1,1],[0,1]]).
  // A^T B^T = [[3,2],[7,4]]; Y = 2 * that + 0.5 * C with C = [[10],[20]] broadcast along columns.
  Tensor a = f32({2, 2}, {1, 3, 2, 4});
  Tensor b = f32({2, 2}, {1, 1, 0, 1});
  Tensor c = f32({2, 1}, {10, 20});
  OpRun r = run_op("Gemm", {a, b, c},
                   {{"transA", int64_t{1}}, {"transB", int64_t{1}}, {"alpha", 2.0f}, {"beta", 0.5f}});
  ASSERT_TRUE(r.status.is_ok()) << r.status.message();
  expect_near_values(r.outputs[0], {11, 9, 24, 18});
}

TEST(NnGemm, BetaZeroIgnoresNaNInC) {
  Tensor c = f32({2}, {std::nanf(""), 1});
  OpRun r = run_op("Gemm", {f32({1, 1}, {2}), f32({1, 2}, {3, 4}), c}, {{"beta", 0.0f}});
  ASSERT_TRUE(r.status.is_ok()) << r.status.message();
  expect_near_values(r.outputs[0], {6, 8});
}

TEST(NnConv, Float64AndFloat16) {
  Tensor x = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor w = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  for (DType t : {DType::kF64, DType::kF16}) {
    OpRun r = run_op("Conv", {x.cast(t).value(), w.cast(t).value()}, {{"pads", Ints{1, 0, 0, 1}}});
    ASSERT_TRUE(r.status.is_ok()) << r.status.message();
    EXPECT_EQ(r.outputs[0].dtype(), t);
    expect_near_values(r.outputs[0], {3, 5, 3, 12, 16, 9, 24, 28, 15});
  }
}

// ---------------------------------------------------------------- user errors

TEST(NnErrors, ConvWrongChannelCount) {
  OpRun r = run_op("Conv", {seq({1, 3, 5, 5}), seq({4, 2, 3, 3})});
  expect_user_error_naming_node(r.status, "channels");
}

TEST(NnErrors, ConvBadGroup) {
  // 4 input channels, weight expects 2 per group, but group 3.
  expect_user_error_naming_node(
      run_op("Conv", {seq({1, 4, 5, 5}), seq({6, 2, 3, 3})}, {{"group", int64_t{3}}}).status,
      "group");
  // Output channels not divisible by group.
  expect_user_error_naming_node(
      run_op("Conv", {seq({1, 4, 5, 5}), seq({5, 2, 3, 3})}, {{"group", int64_t{2}}}).status,
      "group");
  expect_user_error_naming_node(
      run_op("Conv", {seq({1, 4, 5, 5}), seq({4, 4, 3, 3})}, {{"group", int64_t{0}}}).status,
      "group");
}

TEST(NnErrors, ConvWeightRankAndKernelLargerThanInput) {
  expect_user_error_naming_node(run_op("Conv", {seq({1, 3, 5, 5}), seq({4, 3, 3})}).status,
                                "rank");
  expect_user_error_naming_node(run_op("Conv", {seq({1, 1, 2, 2}), seq({1, 1, 3, 3})}).status,
                                "larger than the padded input");
  expect_user_error_naming_node(
      run_op("Conv", {seq({1, 1, 5, 5}), seq({1, 1, 3, 3})}, {{"kernel_shape", Ints{2, 2}}}).status,
      "kernel_shape");
  expect_user_error_naming_node(
      run_op("Conv", {seq({1, 1, 5, 5}), seq({1, 1, 3, 3})}, {{"strides", Ints{1}}}).status,
      "strides");
  expect_user_error_naming_node(
      run_op("Conv", {seq({1, 1, 5, 5}), seq({2, 1, 3, 3}), seq({3})}).status, "bias");
}

TEST(NnErrors, BatchNormTrainingMode) {
  Tensor p = f32({3}, {1, 1, 1});
  OpRun r = run_op("BatchNormalization", {seq({2, 3, 2, 2}), p, p, p, p},
                   {{"training_mode", int64_t{1}}});
  expect_user_error_naming_node(r.status, "training_mode");
  // Training-only statistics outputs are rejected too.
  OpRun outs = run_op("BatchNormalization", {seq({2, 3, 2, 2}), p, p, p, p}, {}, 3);
  expect_user_error_naming_node(outs.status, "training");
}

TEST(NnErrors, GemmAndMatMulShapes) {
  expect_user_error_naming_node(
      run_op("Gemm", {seq({2, 3}), seq({3, 4}), seq({3, 4})}).status, "does not broadcast");
  expect_user_error_naming_node(run_op("Gemm", {seq({2, 3}), seq({2, 4})}).status, "inner dims");
  expect_user_error_naming_node(run_op("MatMul", {seq({2, 3}), seq({4, 2})}).status, "inner dims");
  expect_user_error_naming_node(run_op("MatMul", {seq({2, 2, 3}), seq({3, 3, 2})}).status,
                                "broadcast");
  expect_user_error_naming_node(run_op("MaxPool", {seq({1, 1, 4, 4})}).status, "kernel_shape");
}

TEST(NnErrors, KernelRechecksShapesInferenceCouldNotSee) {
  // Inference saw only symbolic dims; the kernel gets a channel mismatch and must say so.
  Graph g;
  Value* x = g.add_input("x", DType::kF32, {Dim::symbol("n"), Dim::symbol("c"), Dim(), Dim()});
  Value* w = g.add_constant("w", seq({4, 2, 3, 3}));
  Node* node = g.add_node("Conv", {x, w}, {"y"}, {}, "n1").value();
  ASSERT_TRUE(infer_shapes(g).is_ok());
  EXPECT_EQ(shape_to_string(*node->output(0)->shape), "[n,4,?,?]");
  Tensor xt = seq({1, 3, 5, 5});
  auto r = run_reference(*node, {&xt, w->constant()});
  expect_user_error_naming_node(r.status(), "channels");
}

// ---------------------------------------------------------------- shape inference

Shape sym(std::initializer_list<Dim> dims) { return Shape(dims); }

TEST(NnInfer, SymbolicBatchFlowsThroughConvAndPools) {
  auto conv = infer_op("Conv",
                       {{DType::kF32, sym({Dim::symbol("batch"), 3, 224, 224})},
                        {DType::kF32, make_shape({64, 3, 7, 7})}},
                       {{"strides", Ints{2, 2}}, {"pads", Ints{3, 3, 3, 3}}}, 1, {1});
  ASSERT_TRUE(conv.is_ok()) << conv.status().message();
  EXPECT_EQ(shape_to_string(*(*conv)[0]), "[batch,64,112,112]");

  auto unknown_spatial = infer_op("Conv",
                                  {{DType::kF32, sym({Dim::symbol("batch"), 3, Dim::symbol("h"), 10})},
                                   {DType::kF32, make_shape({8, 3, 3, 3})}},
                                  {{"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{2, 2}}});
  ASSERT_TRUE(unknown_spatial.is_ok()) << unknown_spatial.status().message();
  EXPECT_EQ(shape_to_string(*(*unknown_spatial)[0]), "[batch,8,?,5]");

  auto pool = infer_op("MaxPool", {{DType::kF32, sym({Dim::symbol("b"), 64, 112, 112})}},
                       {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}},
                       2);
  ASSERT_TRUE(pool.is_ok()) << pool.status().message();
  EXPECT_EQ(shape_to_string(*(*pool)[0]), "[b,64,56,56]");
  EXPECT_EQ(shape_to_string(*(*pool)[1]), "[b,64,56,56]");

  auto gap = infer_op("GlobalAveragePool", {{DType::kF32, sym({Dim::symbol("b"), 2048, Dim(), Dim()})}});
  ASSERT_TRUE(gap.is_ok()) << gap.status().message();
  EXPECT_EQ(shape_to_string(*(*gap)[0]), "[b,2048,1,1]");

  auto convt = infer_op("ConvTranspose",
                        {{DType::kF32, sym({Dim::symbol("b"), 4, 5, Dim()})},
                         {DType::kF32, make_shape({4, 3, 3, 3})}},
                        {{"group", int64_t{2}}, {"strides", Ints{2, 2}}});
  ASSERT_TRUE(convt.is_ok()) << convt.status().message();
  EXPECT_EQ(shape_to_string(*(*convt)[0]), "[b,6,11,?]");

  auto bn = infer_op("BatchNormalization",
                     {{DType::kF32, sym({Dim::symbol("b"), 3, Dim(), 7})},
                      {DType::kF32, make_shape({3})}, {DType::kF32, make_shape({3})},
                      {DType::kF32, make_shape({3})}, {DType::kF32, make_shape({3})}});
  ASSERT_TRUE(bn.is_ok()) << bn.status().message();
  EXPECT_EQ(shape_to_string(*(*bn)[0]), "[b,3,?,7]");
}

TEST(NnInfer, SymbolicMatMulAndGemm) {
  auto mm = infer_op("MatMul", {{DType::kF32, sym({Dim::symbol("batch"), Dim::symbol("seq"), 768})},
                                {DType::kF32, make_shape({768, 3072})}});
  ASSERT_TRUE(mm.is_ok()) << mm.status().message();
  EXPECT_EQ(shape_to_string(*(*mm)[0]), "[batch,seq,3072]");

  auto heads = infer_op("MatMul", {{DType::kF32, sym({Dim::symbol("b"), 12, Dim::symbol("s"), 64})},
                                   {DType::kF32, sym({Dim::symbol("b"), 12, 64, Dim::symbol("s")})}});
  ASSERT_TRUE(heads.is_ok()) << heads.status().message();
  EXPECT_EQ(shape_to_string(*(*heads)[0]), "[b,12,s,s]");

  auto gemm = infer_op("Gemm", {{DType::kF32, sym({Dim::symbol("m"), 4})},
                                {DType::kF32, make_shape({5, 4})}, {DType::kF32, make_shape({5})}},
                       {{"transB", int64_t{1}}});
  ASSERT_TRUE(gemm.is_ok()) << gemm.status().message();
  EXPECT_EQ(shape_to_string(*(*gemm)[0]), "[m,5]");

  // Unknown rank stays unknown rather than failing.
  auto unknown = infer_op("Conv", {{DType::kF32, std::nullopt}, {DType::kF32, make_shape({4, 3, 3, 3})}});
  ASSERT_TRUE(unknown.is_ok()) << unknown.status().message();
  EXPECT_FALSE((*unknown)[0].has_value());
}

// ---------------------------------------------------------------- records and flops

TEST(NnRecords, KindsDefaultsAndReduceSpecs) {
  auto& reg = OpRegistry::global();
  for (const char* anchor : {"Conv", "ConvTranspose", "MatMul", "Gemm"}) {
    ASSERT_NE(reg.find("", anchor), nullptr) << anchor;
    EXPECT_EQ(reg.find("", anchor)->kind, FusionKind::kAnchor) << anchor;
  }
  EXPECT_EQ(reg.find("", "BatchNormalization")->kind, FusionKind::kBroadcast);
  EXPECT_EQ(reg.find("", "MaxPool")->kind, FusionKind::kOpaque);
  EXPECT_EQ(reg.find("", "AveragePool")->kind, FusionKind::kOpaque);
  const OpDef* gap = reg.find("", "GlobalAveragePool");
  EXPECT_EQ(gap->kind, FusionKind::kReduction);
  EXPECT_EQ(gap->reduce.combiner, ReduceCombiner::kSum);
  EXPECT_TRUE(gap->reduce.divide_by_count);
  const OpDef* gmp = reg.find("", "GlobalMaxPool");
  EXPECT_EQ(gmp->reduce.combiner, ReduceCombiner::kMax);
  EXPECT_FALSE(gmp->reduce.divide_by_count);
  EXPECT_EQ(std::get<int64_t>(*reg.find("", "Conv")->find_attr("group")->default_value), 1);
  EXPECT_EQ(std::get<std::string>(*reg.find("", "Conv")->find_attr("auto_pad")->default_value),
            "NOTSET");
  EXPECT_EQ(std::get<float>(*reg.find("", "Gemm")->find_attr("beta")->default_value), 1.0f);
  EXPECT_FLOAT_EQ(
      std::get<float>(*reg.find("", "BatchNormalization")->find_attr("epsilon")->default_value),
      1e-5f);
  EXPECT_TRUE(reg.find("", "MaxPool")->find_attr("kernel_shape")->required);
}

int64_t flops_of(const std::string& op, const std::vector<std::pair<DType, std::optional<Shape>>>& in,
                 Attributes attrs = {}, const std::vector<size_t>& constants = {}) {
  Graph g;
  std::vector<Value*> values;
  for (size_t i = 0; i < in.size(); ++i) {
    values.push_back(std::find(constants.begin(), constants.end(), i) != constants.end()
                         ? g.add_constant(str_cat("in", i),
                                          Tensor::zeros(in[i].first, *static_dims(*in[i].second)).value())
                         : g.add_input(str_cat("in", i), in[i].first, *in[i].second));
  }
  Node* node = g.add_node(op, values, {"y"}, std::move(attrs), "n1").value();
  EXPECT_TRUE(infer_shapes(g).is_ok());
  return node->def().flops(*node);
}

TEST(NnFlops, TwiceTheMultiplyAddsFromStaticShapes) {
  // ResNet stem: 64 x 112 x 112 outputs, 3 x 7 x 7 MACs each.
  EXPECT_EQ(flops_of("Conv", {{DType::kF32, make_shape({1, 3, 224, 224})}, {DType::kF32, make_shape({64, 3, 7, 7})}},
                     {{"strides", Ints{2, 2}}, {"pads", Ints{3, 3, 3, 3}}}),
            int64_t{2} * 64 * 112 * 112 * 3 * 49);
  // Depthwise: each output takes 1 x 3 x 3 MACs.
  EXPECT_EQ(flops_of("Conv", {{DType::kF32, make_shape({1, 8, 5, 5})}, {DType::kF32, make_shape({8, 1, 3, 3})}},
                     {{"group", int64_t{8}}}),
            2 * 8 * 3 * 3 * 9);
  EXPECT_EQ(flops_of("ConvTranspose", {{DType::kF32, make_shape({1, 4, 3, 3})}, {DType::kF32, make_shape({4, 3, 3, 3})}}),
            2 * 36 * 27);
  EXPECT_EQ(flops_of("MatMul", {{DType::kF32, make_shape({2, 3, 4})}, {DType::kF32, make_shape({4, 5})}}),
            2 * 2 * 3 * 5 * 4);
  EXPECT_EQ(flops_of("Gemm", {{DType::kF32, make_shape({4, 3})}, {DType::kF32, make_shape({4, 5})}},
                     {{"transA", int64_t{1}}}),
            2 * 3 * 5 * 4);
  EXPECT_EQ(flops_of("MaxPool", {{DType::kF32, make_shape({1, 1, 4, 4})}},
                     {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}),
            4 * 4);
  EXPECT_EQ(flops_of("GlobalAveragePool", {{DType::kF32, make_shape({1, 3, 5, 5})}}), 75);
  EXPECT_EQ(flops_of("Conv", {{DType::kF32, sym({Dim::symbol("b"), 3, 8, 8})},
                              {DType::kF32, make_shape({4, 3, 3, 3})}}),
            -1);
}

}  // namespace
}  // namespace opfuse
