// Epilogue fusion (patterns/epilogue.cc) numerics: the fused graph against the unfused one, both eagerly (the pass's
// algebra through the FusedConv reference kernel) and in graph mode at O2 (the oneDNN FusedConv
// kernel), on small graphs with each post-op and on the tiny zoo models; plus node counts.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <set>
#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "core/random.h"
#include "frontend/onnx/importer.h"
#include "graph_test_util.h"
#include "kernels/kernel.h"
#include "ops/fused.h"
#include "ops/infer_shapes.h"
#include "passes/pass.h"
#include "ops/eager.h"
#include "pipelines/pipeline.h"
#include "runtime/compare.h"
#include "runtime/session.h"
#include "testing/pattern_fusion.h"
#include "testing/zoo.h"

namespace opfuse {
namespace {

using Ints = std::vector<int64_t>;

Tensor random_tensor(const Ints& dims, uint64_t seed, float lo = -1, float hi = 1) {
  Tensor t = Tensor::zeros(DType::kF32, dims).value();
  Random rng(seed);
  fill_uniform(t, rng, lo, hi);
  return t;
}

int count(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node* node : g.nodes()) n += node->op_type() == op;
  return n;
}

// x -> Conv(3x3, bias) -> [ops] -> y, with a second input s (same shape as the conv output)
// that residual Adds use. `build` appends the epilogue nodes and returns the final value.
template <typename Build>
Graph conv_graph(Build build) {
  Graph g;
  g.opset_imports[""] = 13;
  Value* x = g.add_input("x", DType::kF32, Tensor::zeros(DType::kF32, {1, 4, 6, 6}).value().shape());
  Value* s = g.add_input("s", DType::kF32, Tensor::zeros(DType::kF32, {1, 8, 6, 6}).value().shape());
  Value* w = g.add_constant("w", random_tensor({8, 4, 3, 3}, 1, -0.5f, 0.5f));
  Value* b = g.add_constant("b", random_tensor({8}, 2));
  Attributes attrs = {{"pads", Ints{1, 1, 1, 1}}};
  Value* c = g.add_node("Conv", {x, w, b}, {"c"}, attrs, "conv").value()->output(0);
  g.add_output(build(g, c, s));
  EXPECT_TRUE(infer_shapes(g).is_ok());
  return g;
}

Value* unary(Graph& g, const std::string& op, Value* in, Attributes attrs = {}) {
  return g.add_node(op, {in}, {""}, std::move(attrs)).value()->output(0);
}

struct Case {
  std::string name;
  std::string want_epilogue;  // the fused node's epilogue, joined with ","
  Value* (*build)(Graph&, Value*, Value*);
};

const std::vector<Case> kCases = {
    {"relu", "relu", [](Graph& g, Value* c, Value*) { return unary(g, "Relu", c); }},
    {"leaky", "leaky_relu:0.100000001",
     [](Graph& g, Value* c, Value*) { return unary(g, "LeakyRelu", c, {{"alpha", 0.1f}}); }},
    {"clip", "clip:0:6", [](Graph& g, Value* c, Value*) {
       Value* lo = g.add_constant("lo", Tensor::scalar<float>(0));
       Value* hi = g.add_constant("hi", Tensor::scalar<float>(6));
       return g.add_node("Clip", {c, lo, hi}, {""}).value()->output(0);
     }},
    {"sigmoid", "sigmoid", [](Graph& g, Value* c, Value*) { return unary(g, "Sigmoid", c); }},
    {"silu", "sigmoid_mul", [](Graph& g, Value* c, Value*) {
       return g.add_node("Mul", {unary(g, "Sigmoid", c), c}, {""}).value()->output(0);
     }},
    {"hardswish", "hardswish", [](Graph& g, Value* c, Value*) { return unary(g, "HardSwish", c); }},
    {"tanh", "tanh", [](Graph& g, Value* c, Value*) { return unary(g, "Tanh", c); }},
    {"elu", "elu:0.5", [](Graph& g, Value* c, Value*) { return unary(g, "Elu", c, {{"alpha", 0.5f}}); }},
    {"add_relu", "add,relu", [](Graph& g, Value* c, Value* s) {
       return unary(g, "Relu", g.add_node("Add", {s, c}, {""}).value()->output(0));
     }},
    {"relu_add_tanh", "relu,add,tanh", [](Graph& g, Value* c, Value* s) {
       Value* a = g.add_node("Add", {unary(g, "Relu", c), s}, {""}).value()->output(0);
       return unary(g, "Tanh", a);
     }},
    // Activations with no post-op of their own in ops/fused.cc: derived from their op records.
    {"celu", "celu:0.5", [](Graph& g, Value* c, Value*) { return unary(g, "Celu", c, {{"alpha", 0.5f}}); }},
    {"thresholded_relu_add", "thresholded_relu:0.25,add", [](Graph& g, Value* c, Value* s) {
       return g.add_node("Add", {unary(g, "ThresholdedRelu", c, {{"alpha", 0.25f}}), s}, {""}).value()->output(0);
     }},
    {"relu_softplus", "relu,softplus", [](Graph& g, Value* c, Value*) {
       return unary(g, "Softplus", unary(g, "Relu", c));
     }},
};

std::string joined_epilogue(const Graph& g) {
  for (const Node* n : g.nodes()) {
    if (n->op_type() != "FusedConv") continue;
    std::string out;
    for (const std::string& e : AttrReader(*n).get_strings("epilogue")) out += (out.empty() ? "" : ",") + e;
    return out;
  }
  return "<no FusedConv>";
}

TEST(EpilogueTest, EveryPostOpMatchesTheUnfusedGraph) {
  const TensorMap inputs = {{"x", random_tensor({1, 4, 6, 6}, 3)}, {"s", random_tensor({1, 8, 6, 6}, 4)}};
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    Graph original = conv_graph(c.build);
    const TensorMap want = run_eager(original, inputs).value();
    Graph fused = original.clone();
    ASSERT_TRUE(testing_patterns::fuse_patterns_only(fused).is_ok());
    EXPECT_EQ(fused.num_nodes(), 1u);
    EXPECT_EQ(joined_epilogue(fused), c.want_epilogue);
    auto got = run_eager(fused, inputs);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    EXPECT_LE(max_relative_difference(*got, want), 1e-4);

    // Graph mode at O2 runs the oneDNN FusedConv kernel.
    SessionOptions so;
    so.mode = ExecutionMode::kGraph;
    so.level = OptLevel::kO2;
    auto session = Session::create(original.clone(), so);
    ASSERT_TRUE(session.is_ok()) << session.status().message();
    auto graph_out = session->run(inputs);
    ASSERT_TRUE(graph_out.is_ok()) << graph_out.status().message();
    EXPECT_LE(max_relative_difference(*graph_out, want), 1e-4);
  }
}

TEST(EpilogueTest, AddOfTheAnchorOutputAndAFunctionOfItIsRefused) {
  // y = Add(c, Exp(c)): the other operand is computed from c itself, so c is shared.
  Graph g = conv_graph([](Graph& g, Value* c, Value*) {
    return g.add_node("Add", {c, unary(g, "Exp", c)}, {""}).value()->output(0);
  });
  PassContext ctx;
  PipelineOptions options;
  options.passes = std::vector<std::string>{"fuse_patterns"};
  ASSERT_TRUE(run_pipeline(g, OptLevel::kO2, options, ctx).is_ok());
  EXPECT_EQ(count(g, "FusedConv"), 0);
  ASSERT_EQ(ctx.decisions.size(), 1u);
  EXPECT_EQ(ctx.decisions[0].reason, "shared intermediate");
}

TEST(EpilogueTest, BroadcastResidualIsRefused) {
  // A computed per-channel tensor is neither a bias (not constant) nor a residual (broadcasts).
  Graph g = conv_graph([](Graph& g, Value* c, Value*) {
    Value* t = g.add_input("t", DType::kF32, Tensor::zeros(DType::kF32, {1, 8, 1, 1}).value().shape());
    return g.add_node("Add", {c, t}, {""}).value()->output(0);
  });
  PassContext ctx;
  PipelineOptions options;
  options.passes = std::vector<std::string>{"fuse_patterns"};
  ASSERT_TRUE(run_pipeline(g, OptLevel::kO2, options, ctx).is_ok());
  EXPECT_EQ(count(g, "FusedConv"), 0);
  // Both readings are refused, each with its reason.
  std::set<std::string> reasons;
  for (const PassDecision& d : ctx.decisions) {
    EXPECT_FALSE(d.applied);
    reasons.insert(d.rule + ": " + d.reason);
  }
  EXPECT_EQ(reasons, (std::set<std::string>{"conv_shift_Add: non-constant scale or shift",
                                            "epilogue_add: residual shape differs"}));
}

// ---- zoo models ------------------------------------------------------------------------------

struct Loaded {
  Graph graph;
  TensorMap inputs;
};

std::optional<Loaded> load_zoo(const std::string& name) {
  const nlohmann::json manifest = testing_zoo::load_manifest();
  if (!manifest.contains(name)) return std::nullopt;
  const auto& entry = manifest[name];
  const std::filesystem::path dir = testing_zoo::zoo_dir();
  auto graph = load_onnx_file((dir / entry["file"].get<std::string>()).string());
  if (!graph.is_ok()) return std::nullopt;
  Loaded out{std::move(graph).value(), {}};
  for (const auto& in : entry["inputs"]) {
    auto t = read_npy((dir / in["file"].get<std::string>()).string());
    if (!t.is_ok()) return std::nullopt;
    out.inputs[in["name"].get<std::string>()] = std::move(t).value();
  }
  return out;
}

TEST(EpilogueTest, TinyZooModelsAtO2MatchEager) {
  for (const char* name : {"resnet_tiny", "mobilenet_v2_tiny", "efficientnet_b0_tiny", "yolov5_tiny"}) {
    SCOPED_TRACE(name);
    auto model = load_zoo(name);
    if (!model) GTEST_SKIP() << "zoo model " << name << " not available";
    SessionOptions eager_options;
    eager_options.mode = ExecutionMode::kEager;
    auto eager = Session::create(model->graph.clone(), eager_options);
    ASSERT_TRUE(eager.is_ok()) << eager.status().message();
    const TensorMap want = eager->run(model->inputs).value();
    SessionOptions graph_options;
    graph_options.mode = ExecutionMode::kGraph;
    graph_options.level = OptLevel::kO2;
    graph_options.pipeline.verify_after_each = true;
    auto graph = Session::create(std::move(model->graph), graph_options);
    ASSERT_TRUE(graph.is_ok()) << graph.status().message();
    auto got = graph->run(model->inputs);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    EXPECT_LE(max_relative_difference(*got, want), 1e-4);
  }
}

TEST(EpilogueTest, ResnetTinyAtO2HasNoReluAndEveryResidualAddFused) {
  auto model = load_zoo("resnet_tiny");
  if (!model) GTEST_SKIP() << "zoo model resnet_tiny not available";
  const int adds_before = count(model->graph, "Add");
  ASSERT_GT(count(model->graph, "Relu"), 0);
  PassContext ctx;
  ASSERT_TRUE(run_pipeline(model->graph, OptLevel::kO2, {}, ctx).is_ok());
  EXPECT_EQ(count(model->graph, "Relu"), 0);
  EXPECT_EQ(count(model->graph, "Add"), 0);
  int residuals = 0;
  for (const Node* n : model->graph.nodes()) {
    if (n->op_type() == "FusedConv" && n->has_input(3)) ++residuals;
  }
  EXPECT_EQ(residuals, adds_before);
  EXPECT_GT(adds_before, 0);
}

TEST(EpilogueTest, ResnetTinyFusedConvsAllGetTheOneDnnKernel) {
  auto model = load_zoo("resnet_tiny");
  if (!model) GTEST_SKIP() << "zoo model resnet_tiny not available";
  PassContext ctx;
  ASSERT_TRUE(run_pipeline(model->graph, OptLevel::kO2, {}, ctx).is_ok());
  int fused = 0;
  for (const Node* n : model->graph.nodes()) {
    if (n->op_type() != "FusedConv") continue;
    ++fused;
    std::vector<const Tensor*> constants;
    for (const Value* v : n->inputs()) constants.push_back(v ? v->constant() : nullptr);
    auto kernel = create_kernel(KernelCompileContext{*n, constants, 1});
    ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();
    EXPECT_EQ((*kernel)->name(), "onednn.fused_conv") << n->describe();
  }
  EXPECT_GT(fused, 0);
}

// oneDNN 2.6's deconvolution applies a bias and post-ops in slow loops of its own
// (onednn_conv_transpose.cc), so a ConvTranspose with a constant bias and an epilogue gets
// neither: the bias and the whole epilogue run in our own pass. With fewer output channels than
// a block it keeps the plain GEMM (the direct kernel would pad them to 16). Both match eager.
TEST(EpilogueTest, ConvTransposeBiasAndEpilogueRunInOurOwnPass) {
  for (int64_t channels : {1, 32}) {
    SCOPED_TRACE(channels);
    Graph g;
    g.opset_imports[""] = 13;
    Value* x = g.add_input("x", DType::kF32, Tensor::zeros(DType::kF32, {1, 8, 5, 5}).value().shape());
    Value* w = g.add_constant("w", random_tensor({8, channels, 2, 2}, 3));
    Value* b = g.add_constant("b", random_tensor({channels}, 4));
    Value* s = g.add_constant("s", Tensor::scalar<float>(0.5f));
    Attributes attrs = {{"strides", Ints{2, 2}}};
    Value* c = g.add_node("ConvTranspose", {x, w, b}, {"c"}, attrs, "deconv").value()->output(0);
    Value* m = g.add_node("Mul", {c, s}, {"m"}, {}, "scale").value()->output(0);
    g.add_output(g.add_node("Relu", {m}, {"y"}, {}, "relu").value()->output(0));
    ASSERT_TRUE(infer_shapes(g).is_ok());
    Graph original = g.clone();
    PassContext ctx;
    ASSERT_TRUE(run_pipeline(g, OptLevel::kO2, {}, ctx).is_ok());
    ASSERT_EQ(count(g, "FusedConvTranspose"), 1);
    for (const Node* n : g.nodes()) {
      if (n->op_type() != "FusedConvTranspose") continue;
      std::vector<const Tensor*> constants;
      for (const Value* v : n->inputs()) constants.push_back(v ? v->constant() : nullptr);
      auto kernel = create_kernel(KernelCompileContext{*n, constants, 1});
      ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();
      const std::string impl = (*kernel)->implementation();
      EXPECT_NE(impl.find(", then bias, linear, relu"), std::string::npos) << impl;
      // (At 32 channels the direct kernel where the tier has one: at SSE4.1 oneDNN has none.)
      if (channels < 16) EXPECT_NE(impl.find("gemm"), std::string::npos) << impl;
    }
    TensorMap inputs = {{"x", random_tensor({1, 8, 5, 5}, 5)}};
    inputs["x"].data<float>()[7] = std::numeric_limits<float>::quiet_NaN();
    const TensorMap want = run_eager(original, inputs).value();
    for (OptLevel level : {OptLevel::kO1, OptLevel::kO2, OptLevel::kO3}) {
      EXPECT_LE(testing_graphs::difference_at_level(original, level, inputs, want), 1e-5) << opt_level_name(level);
    }
  }
}

// A new activation as an epilogue needs no file beyond its op record: ThresholdedRelu and Celu
// after a MatMul and a Conv fuse at O2 and O3 (the O3 conv blocked), and every level matches
// eager mode, NaN and Inf included.
TEST(EpilogueTest, ANewActivationIsAnEpilogueEndToEnd) {
  Graph g;
  g.opset_imports[""] = 13;
  Value* x = g.add_input("x", DType::kF32, Tensor::zeros(DType::kF32, {1, 16, 8, 8}).value().shape());
  Value* m = g.add_input("m", DType::kF32, Tensor::zeros(DType::kF32, {5, 64}).value().shape());
  Value* w = g.add_constant("w", random_tensor({32, 16, 3, 3}, 7, -0.3f, 0.3f));
  Value* wm = g.add_constant("wm", random_tensor({64, 48}, 8, -0.3f, 0.3f));
  Attributes pads = {{"pads", Ints{1, 1, 1, 1}}};
  Value* c = g.add_node("Conv", {x, w}, {"c"}, pads, "conv").value()->output(0);
  g.add_output(unary(g, "Celu", c, {{"alpha", 0.7f}}));
  Value* p = g.add_node("MatMul", {m, wm}, {"p"}, {}, "matmul").value()->output(0);
  g.add_output(unary(g, "ThresholdedRelu", p, {{"alpha", 0.2f}}));
  ASSERT_TRUE(infer_shapes(g).is_ok());

  TensorMap inputs = {{"x", random_tensor({1, 16, 8, 8}, 9)}, {"m", random_tensor({5, 64}, 10)}};
  float* xd = inputs.at("x").data<float>();
  xd[0] = std::numeric_limits<float>::quiet_NaN();
  xd[100] = std::numeric_limits<float>::infinity();
  inputs.at("m").data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  const TensorMap want = run_eager(g, inputs).value();
  for (OptLevel level : {OptLevel::kO2, OptLevel::kO3}) {
    SCOPED_TRACE(static_cast<int>(level));
    SessionOptions so;
    so.mode = ExecutionMode::kGraph;
    so.level = level;
    auto session = Session::create(g.clone(), so);
    ASSERT_TRUE(session.is_ok()) << session.status().message();
    auto plan = session->plan_for(inputs);
    ASSERT_TRUE(plan.is_ok()) << plan.status().message();
    std::set<std::string> epilogues;
    for (const Node* n : (*plan)->graph().nodes()) {
      EXPECT_NE(n->op_type(), "Celu");
      EXPECT_NE(n->op_type(), "ThresholdedRelu");
      if (n->attrs.count("epilogue")) {
        for (const std::string& e : AttrReader(*n).get_strings("epilogue")) epilogues.insert(e);
      }
    }
    EXPECT_EQ(epilogues, (std::set<std::string>{"celu:0.699999988", "thresholded_relu:0.200000003"}));
    auto got = session->run(inputs);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    for (const auto& [name, t] : want) {
      const float* a = t.data<float>();
      const float* b = got->at(name).data<float>();
      int nan_mismatch = 0;
      for (int64_t i = 0; i < t.numel(); ++i) nan_mismatch += std::isnan(a[i]) != std::isnan(b[i]);
      EXPECT_EQ(nan_mismatch, 0) << name;
    }
    EXPECT_LE(max_relative_difference(*got, want), 1e-4);
  }
}

TEST(EpilogueTest, RunsAtO2AndO3ButNotO1) {
  auto has = [](OptLevel level) {
    for (const PipelineStage& stage : pipeline_for(level)) {
      for (std::string_view p : stage.passes) {
        if (p == "fuse_patterns") return true;
      }
    }
    return false;
  };
  EXPECT_FALSE(has(OptLevel::kO1));
  EXPECT_TRUE(has(OptLevel::kO2));
  EXPECT_TRUE(has(OptLevel::kO3));
}

}  // namespace
}  // namespace opfuse
