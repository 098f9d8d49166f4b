// Custom-op plugins: the example plugin (examples/custom_op_plugin, built with the tests) loads,
// its ops run inside an ONNX model (in-process and through `opfuse run --custom-op-lib`), and
// broken plugins fail with errors naming the problem.
#include <gtest/gtest.h>
#include <unistd.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>

#include "core/npy.h"
#include "frontend/onnx/importer.h"
#include "ops/registry.h"
#include "pipelines/pipeline.h"
#include "plugin/plugin_loader.h"
#include "runtime/session.h"
#include "testing/cli_runner.h"

namespace opfuse {
namespace {

namespace fs = std::filesystem;

std::string plugin(const std::string& name) {
  return (fs::path(OPFUSE_PLUGIN_DIR) / ("lib" + name + ".so")).string();
}

// z = CumulativeSum(SquaredDifference(x, y) + x; reverse) with x, y: f32[2, 3].
std::string model_bytes(int64_t reverse) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* ex = m.add_opset_import();
  ex->set_domain("com.example");
  ex->set_version(1);
  auto* g = m.mutable_graph();
  g->set_name("plugin_model");
  for (auto [info, name] : {std::pair{g->add_input(), "x"}, std::pair{g->add_input(), "y"},
                            std::pair{g->add_output(), "z"}}) {
    info->set_name(name);
    auto* t = info->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(2);
    t->mutable_shape()->add_dim()->set_dim_value(3);
  }
  auto node = [&](const std::string& op, std::vector<std::string> in, const std::string& out,
                  const std::string& domain) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_domain(domain);
    n->set_name(out + "_node");
    for (auto& i : in) n->add_input(i);
    n->add_output(out);
    return n;
  };
  node("SquaredDifference", {"x", "y"}, "d", "com.example");
  node("Add", {"d", "x"}, "s", "");
  auto* cs = node("CumulativeSum", {"s"}, "z", "com.example");
  auto* a = cs->add_attribute();
  a->set_name("reverse");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(reverse);
  return m.SerializeAsString();
}

const std::vector<float> kX = {1, 2, 3, -1, 0, 0.5f};
const std::vector<float> kY = {0, 4, 1, 1, -2, 0.5f};
// s = (x - y)^2 + x = [2, 6, 7, 3, 4, 0.5]; forward running sums per row, and reversed.
const std::vector<double> kForward = {2, 8, 15, 3, 7, 7.5};
const std::vector<double> kReverse = {15, 13, 7, 7.5, 4.5, 0.5};

TEST(PluginTest, ExamplePluginOpsRunInAnOnnxModel) {
  auto loaded = load_custom_op_library(plugin("opfuse_example_plugin"));
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  EXPECT_EQ(loaded->domain, "com.example");
  EXPECT_EQ(loaded->ops, (std::vector<std::string>{"SquaredDifference", "CumulativeSum"}));
  // Loading again is a no-op, not a duplicate.
  EXPECT_TRUE(load_custom_op_library(plugin("opfuse_example_plugin")).is_ok());
  const OpDef* sq = OpRegistry::global().find("com.example", "SquaredDifference");
  ASSERT_NE(sq, nullptr);
  EXPECT_EQ(sq->kind, FusionKind::kBroadcast);
  EXPECT_EQ(OpRegistry::global().find("com.example", "CumulativeSum")->kind, FusionKind::kOpaque);

  for (int64_t reverse : {0, 1}) {
    auto g = load_onnx_bytes(model_bytes(reverse), "", {}, "plugin_model.onnx");
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kGraph}) {
      SessionOptions o;
      o.mode = mode;
      o.level = OptLevel::kO2;
      auto s = Session::create(g->clone(), o);
      ASSERT_TRUE(s.is_ok()) << s.status().message();
      auto out = s->run({{"x", Tensor::from_vector<float>({2, 3}, kX)}, {"y", Tensor::from_vector<float>({2, 3}, kY)}});
      ASSERT_TRUE(out.is_ok()) << out.status().message();
      const auto& want = reverse ? kReverse : kForward;
      for (int i = 0; i < 6; ++i) EXPECT_NEAR(out->at("z").get_double(i), want[i], 1e-6) << i;
    }
  }
}

TEST(PluginTest, BrokenPluginsFailWithNamedErrors) {
  auto missing = load_custom_op_library("/nonexistent/libnothing.so");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("does not exist"), std::string::npos);

  auto abi = load_custom_op_library(plugin("opfuse_bad_abi_plugin"));
  ASSERT_FALSE(abi.is_ok());
  EXPECT_NE(abi.status().message().find("ABI version 99"), std::string::npos) << abi.status().message();

  auto no_info = load_custom_op_library(plugin("opfuse_no_info_plugin"));
  ASSERT_FALSE(no_info.is_ok());
  EXPECT_NE(no_info.status().message().find("does not export opfuse_plugin_info"), std::string::npos)
      << no_info.status().message();

  ASSERT_TRUE(load_custom_op_library(plugin("opfuse_example_plugin")).is_ok());
  auto dup = load_custom_op_library(plugin("opfuse_duplicate_plugin"));
  ASSERT_FALSE(dup.is_ok());
  EXPECT_NE(dup.status().message().find("SquaredDifference (domain com.example) is already registered"),
            std::string::npos) << dup.status().message();

  // A file that is not a shared library: dlopen's own message is passed on.
  const fs::path junk = fs::temp_directory_path() / str_cat("opfuse_plugin_test_junk_", getpid(), ".so");
  std::ofstream(junk) << "not an ELF file";
  auto bad = load_custom_op_library(junk.string());
  fs::remove(junk);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("dlopen failed"), std::string::npos) << bad.status().message();
}

using testing_cli::CommandResult;
using testing_cli::run_cli;

TEST(PluginTest, CliLoadsThePluginForTheModel) {
  const fs::path dir = fs::temp_directory_path() / str_cat("opfuse_plugin_cli_test_", getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "model.onnx", std::ios::binary) << model_bytes(0);
  ASSERT_TRUE(write_npy((dir / "x.npy").string(), Tensor::from_vector<float>({2, 3}, kX)).is_ok());
  ASSERT_TRUE(write_npy((dir / "y.npy").string(), Tensor::from_vector<float>({2, 3}, kY)).is_ok());
  const std::string model = (dir / "model.onnx").string();
  const std::string inputs = str_cat(" --input x=", (dir / "x.npy").string(), " --input y=", (dir / "y.npy").string());

  // Without the plugin the op is unknown, and the message says which.
  CommandResult without = run_cli("run " + model + inputs);
  EXPECT_EQ(without.exit_code, 1) << without.output;
  EXPECT_NE(without.output.find("SquaredDifference"), std::string::npos) << without.output;

  CommandResult with = run_cli("run " + model + inputs + " --level O2 --custom-op-lib " +
                               plugin("opfuse_example_plugin") + " --output-dir " + (dir / "out").string());
  ASSERT_EQ(with.exit_code, 0) << with.output;
  auto z = read_npy((dir / "out" / "z.npy").string());
  ASSERT_TRUE(z.is_ok()) << z.status().message();
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(z->get_double(i), kForward[i], 1e-6) << i;

  CommandResult info = run_cli("info " + model + " --custom-op-lib " + plugin("opfuse_example_plugin"));
  EXPECT_EQ(info.exit_code, 0) << info.output;

  CommandResult bad = run_cli("info " + model + " --custom-op-lib " + plugin("opfuse_bad_abi_plugin"));
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("ABI version 99"), std::string::npos) << bad.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace opfuse
