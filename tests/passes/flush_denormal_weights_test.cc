// flush_denormal_weights (passes/flush_denormal_weights.cc): denormal weights of products are
// zero from O1 up, including those BatchNorm folding makes, and the compiled graph still agrees
// with eager mode (which keeps them) at every level; switched off by name.
#include <cmath>
#include <limits>

#include "graph_test_util.h"
#include "ir/text_format.h"
#include "pipelines/pipeline.h"

namespace opfuse::testing_graphs {
namespace {

// Conv 1: channel 0 has only denormal weights (its output is of denormal size in eager mode),
// channel 1 a mix. BatchNorm's scale 1e-20 times conv 2's weights 1e-19 folds to 1e-39: the
// folded weights are denormal. The MatMul's weights hold one denormal next to normal ones.
const char* kDenormalWeights = R"(
graph @main opset 13 (%x: f32[1,2,4,4]) {
  %w1: f32[2,2,1,1] = const [3e-39, -5e-40, 0.5, 1e-41]
  %w2: f32[2,2,1,1] = const [1e-19, 1e-19, 2, -1]
  %scale: f32[2] = const [1e-20, 1]
  %shift: f32[2] = const [0, 0.25]
  %mean: f32[2] = const [0, 0]
  %var: f32[2] = const [1, 1]
  %w3: f32[4,3] = const [1, -2e-39, 0.5, 0.25, 2, -1, 1e-40, 3, 0.125, -0.5, 1, 2]
  %a = Conv(%x, %w1) {kernel_shape = [1, 1]}
  %b = Relu(%a)
  %c = Conv(%b, %w2) {kernel_shape = [1, 1]}
  %d = BatchNormalization(%c, %scale, %shift, %mean, %var) {epsilon = 0.0}
  %y = MatMul(%d, %w3)
  return %a, %y
}
)";

bool has_denormal_weight(const Graph& g) {
  for (const Node* n : g.nodes()) {
    for (const Value* v : n->inputs()) {
      const Tensor* t = v != nullptr ? v->constant() : nullptr;
      if (t == nullptr || t->dtype() != DType::kF32) continue;
      for (int64_t i = 0; i < t->numel(); ++i) {
        const float w = t->data<float>()[i];
        if (w != 0.0f && std::fabs(w) < std::numeric_limits<float>::min()) return true;
      }
    }
  }
  return false;
}

TEST(FlushDenormalWeights, FoldedAndImportedDenormalWeightsAreZeroFromO1) {
  auto g = parse_graph(kDenormalWeights);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_TRUE(has_denormal_weight(*g));
  PassContext ctx;
  ASSERT_TRUE(run_pipeline(*g, OptLevel::kO1, {}, ctx).is_ok());
  EXPECT_FALSE(has_denormal_weight(*g)) << print_graph(*g);
  int flushed = 0;
  for (const PassDecision& d : ctx.decisions) flushed += d.pass == "flush_denormal_weights" && d.applied;
  EXPECT_EQ(flushed, 3) << "conv 1, conv 2 after the BatchNorm fold, the MatMul";

  // The outputs move by denormal amounts only: within 1e-6 of eager mode at every level, and
  // conv 1's channel 0 (all its weights denormal) is zero once flushed.
  for (OptLevel level : {OptLevel::kO0, OptLevel::kO1, OptLevel::kO2, OptLevel::kO3}) {
    SCOPED_TRACE(opt_level_name(level));
    const CompiledRun run = compile_and_compare(kDenormalWeights, level);
    EXPECT_LE(run.diff, 1e-6);
  }
}

TEST(FlushDenormalWeights, SwitchedOffByNameKeepsThem) {
  PassContext ctx;
  const Graph g = pipeline_without_rule(kDenormalWeights, OptLevel::kO2, "flush_denormal_weights", ctx);
  EXPECT_TRUE(has_denormal_weight(g));
  for (const PassDecision& d : ctx.decisions) EXPECT_NE(d.pass, "flush_denormal_weights");
}

}  // namespace
}  // namespace opfuse::testing_graphs
