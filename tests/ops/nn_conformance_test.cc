// Runs the ONNX backend conformance cases of the nn ops (Conv, ConvTranspose, pools, BatchNorm,
// MatMul, Gemm) through shape inference and the reference kernels. The expected outputs come
// from the ONNX test data (numpy / PyTorch), not from opfuse. A tiny single-node loader lives
// here so these tests do not depend on the (separately developed) importer.
#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "ops/reference.h"
#include "ops/infer_shapes.h"
#include "testing/onnx_files.h"

namespace opfuse {
namespace {

namespace fs = std::filesystem;
using testing_onnx_files::attributes_from;
using testing_onnx_files::read_proto;
using testing_onnx_files::tensor_from;
const char* const kDataRoot = "/usr/share/libonnx-testdata/data";

const std::set<std::string>& nn_op_names() {
  static const std::set<std::string> names = {
      "Conv",    "ConvTranspose",     "MaxPool",       "AveragePool", "GlobalAveragePool",
      "GlobalMaxPool", "BatchNormalization", "MatMul", "Gemm"};
  return names;
}

// Single-node test directories whose op is one of ours.
std::vector<std::string> find_cases() {
  std::vector<std::string> cases;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator"}) {
    const fs::path dir = fs::path(kDataRoot) / suite;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      onnx::ModelProto model;
      if (!read_proto(entry.path() / "model.onnx", model)) continue;
      if (model.graph().node_size() != 1) continue;
      if (!nn_op_names().count(model.graph().node(0).op_type())) continue;
      cases.push_back(std::string(suite) + "/" + entry.path().filename().string());
    }
  }
  std::sort(cases.begin(), cases.end());
  return cases;
}

class NnConformanceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(NnConformanceTest, MatchesOnnxTestData) {
  const fs::path dir = fs::path(kDataRoot) / GetParam();
  onnx::ModelProto model;
  ASSERT_TRUE(read_proto(dir / "model.onnx", model));
  const onnx::GraphProto& gp = model.graph();
  const fs::path data = dir / "test_data_set_0";

  Graph g;
  std::set<std::string> initializers;
  for (const auto& init : gp.initializer()) {
    Tensor t = tensor_from(init).value();
    ASSERT_TRUE(t.defined()) << init.name();
    g.add_constant(init.name(), t);
    initializers.insert(init.name());
  }
  std::map<std::string, Tensor> feeds;
  int input_index = 0;
  for (const auto& in : gp.input()) {
    if (initializers.count(in.name())) continue;
    onnx::TensorProto tp;
    ASSERT_TRUE(read_proto(data / str_cat("input_", input_index++, ".pb"), tp)) << in.name();
    Tensor t = tensor_from(tp).value();
    ASSERT_TRUE(t.defined()) << in.name();
    g.add_input(in.name(), t.dtype(), t.shape());
    feeds[in.name()] = t;
  }
  const onnx::NodeProto& np = gp.node(0);
  std::vector<Value*> inputs;
  for (const auto& name : np.input()) inputs.push_back(name.empty() ? nullptr : g.find_value(name));
  std::vector<std::string> outputs(np.output().begin(), np.output().end());
  auto node = g.add_node(np.op_type(), inputs, outputs, attributes_from(np).value(), np.name());
  ASSERT_TRUE(node.is_ok()) << node.status().message();

  const Status inferred = infer_shapes(g);
  if (GetParam().find("training_mode") != std::string::npos) {
    // Training-mode BatchNormalization is unsupported by design: a user error naming the node.
    ASSERT_FALSE(inferred.is_ok());
    EXPECT_EQ(inferred.kind(), ErrorKind::kUser);
    EXPECT_NE(inferred.message().find("training_mode"), std::string::npos) << inferred.message();
    EXPECT_NE(inferred.message().find((*node)->describe()), std::string::npos);
    return;
  }
  ASSERT_TRUE(inferred.is_ok()) << inferred.message();

  std::vector<const Tensor*> args;
  for (Value* v : (*node)->inputs()) {
    args.push_back(v == nullptr ? nullptr : v->is_constant() ? v->constant() : &feeds.at(v->name()));
  }
  auto result = run_reference(**node, args);
  ASSERT_TRUE(result.is_ok()) << result.status().message();
  for (size_t i = 0; i < outputs.size(); ++i) {
    onnx::TensorProto tp;
    ASSERT_TRUE(read_proto(data / str_cat("output_", i, ".pb"), tp));
    const Tensor expected = tensor_from(tp).value();
    const Tensor& actual = (*result)[i];
    // Inference must have predicted exactly the shape the kernel produced.
    EXPECT_EQ(shape_to_string(*(*node)->output(i)->shape), dims_to_string(expected.dims()));
    ASSERT_EQ(actual.type_string(), expected.type_string()) << "output " << i;
    int bad = 0;
    for (int64_t j = 0; j < expected.numel() && bad < 5; ++j) {
      const double want = expected.get_double(j), got = actual.get_double(j);
      if (!(std::abs(got - want) <= 1e-5 + 1e-4 * std::abs(want))) {
        ADD_FAILURE() << "output " << i << " element " << j << ": got " << got << ", want " << want;
        ++bad;
      }
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(OnnxData, NnConformanceTest, ::testing::ValuesIn(find_cases()), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(NnConformanceTest);

// Guards against the suite above silently finding nothing on a machine that has the data.
TEST(NnConformanceCoverage, FindsTheOnnxCases) {
  if (!fs::is_directory(fs::path(kDataRoot) / "node")) GTEST_SKIP() << "no ONNX test data";
  const auto cases = find_cases();
  EXPECT_GE(cases.size(), 100u);
  for (const char* must : {"node/test_conv_with_autopad_same", "node/test_convtranspose_3d",
                           "node/test_maxpool_with_argmax_2d_precomputed_strides",
                           "pytorch-converted/test_Conv2d_depthwise_with_multiplier",
                           "node/test_gemm_all_attributes", "node/test_matmul_4d"}) {
    EXPECT_NE(std::find(cases.begin(), cases.end(), must), cases.end()) << must;
  }
}

}  // namespace
}  // namespace opfuse
