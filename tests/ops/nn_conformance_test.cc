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
#include "passes/infer_shapes.h"

namespace opfuse {
namespace {

namespace fs = std::filesystem;
const char* const kDataRoot = "/usr/share/libonnx-testdata/data";

const std::set<std::string>& nn_op_names() {
  static const std::set<std::string> names = {
      "Conv",    "ConvTranspose",     "MaxPool",       "AveragePool", "GlobalAveragePool",
      "GlobalMaxPool", "BatchNormalization", "MatMul", "Gemm"};
  return names;
}

template <typename Proto>
bool read_proto(const fs::path& path, Proto& proto) {
  std::ifstream in(path, std::ios::binary);
  return in && proto.ParseFromIstream(&in);
}

Tensor tensor_from_proto(const onnx::TensorProto& tp) {
  std::vector<int64_t> dims(tp.dims().begin(), tp.dims().end());
  DType dtype = DType::kUndefined;
  switch (tp.data_type()) {
    case onnx::TensorProto::FLOAT: dtype = DType::kF32; break;
    case onnx::TensorProto::DOUBLE: dtype = DType::kF64; break;
    case onnx::TensorProto::FLOAT16: dtype = DType::kF16; break;
    case onnx::TensorProto::UINT8: dtype = DType::kU8; break;
    case onnx::TensorProto::INT8: dtype = DType::kI8; break;
    case onnx::TensorProto::INT64: dtype = DType::kI64; break;
    default: return Tensor();
  }
  Tensor t = Tensor::zeros(dtype, dims).value();
  if (!tp.raw_data().empty()) {
    if (tp.raw_data().size() != t.nbytes()) return Tensor();
    std::memcpy(t.raw_data(), tp.raw_data().data(), t.nbytes());
  } else if (dtype == DType::kF32) {
    for (int i = 0; i < tp.float_data_size(); ++i) t.data<float>()[i] = tp.float_data(i);
  } else if (dtype == DType::kF64) {
    for (int i = 0; i < tp.double_data_size(); ++i) t.data<double>()[i] = tp.double_data(i);
  } else if (dtype == DType::kI64) {
    for (int i = 0; i < tp.int64_data_size(); ++i) t.data<int64_t>()[i] = tp.int64_data(i);
  } else {
    for (int i = 0; i < tp.int32_data_size(); ++i) t.set_double(i, tp.int32_data(i));
  }
  return t;
}

Attributes attributes_from_proto(const onnx::NodeProto& node) {
  Attributes attrs;
  for (const auto& a : node.attribute()) {
    switch (a.type()) {
      case onnx::AttributeProto::INT: attrs[a.name()] = static_cast<int64_t>(a.i()); break;
      case onnx::AttributeProto::FLOAT: attrs[a.name()] = a.f(); break;
      case onnx::AttributeProto::STRING: attrs[a.name()] = a.s(); break;
      case onnx::AttributeProto::INTS:
        attrs[a.name()] = std::vector<int64_t>(a.ints().begin(), a.ints().end());
        break;
      case onnx::AttributeProto::FLOATS:
        attrs[a.name()] = std::vector<float>(a.floats().begin(), a.floats().end());
        break;
      default: break;
    }
  }
  return attrs;
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
    Tensor t = tensor_from_proto(init);
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
    Tensor t = tensor_from_proto(tp);
    ASSERT_TRUE(t.defined()) << in.name();
    g.add_input(in.name(), t.dtype(), t.shape());
    feeds[in.name()] = t;
  }
  const onnx::NodeProto& np = gp.node(0);
  std::vector<Value*> inputs;
  for (const auto& name : np.input()) inputs.push_back(name.empty() ? nullptr : g.find_value(name));
  std::vector<std::string> outputs(np.output().begin(), np.output().end());
  auto node = g.add_node(np.op_type(), inputs, outputs, attributes_from_proto(np), np.name());
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
    const Tensor expected = tensor_from_proto(tp);
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
