// Kernel counts of the tiny BERT (2 layers, hidden 128, 4 heads, seq 32; ~/.cache/opfuse/zoo)
// at O2 (pattern/epilogue fusion, then region fusion), and agreement with eager mode.
//
// Per layer 16 kernels: 7 oneDNN FusedMatMuls whose epilogues took the elementwise work next to
// them (Q, K and V with their bias; Q.K^T with the 1/sqrt(d) scale and the mask add; attention
// output with its bias; FC1 with bias + erf-GELU; FC2 with its bias), 1 plain MatMul
// (probabilities x V); the dedicated Softmax kernel (expand_to_primitives keeps it: it beats the
// generated one, docs/benchmarks.md); 2 generated regions: residual Add + LayerNorm (the export
// spells LayerNorm in primitives) twice; and the 4 head transposes (Q, K, V to heads and the
// context back: a transpose alone saves no traffic). Plus the mask preparation (Cast on i64,
// then a region for (1 - mask) * -10000): 34 in all (95 at O1).
#include <gtest/gtest.h>

#include <filesystem>

#include "core/random.h"
#include "frontend/onnx/importer.h"
#include "runtime/compare.h"
#include "runtime/compiled_plan.h"
#include "runtime/session.h"
#include "testing/zoo.h"

namespace opfuse {
namespace {

TEST(BertFusionTest, TinyBertCompilesToStatedKernelCount) {
  const auto path = testing_zoo::zoo_dir() / "bert_tiny.onnx";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no zoo model " << path;
  auto model = load_onnx_file(path.string());
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  Tensor x = Tensor::zeros(DType::kF32, {1, 32, 128}).value();
  Random rng(3);
  fill_uniform(x, rng, -1, 1);
  Tensor mask = Tensor::zeros(DType::kI64, {1, 32}).value();
  for (int i = 0; i < 24; ++i) mask.data<int64_t>()[i] = 1;  // the last 8 positions are padding
  const TensorMap inputs = {{"input", x}, {"attention_mask", mask}};

  SessionOptions eager_options;
  eager_options.mode = ExecutionMode::kEager;
  auto eager = Session::create(model->clone(), eager_options);
  ASSERT_TRUE(eager.is_ok());
  auto want = eager->run(inputs);
  ASSERT_TRUE(want.is_ok()) << want.status().message();

  SessionOptions options;
  options.level = OptLevel::kO2;
  auto session = Session::create(std::move(*model), options);
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  auto plan = session->plan_for(inputs);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  EXPECT_EQ((*plan)->kernels_per_run(), 34u);
  int regions = 0, leftovers = 0, softmax = 0;
  for (const Node* n : (*plan)->graph().nodes()) {
    regions += n->op_type() == "FusedRegion";
    softmax += n->op_type() == "Softmax";
    for (const char* op : {"ReduceMean", "Erf", "Pow", "Sqrt", "Div"}) leftovers += n->op_type() == op;
  }
  EXPECT_EQ(regions, 5);
  EXPECT_EQ(softmax, 2) << "one dedicated Softmax per layer";
  EXPECT_EQ(leftovers, 0) << "LayerNorm and GELU pieces must all be inside regions";
  auto got = session->run(inputs);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_LE(max_relative_difference(*got, *want), 1e-4);
}

}  // namespace
}  // namespace opfuse
