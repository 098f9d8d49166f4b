// The C++ model-building API: typed handles, deterministic weights, sticky errors, blocks, and
// whole models (ResNet-50, DeepLabV3) that run eagerly and compile like imported ones.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/random.h"
#include "frontend/builder/blocks.h"
#include "frontend/builder/models.h"
#include "pipelines/pipeline.h"
#include "runtime/compare.h"
#include "runtime/session.h"

namespace opfuse {
namespace {

std::map<std::string, int> op_histogram(const Graph& g) {
  std::map<std::string, int> h;
  for (const Node* n : g.nodes()) ++h[n->op_type()];
  return h;
}

TensorMap random_inputs(const Graph& g, uint64_t seed) {
  Random rng(seed);
  TensorMap inputs;
  for (const Value* in : g.inputs()) {
    Tensor t = Tensor::zeros(in->dtype, *static_dims(*in->shape)).value();
    fill_uniform(t, rng, -1, 1);
    inputs[in->name()] = t;
  }
  return inputs;
}

// Runs eager and graph mode at `level`; returns the worst max relative difference.
double eager_vs_graph(const Graph& g, OptLevel level, size_t* kernels = nullptr) {
  const TensorMap inputs = random_inputs(g, 5);
  SessionOptions eager;
  eager.mode = ExecutionMode::kEager;
  auto e = Session::create(g.clone(), eager);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  SessionOptions graph;
  graph.level = level;
  auto s = Session::create(g.clone(), graph);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  auto want = e->run(inputs);
  auto got = s->run(inputs);
  EXPECT_TRUE(want.is_ok()) << want.status().message();
  EXPECT_TRUE(got.is_ok()) << got.status().message();
  if (!want.is_ok() || !got.is_ok()) return INFINITY;
  if (kernels) *kernels = (*s->plan_for(inputs))->kernels_per_run();
  double worst = 0;
  for (const auto& [name, t] : *want) worst = std::max(worst, max_relative_difference(got->at(name), t));
  return worst;
}

TEST(ModelBuilderTest, BuildsTypedGraphWithInferredShapes) {
  ModelBuilder b("tiny", 1);
  Var x = b.input("x", {1, 3, 8, 8});
  Var h = b.conv2d(x, 4, 3, {.stride = 2});
  EXPECT_EQ(h.rank(), 4);
  EXPECT_EQ(h.dim(1), 4);
  EXPECT_EQ(h.dim(2), 4);  // (8 + 2 - 3) / 2 + 1
  Var y = b.relu(h) * 2.0 + 1.0;
  b.output(b.flatten(b.global_average_pool(y)), "y");
  auto g = b.finish();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_EQ(g->outputs().size(), 1u);
  EXPECT_EQ(g->outputs()[0]->name(), "y");
  EXPECT_EQ(g->outputs()[0]->type_string(), "f32[1,4]");
  const auto hist = op_histogram(*g);
  EXPECT_EQ(hist.at("Conv"), 1);
  EXPECT_EQ(hist.at("Mul"), 1);
  EXPECT_EQ(hist.at("Add"), 1);
}

TEST(ModelBuilderTest, NamedOutputsCostNoCopyAndHandlesStayValid) {
  ModelBuilder b("names", 0);
  Var x = b.input("x", {3});
  Var h = b.relu(x);
  b.output(h, "features");   // h stays usable after being declared an output
  b.output(h * 2.0, "twice");
  b.output(x, "passthrough");  // an input: only an Identity can rename it
  auto g = b.finish();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_EQ(g->outputs().size(), 3u);
  EXPECT_EQ(g->outputs()[0]->name(), "features");
  EXPECT_EQ(g->outputs()[0]->producer()->op_type(), "Relu");  // renamed, not copied
  EXPECT_EQ(g->outputs()[1]->producer()->op_type(), "Mul");
  EXPECT_EQ(g->outputs()[2]->producer()->op_type(), "Identity");
  auto s = Session::create(std::move(*g));
  ASSERT_TRUE(s.is_ok());
  auto out = s->run({{"x", Tensor::from_vector<float>({3}, {-1.0f, 2.0f, 3.0f})}});
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_FLOAT_EQ(out->at("features").get_double(0), 0.0);
  EXPECT_FLOAT_EQ(out->at("twice").get_double(1), 4.0);
  EXPECT_FLOAT_EQ(out->at("passthrough").get_double(0), -1.0);

  ModelBuilder dup("dup", 0);
  Var y = dup.input("y", {3});
  dup.output(dup.relu(y), "out");
  dup.output(dup.sigmoid(y), "out");
  ASSERT_FALSE(dup.finish().is_ok());
}

TEST(ModelBuilderTest, ComputesWhatItSays) {
  // y = relu(x - 0.5) * 3 on a known input.
  ModelBuilder b("arith", 0);
  Var x = b.input("x", {4});
  b.output(b.relu(x - 0.5) * 3.0, "y");
  auto g = b.finish();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  auto s = Session::create(std::move(*g));
  ASSERT_TRUE(s.is_ok());
  auto out = s->run({{"x", Tensor::from_vector<float>({4}, {0.0f, 0.5f, 1.0f, 2.5f})}});
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  const Tensor& y = out->at("y");
  EXPECT_FLOAT_EQ(y.get_double(0), 0.0);
  EXPECT_FLOAT_EQ(y.get_double(1), 0.0);
  EXPECT_FLOAT_EQ(y.get_double(2), 1.5);
  EXPECT_FLOAT_EQ(y.get_double(3), 6.0);
}

TEST(ModelBuilderTest, WeightsAreDeterministicPerSeed) {
  auto weights = [](uint64_t seed) {
    ModelBuilder b("w", seed);
    return b.weight("w", {16, 8, 3, 3}).value()->constant()->get_double(7);
  };
  EXPECT_EQ(weights(3), weights(3));
  EXPECT_NE(weights(3), weights(4));
  // He-uniform bound for fan_in 8*3*3 = 72: sqrt(6/72).
  ModelBuilder b("w", 9);
  const Tensor* t = b.weight("w", {16, 8, 3, 3}).value()->constant();
  double hi = 0;
  for (int64_t i = 0; i < t->numel(); ++i) hi = std::max(hi, std::abs(t->get_double(i)));
  EXPECT_LE(hi, std::sqrt(6.0 / 72.0));
  EXPECT_GT(hi, 0.8 * std::sqrt(6.0 / 72.0));
}

TEST(ModelBuilderTest, ErrorsAreStickyAndNameTheCulprit) {
  ModelBuilder b("bad", 0);
  Var x = b.input("x", {1, 3, 8, 8});
  Var y = b.op("NoSuchOp", {x});
  EXPECT_FALSE(y.valid());
  Var z = b.relu(y);  // later calls do nothing
  EXPECT_FALSE(z.valid());
  auto g = b.finish();
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("NoSuchOp"), std::string::npos) << g.status().message();

  ModelBuilder c("bad_shapes", 0);
  Var a = c.input("a", {2, 3});
  Var d = c.input("d", {4, 5});
  c.output(c.matmul(a, d));
  auto g2 = c.finish();
  ASSERT_FALSE(g2.is_ok());
  EXPECT_NE(g2.status().message().find("MatMul"), std::string::npos) << g2.status().message();

  ModelBuilder e("bad_attr", 0);
  Var i = e.input("i", {2, 3});
  e.output(e.op("Relu", {i}, {{"alpha", 1.0f}}));
  auto g3 = e.finish();
  ASSERT_FALSE(g3.is_ok());
  EXPECT_NE(g3.status().message().find("alpha"), std::string::npos) << g3.status().message();

  ModelBuilder f("conv_on_2d", 0);
  Var v = f.input("v", {2, 3});
  f.output(f.conv2d(v, 4, 3));
  auto g4 = f.finish();
  ASSERT_FALSE(g4.is_ok());
  EXPECT_NE(g4.status().message().find("NCHW"), std::string::npos) << g4.status().message();
}

TEST(ModelBuilderTest, BlocksRunAndCompileToTheSameNumbers) {
  ModelBuilder b("blocks", 11);
  Var x = b.input("image", {1, 8, 16, 16});
  Var h = conv2d_bn_act(b, "c1", x, 16, 3, {.bias = false}, Activation::kSilu);
  h = bottleneck_block(b, "res", h, 8, 2);
  h = basic_block(b, "basic", h, 32);
  h = depthwise_separable_block(b, "dw", h, 24);
  h = inverted_residual_block(b, "ir", h, 24, 3);
  h = b.flatten(b.global_average_pool(h));
  b.output(dense_bn_act(b, "fc", h, 10, Activation::kGelu), "y");
  auto g = b.finish();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->outputs()[0]->type_string(), "f32[1,10]");
  for (OptLevel level : {OptLevel::kO0, OptLevel::kO1, OptLevel::kO2}) {
    EXPECT_LE(eager_vs_graph(*g, level), 1e-4) << opt_level_name(level);
  }
}

// Multi-head attention against a direct loop implementation over the same weights.
TEST(ModelBuilderTest, MultiHeadAttentionMatchesADirectComputation) {
  const int64_t B = 1, S = 3, D = 4, H = 2, DH = 2;
  ModelBuilder b("mha", 21);
  Var x = b.input("x", {B, S, D});
  b.output(multi_head_attention(b, "mha", x, H), "y");
  auto g = b.finish();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  auto w = [&](const std::string& name) { return g->find_value(name)->constant(); };
  const Tensor *wq = w("mha/query/fc.weight"), *bq = w("mha/query/fc.bias");
  const Tensor *wk = w("mha/key/fc.weight"), *bk = w("mha/key/fc.bias");
  const Tensor *wv = w("mha/value/fc.weight"), *bv = w("mha/value/fc.bias");
  const Tensor *wo = w("mha/output/fc.weight"), *bo = w("mha/output/fc.bias");
  ASSERT_TRUE(wq && bq && wk && bk && wv && bv && wo && bo);
  const TensorMap inputs = random_inputs(*g, 2);
  const Tensor& in = inputs.at("x");
  auto proj = [&](const Tensor* W, const Tensor* bias, const std::vector<double>& X) {
    std::vector<double> Y(S * D);
    for (int s = 0; s < S; ++s)
      for (int o = 0; o < D; ++o) {
        double acc = bias->get_double(o);
        for (int i = 0; i < D; ++i) acc += X[s * D + i] * W->get_double(i * D + o);  // [in, out]
        Y[s * D + o] = acc;
      }
    return Y;
  };
  std::vector<double> X(S * D);
  for (int i = 0; i < S * D; ++i) X[i] = in.get_double(i);
  auto Q = proj(wq, bq, X), K = proj(wk, bk, X), V = proj(wv, bv, X);
  std::vector<double> C(S * D);
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < S; ++i) {
      std::vector<double> p(S);
      double mx = -1e300, sum = 0;
      for (int j = 0; j < S; ++j) {
        double dot = 0;
        for (int d = 0; d < DH; ++d) dot += Q[i * D + h * DH + d] * K[j * D + h * DH + d];
        p[j] = dot / std::sqrt(double(DH));
        mx = std::max(mx, p[j]);
      }
      for (int j = 0; j < S; ++j) sum += (p[j] = std::exp(p[j] - mx));
      for (int d = 0; d < DH; ++d) {
        double acc = 0;
        for (int j = 0; j < S; ++j) acc += p[j] / sum * V[j * D + h * DH + d];
        C[i * D + h * DH + d] = acc;
      }
    }
  auto Y = proj(wo, bo, C);
  for (OptLevel level : {OptLevel::kO1, OptLevel::kO2}) {
    SessionOptions o;
    o.level = level;
    auto s = Session::create(g->clone(), o);
    ASSERT_TRUE(s.is_ok());
    auto out = s->run(inputs);
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    for (int i = 0; i < S * D; ++i) EXPECT_NEAR(out->at("y").get_double(i), Y[i], 1e-5) << i;
  }
}

TEST(ModelBuilderTest, TransformerEncoderLayerRuns) {
  ModelBuilder b("encoder", 4);
  Var x = b.input("x", {2, 8, 32});
  b.output(transformer_encoder_layer(b, "layer", x, 4, 64), "y");
  auto g = b.finish();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->outputs()[0]->type_string(), "f32[2,8,32]");
  const auto hist = op_histogram(*g);
  EXPECT_EQ(hist.at("LayerNormalization"), 2);
  EXPECT_EQ(hist.at("Softmax"), 1);
  EXPECT_EQ(hist.at("Erf"), 1);
  EXPECT_LE(eager_vs_graph(*g, OptLevel::kO2), 1e-4);
}

TEST(ModelBuilderTest, ResNet50HasTheRightStructure) {
  auto g = build_resnet({.image_size = 64});
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const auto hist = op_histogram(*g);
  // 1 stem + 16 blocks x 3 + 4 projection shortcuts.
  EXPECT_EQ(hist.at("Conv"), 53);
  EXPECT_EQ(hist.at("BatchNormalization"), 53);
  EXPECT_EQ(hist.at("Add"), 16);
  EXPECT_EQ(hist.at("Relu"), 49);
  EXPECT_EQ(hist.at("Gemm"), 1);
  EXPECT_EQ(g->outputs()[0]->type_string(), "f32[1,1000]");
  // Conv and FC weights of torchvision's resnet50 (BN parameters excluded): 23,454,912 + 2,049,000.
  int64_t conv_fc = 0;
  for (const Node* n : g->nodes()) {
    if (n->op_type() == "Conv" || n->op_type() == "Gemm") {
      for (const Value* in : n->inputs()) if (in && in->constant()) conv_fc += in->constant()->numel();
    }
  }
  EXPECT_EQ(conv_fc, 23454912 + 2049000);
  // Same seed, same model; at a small size it runs and compiles to the same numbers.
  auto again = build_resnet({.image_size = 64});
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->find_value("layer3.2/conv2/conv.weight")->constant()->get_double(5),
            g->find_value("layer3.2/conv2/conv.weight")->constant()->get_double(5));
}

TEST(ModelBuilderTest, DeepLabV3SegmentsAtInputResolution) {
  auto g = build_deeplabv3({.image_size = 64, .aspp_channels = 32});
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->outputs()[0]->type_string(), "f32[1,21,64,64]");
  const auto hist = op_histogram(*g);
  EXPECT_EQ(hist.at("Resize"), 2);  // image pooling branch and the final upsampling
  EXPECT_EQ(hist.at("Concat"), 1);
  int dilated = 0;
  for (const Node* n : g->nodes()) {
    if (n->op_type() == "Conv" && n->attrs.count("dilations") &&
        std::get<std::vector<int64_t>>(n->attrs.at("dilations"))[0] > 1) ++dilated;
  }
  EXPECT_GE(dilated, 3 + 3);  // three ASPP branches, and the dilated last stage of the backbone
  size_t kernels = 0;
  EXPECT_LE(eager_vs_graph(*g, OptLevel::kO2, &kernels), 1e-4);
  EXPECT_LT(kernels, g->num_nodes());

  auto resnet = build_deeplabv3({.image_size = 32, .backbone = SegmentationBackbone::kResNet50,
                                 .output_stride = 8, .aspp_channels = 16, .atrous_rates = {2, 4, 6}});
  ASSERT_TRUE(resnet.is_ok()) << resnet.status().message();
  EXPECT_EQ(resnet->outputs()[0]->type_string(), "f32[1,21,32,32]");
}

TEST(ModelBuilderTest, RejectsBadModelOptions) {
  auto g = build_resnet({.image_size = 8});
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("image size"), std::string::npos);
  auto d = build_deeplabv3({.output_stride = 4});
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("output stride"), std::string::npos);
}

}  // namespace
}  // namespace opfuse
