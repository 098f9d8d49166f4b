// Kernels per run at O0..O3 on ResNet, derived from the imported model's op histogram (not from
// the passes): O0 runs every node but views, O1 folds every BatchNormalization into its Conv,
// O2 leaves one kernel per Conv (BN folded, every Relu and every residual Add inside the conv
// kernel) plus the pooling and classifier nodes. resnet_tiny runs in CI; for the full resnet50
// (53 Conv, 53 BN, 49 Relu, 16 Add, MaxPool, GlobalAveragePool, Flatten, Gemm) the same rule
// gives O0 174, O1 121, O2 56, O3 57 (O2 plus one reorder; checked by hand with `opfuse info resnet50.onnx --level O2`;
// set OPFUSE_ZOO_TIER=full to run this test on it).
#include <gtest/gtest.h>

#include <map>

#include "core/npy.h"
#include "frontend/onnx/importer.h"
#include "pipelines/pipeline.h"
#include "runtime/compiled_plan.h"
#include "runtime/session.h"
#include "testing/zoo.h"

namespace opfuse {
namespace {

struct Plan {
  size_t kernels = 0;
  std::map<std::string, int> ops_run;  // op type of every step
};

Result<Plan> plan_at(const std::string& path, const TensorMap& inputs, OptLevel level) {
  OPFUSE_ASSIGN_OR_RETURN(Graph graph, load_onnx_file(path));
  SessionOptions options;
  options.mode = ExecutionMode::kGraph;
  options.level = level;
  // Counts assume the default, estimated layout choice (deterministic), not measured choices.
  OPFUSE_ASSIGN_OR_RETURN(Session session, Session::create(std::move(graph), options));
  OPFUSE_ASSIGN_OR_RETURN(auto plan, session.plan_for(inputs));
  Plan out;
  out.kernels = plan->kernels_per_run();
  for (const std::string& step : plan->describe_steps()) ++out.ops_run[step.substr(0, step.find(' '))];
  return out;
}

TEST(KernelCountTest, ResnetConvBnReluAndResidualAddReluAreOneKernel) {
  const std::string name = testing_zoo::zoo_tier() == "full" ? "resnet50" : "resnet_tiny";
  const auto manifest = testing_zoo::load_manifest();
  if (!manifest.contains(name)) GTEST_SKIP() << "zoo model " << name << " not available";
  const auto dir = testing_zoo::zoo_dir();
  const std::string path = (dir / manifest[name]["file"].get<std::string>()).string();
  TensorMap inputs;
  for (const auto& in : manifest[name]["inputs"]) {
    inputs[in["name"].get<std::string>()] = read_npy((dir / in["file"].get<std::string>()).string()).value();
  }
  auto imported = load_onnx_file(path);
  ASSERT_TRUE(imported.is_ok()) << imported.status().message();
  std::map<std::string, int> ops;
  for (const Node* n : imported->nodes()) ++ops[n->op_type()];
  ASSERT_GT(ops["Add"], 0);
  ASSERT_EQ(ops["BatchNormalization"], ops["Conv"]);
  const int views = ops["Flatten"] + ops["Reshape"];
  const int all = static_cast<int>(imported->num_nodes()) - views;
  const int others = ops["MaxPool"] + ops["GlobalAveragePool"] + ops["Gemm"];
  ASSERT_EQ(all, ops["Conv"] * 2 + ops["Relu"] + ops["Add"] + others) << "unexpected ops in " << name;

  const size_t want[] = {static_cast<size_t>(all), static_cast<size_t>(all - ops["BatchNormalization"]),
                         static_cast<size_t>(ops["Conv"] + others)};
  const OptLevel levels[] = {OptLevel::kO0, OptLevel::kO1, OptLevel::kO2};
  for (int i = 0; i < 3; ++i) {
    auto plan = plan_at(path, inputs, levels[i]);
    ASSERT_TRUE(plan.is_ok()) << plan.status().message();
    EXPECT_EQ(plan->kernels, want[i]) << opt_level_name(levels[i]);
  }
  // O2 and O3: no Relu, Add or BN runs as a kernel of its own.
  for (OptLevel level : {OptLevel::kO2, OptLevel::kO3}) {
    auto plan = plan_at(path, inputs, level);
    ASSERT_TRUE(plan.is_ok()) << plan.status().message();
    EXPECT_EQ(plan->ops_run["Relu"] + plan->ops_run["Add"] + plan->ops_run["BatchNormalization"], 0)
        << opt_level_name(level);
    if (level == OptLevel::kO2) {
      // Every conv with an activation or residual is fused; the downsample convs of the residual
      // branches (no activation of their own, their Add taken by the main branch) stay plain.
      EXPECT_EQ(plan->ops_run["FusedConv"] + plan->ops_run["Conv"], ops["Conv"]);
      // Each Relu follows a conv (absorbed there) or an Add (absorbed with the Add into the conv
      // that took it, which has no Relu of its own): one FusedConv per Relu.
      EXPECT_EQ(plan->ops_run["FusedConv"], ops["Relu"]);
    } else {
      // O3: every conv (fused or not) is a BlockedConv; the first reads the plain image directly
      // on nChw16c, and one reorder back to plain feeds Flatten. ResNet-50's later convs run
      // channels-last (its 3x3 convs are faster there), behind one Reblock after the max pool;
      // the tiny model's convs are too small to pay for it.
      const int reblocks = name == "resnet50" ? 1 : 0;
      EXPECT_EQ(plan->ops_run["BlockedConv"], ops["Conv"]);
      EXPECT_EQ(plan->ops_run["ToBlocked"], 0);
      EXPECT_EQ(plan->ops_run["Reblock"], reblocks);
      EXPECT_EQ(plan->ops_run["FromBlocked"], 1);
      EXPECT_EQ(plan->kernels, static_cast<size_t>(ops["Conv"] + others + 1 + reblocks));
    }
  }
}

}  // namespace
}  // namespace opfuse
