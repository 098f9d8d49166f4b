// Each O1 pass alone, and the whole O1 pipeline, on every zoo model of the tier (tiny unless
// OPFUSE_ZOO_TIER says otherwise): the rewritten graph verifies after every pass, runs eagerly
// to the same outputs as the original (max abs diff <= 1e-4 of the max abs output), and has the
// node counts the pass promises. The outputs of the original graph are the reference, so this
// checks the rewrites, not the kernels (tests/e2e/zoo_test.cc checks those against PyTorch).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "testing/zoo.h"
#include "frontend/onnx/importer.h"
#include "passes/pass.h"
#include "ops/eager.h"
#include "pipelines/pipeline.h"
#include "graph_test_util.h"

namespace opfuse {
namespace {

using testing_graphs::count_op;

namespace fs = std::filesystem;

using testing_zoo::zoo_dir;
using testing_zoo::zoo_tier;
using testing_zoo::models_in_tier;
inline nlohmann::json manifest() { return testing_zoo::load_manifest(); }

// max |a - b| / max |b| over every output; the outputs must have the same names and dims.
double relative_diff(const TensorMap& got, const TensorMap& want, std::string& problem) {
  double worst = 0;
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    if (it == got.end()) {
      problem = "missing output " + name;
      return INFINITY;
    }
    if (it->second.dims() != w.dims()) {
      problem = "output " + name + " has dims " + dims_to_string(it->second.dims()) + ", expected " +
                dims_to_string(w.dims());
      return INFINITY;
    }
    double diff = 0, ref = 0;
    for (int64_t i = 0; i < w.numel(); ++i) {
      const double g = it->second.get_double(i), r = w.get_double(i);
      if (std::isnan(g) != std::isnan(r)) {
        problem = "output " + name + " NaN mismatch at " + std::to_string(i);
        return INFINITY;
      }
      if (!std::isnan(r)) diff = std::max(diff, std::abs(g - r));
      if (!std::isnan(r)) ref = std::max(ref, std::abs(r));
    }
    worst = std::max(worst, diff / std::max(ref, 1e-30));
  }
  return worst;
}

struct Loaded {
  Graph graph;
  TensorMap inputs;
};

Result<Loaded> load_model(const std::string& name) {
  const nlohmann::json entry = manifest()[name];
  const fs::path dir = zoo_dir();
  OPFUSE_ASSIGN_OR_RETURN(Graph graph, load_onnx_file((dir / entry["file"].get<std::string>()).string()));
  Loaded out{std::move(graph), {}};
  for (const auto& in : entry["inputs"]) {
    OPFUSE_ASSIGN_OR_RETURN(Tensor t, read_npy((dir / in["file"].get<std::string>()).string()));
    out.inputs[in["name"].get<std::string>()] = std::move(t);
  }
  return out;
}

// Runs `passes` (or the O1 pipeline when empty) on a copy of `graph`, verifying after each.
Result<Graph> optimise(const Graph& graph, const std::vector<std::string>& passes, PassContext& ctx) {
  Graph g = graph.clone();
  PipelineOptions options;
  options.verify_after_each = true;
  if (!passes.empty()) options.passes = passes;
  OPFUSE_TRY(run_pipeline(g, OptLevel::kO1, options, ctx));
  return g;
}

constexpr double kTolerance = 1e-4;

// 1e-4, or the model's own tolerance where it declares a wider one (as ZooO3Test): an fp16
// model's O1 folds its Casts and computes in f32 where the original rounds to f16 after every op,
// and a quantized model's requantizations turn a last-bit difference into whole steps.
double tolerance_of(const std::string& model) {
  const nlohmann::json entry = manifest()[model];
  return entry.contains("tolerance") ? std::max(kTolerance, entry["tolerance"]["max"].get<double>()) : kTolerance;
}

// Families whose every BatchNormalization follows a Conv with a single consumer.
bool bn_all_after_conv(const std::string& model) {
  for (const char* family : {"resnet", "mobilenet", "efficientnet", "deeplab", "yolo"}) {
    if (model.find(family) != std::string::npos) return true;
  }
  return false;
}

class ZooPassesTest : public testing::TestWithParam<std::string> {};

TEST_P(ZooPassesTest, EachPassAndO1KeepOutputs) {
  auto model = load_model(GetParam());
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const Graph& original = model->graph;
  auto want = run_eager(original, model->inputs);
  ASSERT_TRUE(want.is_ok()) << want.status().message();
  const int nodes_before = static_cast<int>(original.num_nodes());
  const int bn_before = count_op(original, "BatchNormalization");

  for (const char* pass : {"dce", "constant_fold", "cse", "simplify", "fold_batchnorm", ""}) {
    SCOPED_TRACE(std::string(GetParam()) + " / " + (*pass ? pass : "O1"));
    PassContext ctx;
    auto g = optimise(original, *pass ? std::vector<std::string>{pass} : std::vector<std::string>{}, ctx);
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    auto got = run_eager(*g, model->inputs);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    std::string problem;
    const double diff = relative_diff(*got, *want, problem);
    EXPECT_LE(diff, tolerance_of(GetParam())) << problem;
    // Every O1 pass only removes nodes (a MatMul BN fold trades the BN for an Add), except that
    // a BN no anchor can take becomes a per-channel Mul+Add (one node more).
    int folded = 0, lowered = 0;
    for (const PassDecision& d : ctx.decisions) {
      if (!d.applied || d.pass != "fold_batchnorm") continue;
      (d.what.ends_with("as per-channel Mul+Add") ? lowered : folded) += 1;
    }
    const int nodes_after = static_cast<int>(g->num_nodes());
    EXPECT_LE(nodes_after, nodes_before + lowered);
    const int bn_after = count_op(*g, "BatchNormalization");
    if (std::string(pass) == "fold_batchnorm" || !*pass) {
      EXPECT_EQ(bn_after, bn_before - folded - lowered);
      if (*pass) {
        EXPECT_EQ(bn_after, 0) << "every inference BN with constant parameters is folded or lowered";
      }
      if (bn_all_after_conv(GetParam())) {
        EXPECT_EQ(lowered, 0) << "every BN of " << GetParam() << " follows a Conv";
        if (*pass) {
          EXPECT_EQ(nodes_after, nodes_before - bn_before) << "a Conv fold removes just the BN";
        }
      }
    } else {
      EXPECT_EQ(bn_after, bn_before) << pass << " must not touch BatchNormalization";
    }
    if (!*pass) {
      std::cout << "[ O1 ] " << GetParam() << ": " << nodes_before << " -> " << nodes_after
                << " nodes (BatchNormalization " << bn_before << " -> " << bn_after << ", rel diff "
                << diff << ")\n";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooPassesTest, testing::ValuesIn(models_in_tier()),
                         [](const testing::TestParamInfo<std::string>& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ZooPassesTest);

// bert_tiny computes its reshapes from Shape(input) because the batch dim is symbolic. Bound to
// 1, every Shape reads a static shape, so O1 folds all of them and the shape arithmetic after.
TEST(ZooPassesBertTest, O1FoldsAllShapeArithmeticWithBatchBound) {
  if (!manifest().contains("bert_tiny")) GTEST_SKIP() << "no bert_tiny in " << zoo_dir();
  auto model = load_model("bert_tiny");
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  Graph& graph = model->graph;
  ASSERT_GT(count_op(graph, "Shape"), 0) << "the test expects bert_tiny to compute shapes";
  for (Value* in : graph.inputs()) {
    for (Dim& d : *in->shape) {
      if (!d.is_known()) d = Dim(1);
    }
  }
  for (const auto& [name, t] : model->inputs) ASSERT_EQ(t.dim(0), 1) << name;
  auto want = run_eager(graph, model->inputs);
  ASSERT_TRUE(want.is_ok()) << want.status().message();

  PassContext ctx;
  auto g = optimise(graph, {}, ctx);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(count_op(*g, "Shape"), 0);
  EXPECT_EQ(count_op(*g, "Concat"), 0);
  EXPECT_EQ(count_op(*g, "Gather"), 0);
  for (const Node* node : g->nodes()) {
    if (node->op_type() != "Reshape") continue;
    EXPECT_NE(node->input(1)->constant(), nullptr) << node->describe() << " has a computed shape";
    ASSERT_TRUE(node->output(0)->shape.has_value());
    EXPECT_TRUE(is_static(*node->output(0)->shape)) << node->describe();
  }
  auto got = run_eager(*g, model->inputs);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  std::string problem;
  EXPECT_LE(relative_diff(*got, *want, problem), kTolerance) << problem;
  std::cout << "[ O1 ] bert_tiny (batch = 1): " << graph.num_nodes() << " -> " << g->num_nodes()
            << " nodes\n";
}

// lstm_cell_loop: PyTorch unrolls its nn.LSTMCell loop (8 steps from a zero state) into Gemm /
// Split / Sigmoid / Tanh chains; at O2 the lstm_cell pattern and merge_rnn_steps leave one LSTM
// over all 8 steps, the first one included (its h0 · R folded into a constant).
TEST(ZooPassesLstmTest, UnrolledCellLoopBecomesOneLstm) {
  if (!manifest().contains("lstm_cell_loop")) GTEST_SKIP() << "no lstm_cell_loop in " << zoo_dir();
  auto model = load_model("lstm_cell_loop");
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  auto want = run_eager(model->graph, model->inputs);
  ASSERT_TRUE(want.is_ok()) << want.status().message();
  Graph g = model->graph.clone();
  PassContext ctx;
  PipelineOptions options;
  options.verify_after_each = true;
  ASSERT_TRUE(run_pipeline(g, OptLevel::kO2, options, ctx).is_ok());
  EXPECT_EQ(count_op(g, "LSTM"), 1);
  EXPECT_EQ(count_op(g, "Split"), 0);
  EXPECT_EQ(count_op(g, "Sigmoid"), 0);
  auto got = run_eager(g, model->inputs);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  std::string problem;
  EXPECT_LE(relative_diff(*got, *want, problem), kTolerance) << problem;
}

}  // namespace
}  // namespace opfuse
