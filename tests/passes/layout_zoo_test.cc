// Structure of the O3 layout on the tiny ResNet: every conv runs blocked, the image is read
// plain by the first conv (no ToBlocked), and the only reorder back is before the classifier's
// Flatten; the residual Adds were fused into their convs at O2, so nothing else is plain.
#include <gtest/gtest.h>

#include <filesystem>

#include "frontend/onnx/importer.h"
#include "passes/pass.h"
#include "pipelines/pipeline.h"
#include "testing/zoo.h"
#include "graph_test_util.h"

namespace opfuse {
namespace {

using testing_graphs::count_op;

TEST(LayoutZooTest, ResnetTinyIsBlockedEndToEnd) {
  const auto manifest = testing_zoo::load_manifest();
  if (!manifest.contains("resnet_tiny")) GTEST_SKIP() << "no resnet_tiny in " << testing_zoo::zoo_dir();
  const std::filesystem::path file =
      std::filesystem::path(testing_zoo::zoo_dir()) / manifest["resnet_tiny"]["file"].get<std::string>();
  auto g = load_onnx_file(file.string());
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  PipelineOptions options;
  options.verify_after_each = true;
  PassContext ctx;
  ASSERT_TRUE(run_pipeline(*g, OptLevel::kO3, options, ctx).is_ok());
  EXPECT_EQ(count_op(*g, "Conv") + count_op(*g, "FusedConv"), 0);
  EXPECT_EQ(count_op(*g, "BlockedConv"), 17);
  EXPECT_EQ(count_op(*g, "ToBlocked"), 0);
  EXPECT_EQ(count_op(*g, "FromBlocked"), 1);
  EXPECT_EQ(count_op(*g, "GlobalAveragePool"), 0) << "runs blocked as an AveragePool";
  for (const Node* node : g->nodes()) {
    if (node->op_type() == "FromBlocked") {
      EXPECT_EQ(node->output(0)->uses()[0].node->op_type(), "Flatten");
    }
  }
}

}  // namespace
}  // namespace opfuse
