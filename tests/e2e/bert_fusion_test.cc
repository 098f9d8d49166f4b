// Kernel counts of the tiny BERT (2 layers, hidden 128, 4 heads, seq 32; ~/.cache/opfuse/zoo)
// at O2 (pattern/epilogue fusion, then region fusion), and agreement with eager mode.
//
// Per layer 9 kernels: 6 oneDNN FusedMatMuls whose epilogues took the elementwise work next to
// them (Q, K and V with their bias; attention output with its bias; FC1 with bias + erf-GELU;
// FC2 with its bias); 1 FusedAttention (cpu.attention: the head split of Q, K, V, Q.K^T, the
// 1/sqrt(d) scale, the mask add, Softmax, x V and the head merge; before it existed these were
// 4 Transposes, a FusedMatMul, a region and a MatMul); 2 LayerNorms (the decomposed LayerNorm
// becomes LayerNormalization, pattern layer_norm; the residual Add before it went into the
// product's epilogue) on hwy.layer_norm. Plus the mask preparation (Cast on i64, then a region
// for (1 - mask) * -10000): 20 in all (95 at O1).
#include <gtest/gtest.h>

#include <filesystem>

#include "core/random.h"
#include "frontend/onnx/importer.h"
#include "pipelines/pipeline.h"
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
  EXPECT_EQ((*plan)->kernels_per_run(), 20u);
  int regions = 0, leftovers = 0, attentions = 0, matmuls = 0, layer_norms = 0;
  for (const Node* n : (*plan)->graph().nodes()) {
    regions += n->op_type() == "FusedRegion";
    layer_norms += n->op_type() == "LayerNormalization" || n->op_type() == "SkipLayerNormalization";
    attentions += n->op_type() == "FusedAttention";
    matmuls += n->op_type() == "FusedMatMul";
    for (const char* op : {"Transpose", "MatMul"}) leftovers += n->op_type() == op;
    for (const char* op : {"Softmax", "ReduceMean", "Erf", "Pow", "Sqrt", "Div"}) leftovers += n->op_type() == op;
  }
  EXPECT_EQ(regions, 1);  // the mask's
  EXPECT_EQ(layer_norms, 4);
  EXPECT_EQ(attentions, 2);
  EXPECT_EQ(matmuls, 12);
  EXPECT_EQ(leftovers, 0) << "LayerNorm pieces in LayerNormalization, GELU in the epilogue, Softmax and the head transposes inside attention";
  auto got = session->run(inputs);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_LE(max_relative_difference(*got, *want), 1e-4);
}

}  // namespace
}  // namespace opfuse
