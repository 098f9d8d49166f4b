// The pass list and pipelines, and the numeric exactness of folds on shapes the zoo lacks
// (grouped ConvTranspose, Gemm without transB, strided grouped Conv): eager before == after.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "ir/text_format.h"
#include "passes/pass.h"
#include "ops/eager.h"
#include "pipelines/pipeline.h"

namespace opfuse {
namespace {

TEST(PipelineTest, EveryStageNamesRegisteredPasses) {
  for (OptLevel level : {OptLevel::kO0, OptLevel::kO1, OptLevel::kO2, OptLevel::kO3}) {
    for (const PipelineStage& stage : pipeline_for(level)) {
      EXPECT_FALSE(stage.why.empty());
      for (std::string_view name : stage.passes) EXPECT_NE(find_pass(name), nullptr) << name;
    }
  }
  // O0 rewrites nothing but what planning needs: shape arithmetic folded to static shapes (and
  // an If on it taken, as its branches may give other shapes).
  for (const PipelineStage& stage : pipeline_for(OptLevel::kO0)) {
    for (std::string_view name : stage.passes) {
      EXPECT_TRUE(name == "infer_shapes" || name == "constant_fold" || name == "dce" || name == "inline_constant_if")
          << name;
    }
  }
  for (const char* pass : {"dce", "constant_fold", "cse", "simplify", "fold_batchnorm"}) {
    bool in_o1 = false;
    for (const PipelineStage& stage : pipeline_for(OptLevel::kO1)) {
      for (std::string_view name : stage.passes) in_o1 = in_o1 || name == pass;
    }
    EXPECT_TRUE(in_o1) << pass << " is not in the O1 pipeline";
  }
}

TEST(PipelineTest, O0LeavesTheGraphAlone) {
  auto g = parse_graph(R"(graph @main opset 13 (%x: f32[2]) {
    %a: f32[2] = Identity(%x)
    %y: f32[2] = Relu(%a)
    return %y
  })");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  PassContext ctx;
  ASSERT_TRUE(run_pipeline(*g, OptLevel::kO0, {}, ctx).is_ok());
  EXPECT_EQ(g->num_nodes(), 2u);
}

TEST(PipelineTest, RefusalsAreRecordedOnceAcrossFixpointRounds) {
  // The Identity keeps the fixpoint stage busy for a second round; the big ConstantOfShape is
  // refused in each round but must be reported once.
  auto g = parse_graph(R"(graph @main opset 13 (%x: f32[2048,1024]) {
    %shape: i64[2] = const [2048, 1024]
    %big = ConstantOfShape(%shape)
    %i = Identity(%big)
    %y = Add(%x, %i)
    return %y
  })");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  PassContext ctx;
  PipelineOptions options;
  options.verify_after_each = true;
  ASSERT_TRUE(run_pipeline(*g, OptLevel::kO1, options, ctx).is_ok());
  int refusals = 0;
  for (const PassDecision& d : ctx.decisions) refusals += d.pass == "constant_fold" && !d.applied;
  EXPECT_EQ(refusals, 1);
  EXPECT_EQ(g->num_nodes(), 2u);  // ConstantOfShape and Add
}

TEST(PipelineTest, UnknownPassListsTheValidOnes) {
  auto g = parse_graph("graph @main opset 13 (%x: f32[2]) {\n return %x\n}");
  ASSERT_TRUE(g.is_ok());
  PassContext ctx;
  PipelineOptions options;
  options.passes = std::vector<std::string>{"fold_batchnrom"};
  Status s = run_pipeline(*g, OptLevel::kO1, options, ctx);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("fold_batchnorm"), std::string::npos) << s.message();
}

TEST(PipelineTest, ConstantNodeFoldsIntoAnInitializer) {
  auto g = parse_graph(R"(graph @main opset 13 (%x: i64[3]) {
    %c = Constant() {value_ints = [1, 2, 3]}
    %y = Add(%x, %c)
    return %y
  })");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  PassContext ctx;
  PipelineOptions options;
  options.verify_after_each = true;
  options.passes = std::vector<std::string>{"constant_fold"};
  ASSERT_TRUE(run_pipeline(*g, OptLevel::kO1, options, ctx).is_ok());
  EXPECT_EQ(g->num_nodes(), 1u);
  const Value* c = g->find_value("c");
  ASSERT_NE(c, nullptr);
  ASSERT_NE(c->constant(), nullptr);
  EXPECT_EQ(c->constant()->to_int_vector(), (std::vector<int64_t>{1, 2, 3}));
}

// ---- fold_batchnorm numerics on random weights ---------------------------------------------

Tensor random_tensor(std::vector<int64_t> dims, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t = Tensor::zeros(DType::kF32, std::move(dims)).value();
  for (float& v : t.values<float>()) v = dist(rng);
  return t;
}

// anchor -> BN(channels) -> Neg (so the BN output is not a graph output), with random weights and BN statistics.
struct FoldCase {
  std::string op;
  std::vector<int64_t> x_dims, w_dims;
  Attributes attrs;
  int64_t channels;
  bool with_bias;
  bool bias_add = false;  // an Add of a [channels, 1, 1] constant between the anchor and the BN
};

// `ops`: the op histogram of the graph after the fold.
double fold_and_compare(const FoldCase& c, std::map<std::string, int>& ops) {
  std::mt19937 rng(7);
  Graph g;
  Value* x = g.add_input("x", DType::kF32, make_shape(c.x_dims));
  std::vector<Value*> inputs = {x, g.add_constant("w", random_tensor(c.w_dims, rng, -1, 1))};
  if (c.with_bias) inputs.push_back(g.add_constant("b", random_tensor({c.channels}, rng, -1, 1)));
  Node* anchor = g.add_node(c.op, inputs, {"a"}, c.attrs, "anchor").value();
  Value* bn_input = anchor->output(0);
  if (c.bias_add) {
    Value* d = g.add_constant("d", random_tensor({c.channels, 1, 1}, rng, -1, 1));
    bn_input = g.add_node("Add", {d, bn_input}, {"ab"}, {}, "bias_add").value()->output(0);
  }
  Value* scale = g.add_constant("scale", random_tensor({c.channels}, rng, 0.5, 2));
  Value* shift = g.add_constant("shift", random_tensor({c.channels}, rng, -1, 1));
  Value* mean = g.add_constant("mean", random_tensor({c.channels}, rng, -1, 1));
  Value* var = g.add_constant("var", random_tensor({c.channels}, rng, 0.1, 3));
  Node* bn = g.add_node("BatchNormalization", {bn_input, scale, shift, mean, var}, {"n"},
                        {{"epsilon", 1e-3f}}, "bn").value();
  Node* relu = g.add_node("Neg", {bn->output(0)}, {"y"}).value();
  g.add_output(relu->output(0));
  PassContext ctx;
  PipelineOptions options;
  options.verify_after_each = true;
  options.passes = std::vector<std::string>{"infer_shapes"};
  EXPECT_TRUE(run_pipeline(g, OptLevel::kO1, options, ctx).is_ok());

  TensorMap in = {{"x", random_tensor(c.x_dims, rng, -2, 2)}};
  auto want = run_eager(g, in);
  EXPECT_TRUE(want.is_ok()) << want.status().message();
  options.passes = std::vector<std::string>{"fold_batchnorm", "dce"};
  Status s = run_pipeline(g, OptLevel::kO1, options, ctx);
  EXPECT_TRUE(s.is_ok()) << s.message();
  ops.clear();
  for (const Node* n : g.nodes()) ++ops[n->op_type()];
  auto got = run_eager(g, in);
  EXPECT_TRUE(got.is_ok()) << got.status().message();
  if (!want.is_ok() || !got.is_ok()) return INFINITY;
  const Tensor& a = got->at("y");
  const Tensor& b = want->at("y");
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    diff = std::max(diff, std::abs(a.get_double(i) - b.get_double(i)));
    ref = std::max(ref, std::abs(b.get_double(i)));
  }
  EXPECT_GT(ref, 0.1);  // the case computes something
  return diff / ref;
}

TEST(FoldBatchNormNumericTest, GroupedStridedConvTransposeWithoutBias) {
  std::map<std::string, int> ops;
  FoldCase c{"ConvTranspose", {2, 6, 5, 5}, {6, 2, 3, 3},
             {{"group", int64_t{3}}, {"strides", std::vector<int64_t>{2, 2}}}, 6, false};
  EXPECT_LE(fold_and_compare(c, ops), 1e-5);
  EXPECT_EQ(ops["BatchNormalization"], 0);
  EXPECT_EQ(ops["Mul"], 0);
}

TEST(FoldBatchNormNumericTest, ConvTransposeThroughItsBiasAdd) {
  for (bool with_bias : {false, true}) {
    std::map<std::string, int> ops;
    FoldCase c{"ConvTranspose", {2, 6, 5, 5}, {6, 2, 2, 2},
               {{"group", int64_t{3}}, {"strides", std::vector<int64_t>{2, 2}}}, 6, with_bias, true};
    EXPECT_LE(fold_and_compare(c, ops), 1e-5);
    EXPECT_EQ(ops["BatchNormalization"], 0);
    EXPECT_EQ(ops["Add"], 0);
    EXPECT_EQ(ops["Mul"], 0);
  }
}

TEST(FoldBatchNormNumericTest, GroupedConvWithBias) {
  std::map<std::string, int> ops;
  FoldCase c{"Conv", {1, 4, 7, 7}, {8, 2, 3, 3},
             {{"group", int64_t{2}}, {"strides", std::vector<int64_t>{2, 2}}}, 8, true};
  EXPECT_LE(fold_and_compare(c, ops), 1e-5);
  EXPECT_EQ(ops["BatchNormalization"], 0);
  EXPECT_EQ(ops["Mul"], 0);
}

TEST(FoldBatchNormNumericTest, GemmWithoutTransB) {
  std::map<std::string, int> ops;
  FoldCase c{"Gemm", {5, 4}, {4, 3}, {{"alpha", 0.5f}, {"beta", 3.0f}}, 3, true};
  EXPECT_LE(fold_and_compare(c, ops), 1e-5);
  EXPECT_EQ(ops["BatchNormalization"], 0);
  EXPECT_EQ(ops["Mul"], 0);
}

TEST(FoldBatchNormNumericTest, MatMul2D) {
  std::map<std::string, int> ops;
  FoldCase c{"MatMul", {5, 4}, {4, 3}, {}, 3, false};
  EXPECT_LE(fold_and_compare(c, ops), 1e-5);
  EXPECT_EQ(ops["BatchNormalization"], 0);
  EXPECT_EQ(ops["Mul"], 0);
}

TEST(FoldBatchNormNumericTest, MatMul3DIsNotFoldedButLowered) {
  // BN's channel axis 1 is the sequence axis of a 3-D product, not B's columns: the MatMul keeps
  // its weights and the BN becomes a per-channel Mul+Add.
  std::map<std::string, int> ops;
  FoldCase c{"MatMul", {2, 3, 4}, {4, 5}, {}, 3, false};
  EXPECT_LE(fold_and_compare(c, ops), 1e-6);
  EXPECT_EQ(ops["BatchNormalization"], 0);
  EXPECT_EQ(ops["MatMul"], 1);
  EXPECT_EQ(ops["Mul"], 1);
  EXPECT_EQ(ops["Add"], 1);
}

}  // namespace
}  // namespace opfuse

namespace opfuse {
namespace {

// The level every front end compiles at: the user's, else the fusion config's, else the fallback;
// a bad level in the config names the config.
TEST(ChooseOptLevel, GivenThenConfigThenFallback) {
  EXPECT_EQ(*choose_opt_level(std::string("O1"), std::string("O3"), "cfg", OptLevel::kO2), OptLevel::kO1);
  EXPECT_EQ(*choose_opt_level(std::nullopt, std::string("O3"), "cfg", OptLevel::kO2), OptLevel::kO3);
  EXPECT_EQ(*choose_opt_level(std::nullopt, std::nullopt, "cfg", OptLevel::kO2), OptLevel::kO2);
  auto bad = choose_opt_level(std::nullopt, std::string("O9"), "fusion config 'f.json'", OptLevel::kO2);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("fusion config 'f.json': unknown optimisation level 'O9'"), std::string::npos);
  EXPECT_FALSE(choose_opt_level(std::string("fast"), std::nullopt, "cfg", OptLevel::kO2).is_ok());
}

}  // namespace
}  // namespace opfuse
