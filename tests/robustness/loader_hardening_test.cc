// The ONNX loader against hostile files (tests/robustness/hostile_models.h): every case is a user
// error naming the culprit, raised before any large allocation; and the weight caps of
// OnnxLoadOptions.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/tensor.h"
#include "frontend/onnx/importer.h"
#include "robustness/hostile_models.h"

namespace opfuse {
namespace {

namespace fs = std::filesystem;

long peak_rss_kb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

void expect_user_error(const Status& s, const std::vector<std::string>& parts) {
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.kind(), ErrorKind::kUser) << s.message();
  for (const std::string& p : parts) {
    EXPECT_NE(s.message().find(p), std::string::npos) << "'" << p << "' not in: " << s.message();
  }
}

class LoaderHardeningTest : public testing::TestWithParam<hostile::Case> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / str_cat("opfuse_hostile_", getpid(), "_",
                                               testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_P(LoaderHardeningTest, IsAUserErrorBeforeAnyLargeAllocation) {
  const hostile::Case& c = GetParam();
  const fs::path model = c.write(dir_);
  const size_t cap = max_allocation_bytes();
  // A 1 MiB cap: had the loader allocated a claimed size, the cap would be the complaint.
  set_max_allocation_bytes(size_t{1} << 20);
  const long rss_before = peak_rss_kb();
  Result<Graph> graph = load_onnx_file(model.string());
  const long rss_after = peak_rss_kb();
  set_max_allocation_bytes(cap);
  expect_user_error(graph.status(), c.expect);
  EXPECT_EQ(graph.status().message().find("allocation cap"), std::string::npos)
      << graph.status().message();
  EXPECT_NE(graph.status().message().find(model.string()), std::string::npos)
      << "the error names the file: " << graph.status().message();
  EXPECT_LT(rss_after - rss_before, 64 * 1024) << "peak RSS grew by " << rss_after - rss_before << " KiB";
}

INSTANTIATE_TEST_SUITE_P(Hostile, LoaderHardeningTest, testing::ValuesIn(hostile::cases()),
                         [](const testing::TestParamInfo<hostile::Case>& info) { return info.param.name; });

class LoaderLimitsTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / str_cat("opfuse_limits_", getpid(), "_",
                                               testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// The same model is fine without caps: the hostile cases fail for the reason they name.
TEST_F(LoaderLimitsTest, TheUnbrokenModelLoadsAndSymlinksInsideTheDirectoryAreFollowed) {
  ASSERT_TRUE(load_onnx_file(hostile::write_model(dir_, hostile::add_model()).string()).is_ok());

  // model/data -> model/real: a link that stays inside the model directory is fine.
  fs::path model = hostile::write_model(dir_, hostile::external_model("data/w.bin"));
  fs::create_directories(dir_ / "model" / "real");
  float w[4] = {1.5f, -2.0f, 3.0f, 0.25f};
  hostile::write_bytes(dir_ / "model" / "real" / "w.bin", std::string(reinterpret_cast<char*>(w), 16));
  fs::create_directory_symlink("real", dir_ / "model" / "data");
  Result<Graph> g = load_onnx_file(model.string());
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const Value* wv = g->find_value("w");
  ASSERT_TRUE(wv && wv->is_constant());
  EXPECT_EQ(wv->constant()->to_float_vector(), (std::vector<float>{1.5f, -2.0f, 3.0f, 0.25f}));
}

// A model that is itself reached through a symlinked directory keeps working: containment is
// checked against the (resolved) directory the model path names.
TEST_F(LoaderLimitsTest, ModelDirectoryReachedThroughASymlinkStillLoadsItsExternalData) {
  hostile::write_model(dir_, hostile::external_model("w.bin"));
  hostile::write_bytes(dir_ / "model" / "w.bin", std::string(16, '\0'));
  fs::create_directory_symlink(dir_ / "model", dir_ / "alias");
  Result<Graph> g = load_onnx_file((dir_ / "alias" / "model.onnx").string());
  EXPECT_TRUE(g.is_ok()) << g.status().message();
}

std::string bytes_of(const onnx::ModelProto& m) { return hostile::serialize(m); }

TEST_F(LoaderLimitsTest, WeightCapCoversInitializersConstantsAndTensorAttributes) {
  // add_model: one initializer of 16 bytes.
  OnnxLoadOptions options;
  options.max_weight_bytes = 16;
  EXPECT_TRUE(load_onnx_bytes(bytes_of(hostile::add_model()), "", options).is_ok());
  options.max_weight_bytes = 15;
  expect_user_error(load_onnx_bytes(bytes_of(hostile::add_model()), "", options).status(),
                    {"initializer 'w'", "16 bytes", "cap of 15"});

  // A second 16-byte weight, as a Constant node: 32 bytes in all.
  onnx::ModelProto m = hostile::add_model();
  auto* c = hostile::add_node(m, "Constant", {}, {"k"}, "konst");
  auto* a = c->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  a->mutable_t()->add_dims(4);
  for (int i = 0; i < 4; ++i) a->mutable_t()->add_float_data(static_cast<float>(i));
  m.mutable_graph()->mutable_node(1)->set_input(0, "k");
  options.max_weight_bytes = 32;
  EXPECT_TRUE(load_onnx_bytes(bytes_of(m), "", options).is_ok());
  options.max_weight_bytes = 31;
  expect_user_error(load_onnx_bytes(bytes_of(m), "", options).status(),
                    {"node 'konst'", "attribute 'value'", "cap of 31", "16 bytes read before"});
}

TEST_F(LoaderLimitsTest, TensorCapRefusesOneLargeTensorBeforeAllocating) {
  onnx::ModelProto m = hostile::add_model();
  testing_onnx::add_raw_initializer(m, "large", onnx::TensorProto::FLOAT, {1024}, std::string(4096, '\0'));
  OnnxLoadOptions options;
  options.max_tensor_bytes = 4096;
  EXPECT_TRUE(load_onnx_bytes(bytes_of(m), "", options).is_ok());
  options.max_tensor_bytes = 4095;
  expect_user_error(load_onnx_bytes(bytes_of(m), "", options).status(),
                    {"initializer 'large'", "4096 bytes", "cap of 4095", "one tensor"});
}

}  // namespace
}  // namespace opfuse
