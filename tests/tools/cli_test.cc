// The `opfuse` binary: exit codes (0 ok, 1 user error, 2 internal) and messages naming the
// culprit, for each command.
#include <gtest/gtest.h>
#include <unistd.h>
#include <onnx/onnx_pb.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "core/npy.h"
#include "frontend/onnx/exporter.h"
#include "ir/text_format.h"
#include "testing/cli_runner.h"

namespace opfuse {
namespace {

namespace fs = std::filesystem;

using testing_cli::CommandResult;
using testing_cli::run_cli;

class CliTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           str_cat("opfuse_cli_test_", getpid(), "_", testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // y = Relu(x) with x: f32[2,3]; or an op opfuse does not know when `op` says so.
  std::string write_model(const std::string& name, const std::string& op = "Relu") {
    onnx::ModelProto model;
    model.set_ir_version(8);
    auto* opset = model.add_opset_import();
    opset->set_domain("");
    opset->set_version(13);
    auto* g = model.mutable_graph();
    g->set_name("g");
    auto* node = g->add_node();
    node->set_op_type(op);
    node->set_name("the_node");
    node->add_input("x");
    node->add_output("y:0");
    for (auto [info, vname] : {std::pair{g->add_input(), "x"}, std::pair{g->add_output(), "y:0"}}) {
      info->set_name(vname);
      auto* tt = info->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(onnx::TensorProto::FLOAT);
      tt->mutable_shape()->add_dim()->set_dim_value(2);
      tt->mutable_shape()->add_dim()->set_dim_value(3);
    }
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << model.SerializeAsString();
    return path;
  }

  fs::path dir_;
};

TEST_F(CliTest, HelpAndUsage) {
  EXPECT_EQ(run_cli("--help").exit_code, 0);
  for (const char* cmd : {"info", "run", "bench", "demo"}) {
    CommandResult r = run_cli(std::string(cmd) + " --help");
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.output.find(cmd), std::string::npos) << r.output;
  }
  EXPECT_EQ(run_cli("").exit_code, 1);
  EXPECT_EQ(run_cli("no-such-command").exit_code, 1);
  EXPECT_EQ(run_cli("run --no-such-flag x.onnx").exit_code, 1);
}

TEST_F(CliTest, InfoPrintsSignatureAndHistogram) {
  const std::string model = write_model("relu.onnx");
  CommandResult r = run_cli("info " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("x: f32[2,3]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Relu"), std::string::npos) << r.output;
  r = run_cli("info " + model + " --level O1 --steps");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("graph mode O1: 1 kernels per run"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Relu node 'the_node' -> hwy.elementwise"), std::string::npos) << r.output;
}

TEST_F(CliTest, BadModelFilesAreUserErrorsNamingTheFile) {
  const std::string missing = (dir_ / "missing.onnx").string();
  CommandResult r = run_cli("info " + missing);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("missing.onnx"), std::string::npos) << r.output;

  const std::string random = (dir_ / "random.onnx").string();
  std::string bytes;
  for (int i = 0; i < 4096; ++i) bytes += static_cast<char>((i * 7919 + 13) % 256);
  std::ofstream(random, std::ios::binary) << bytes;
  r = run_cli("run " + random + " --random");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("random.onnx"), std::string::npos) << r.output;

  const std::string good = write_model("good.onnx");
  std::ifstream in(good, std::ios::binary);
  std::string full((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string truncated = (dir_ / "truncated.onnx").string();
  std::ofstream(truncated, std::ios::binary) << full.substr(0, full.size() / 2);
  r = run_cli("info " + truncated);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("truncated.onnx"), std::string::npos) << r.output;
}

TEST_F(CliTest, UnsupportedOpNamesOpAndNode) {
  const std::string model = write_model("custom.onnx", "FancyUnknownOp");
  CommandResult r = run_cli("info " + model);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("FancyUnknownOp"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the_node"), std::string::npos) << r.output;
}

TEST_F(CliTest, RunReadsAndWritesNpy) {
  const std::string model = write_model("relu.onnx");
  const std::string x = (dir_ / "x.npy").string();
  ASSERT_TRUE(write_npy(x, Tensor::from_vector<float>({2, 3}, {-1, 2, -3, 4, -5, 6})).is_ok());
  const std::string out = (dir_ / "out").string();
  CommandResult r = run_cli("run " + model + " --input x=" + x + " --output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The output is named "y:0": ':' is outside [A-Za-z0-9._-] and becomes '_'.
  auto y = read_npy((fs::path(out) / "y_0.npy").string());
  ASSERT_TRUE(y.is_ok()) << y.status().message() << "\n" << r.output;
  EXPECT_EQ(y->to_float_vector(), (std::vector<float>{0, 2, 0, 4, 0, 6}));
  // Existing outputs are not overwritten without --force.
  r = run_cli("run " + model + " --input x=" + x + " --output-dir " + out);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--force"), std::string::npos) << r.output;
  EXPECT_EQ(run_cli("run " + model + " --input x=" + x + " --output-dir " + out + " --force").exit_code, 0);
}

TEST_F(CliTest, WrongInputsNameTheInputAndBothTypes) {
  const std::string model = write_model("relu.onnx");
  const std::string bad_shape = (dir_ / "bad_shape.npy").string();
  ASSERT_TRUE(write_npy(bad_shape, Tensor::from_vector<float>({3, 2}, {1, 2, 3, 4, 5, 6})).is_ok());
  CommandResult r = run_cli("run " + model + " --input x=" + bad_shape);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("'x'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("f32[2,3]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("f32[3,2]"), std::string::npos) << r.output;

  const std::string bad_dtype = (dir_ / "bad_dtype.npy").string();
  ASSERT_TRUE(write_npy(bad_dtype, Tensor::from_vector<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6})).is_ok());
  r = run_cli("run " + model + " --input x=" + bad_dtype);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("i64[2,3]"), std::string::npos) << r.output;

  r = run_cli("run " + model + " --input nosuch=" + bad_dtype);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("nosuch"), std::string::npos) << r.output;

  r = run_cli("run " + model);  // no input given, no --random
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("missing input 'x'"), std::string::npos) << r.output;
}

TEST_F(CliTest, ModesLevelsAndPassSelection) {
  const std::string model = write_model("relu.onnx");
  for (const char* flags : {"--mode eager", "--mode graph --level O0", "--mode graph --level O1 --threads 1"}) {
    CommandResult r = run_cli("run " + model + " --random " + flags);
    EXPECT_EQ(r.exit_code, 0) << flags << "\n" << r.output;
  }
  CommandResult bad_level = run_cli("run " + model + " --random --level O7");
  EXPECT_EQ(bad_level.exit_code, 1);
  EXPECT_NE(bad_level.output.find("O7"), std::string::npos) << bad_level.output;
  CommandResult bad_pass = run_cli("run " + model + " --random --passes dce,no_such_pass");
  EXPECT_EQ(bad_pass.exit_code, 1);
  EXPECT_NE(bad_pass.output.find("no_such_pass"), std::string::npos) << bad_pass.output;
  EXPECT_NE(bad_pass.output.find("constant_fold"), std::string::npos) << "lists the valid passes";
  CommandResult printed = run_cli("run " + model + " --random --passes simplify,dce --print-after-all");
  EXPECT_EQ(printed.exit_code, 0) << printed.output;
  CommandResult bench = run_cli("bench " + model + " --iters 3 --warmup 1 --json");
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  for (const char* field : {"\"median_ms\"", "\"min_ms\"", "\"p90_ms\"", "\"arena_bytes\"",
                            "\"peak_rss_bytes\"", "\"kernels\":1"}) {
    EXPECT_NE(bench.output.find(field), std::string::npos) << field << " in " << bench.output;
  }
}

// bench --versus / --versus-level: every variant timed the same number of rounds in one process,
// the first (at the default level, O3) at ratio 1; a missing twin or an unknown level is a user
// error naming it.
TEST_F(CliTest, BenchComparesTwinsAndLevelsPairedInOneProcess) {
  const std::string model = write_model("relu.onnx"), twin = write_model("twin.onnx");
  CommandResult r = run_cli("bench " + model + " --versus " + twin + " --versus-level eager --versus-level O1 --iters 4 --warmup 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["variants"].size(), 4u) << r.output;
  EXPECT_EQ(j["rounds"], 4);
  EXPECT_EQ(j["variants"][0]["ratio_to_first"], 1.0);
  EXPECT_EQ(j["variants"][0]["level"], "O3");
  EXPECT_NE(j["variants"][1]["model"].get<std::string>().find("twin.onnx"), std::string::npos);
  EXPECT_EQ(j["variants"][2]["level"], "eager");
  EXPECT_EQ(j["variants"][3]["level"], "O1");
  for (const auto& v : j["variants"]) EXPECT_GT(v["median_ms"].get<double>(), 0.0) << v.dump();
  CommandResult bad = run_cli("bench " + model + " --versus-level O9 --iters 2");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("O9"), std::string::npos) << bad.output;
  CommandResult missing = run_cli("bench " + model + " --versus " + (dir_ / "none.onnx").string() + " --iters 2");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("none.onnx"), std::string::npos) << missing.output;
}

// tune writes a record run/bench/report replay; a record for another model or target is a user
// error naming the record, never a silent mis-compile; no overwrite without --force.
TEST_F(CliTest, TuneWritesARecordThatOnlyItsModelAndTargetAccept) {
  const std::string model = write_model("m.onnx");
  const std::string other = write_model("other.onnx", "Sigmoid");
  const std::string record = (dir_ / "t.json").string();
  CommandResult r = run_cli("tune " + model + " -o " + record + " --rounds 1 --runs 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tuning record for target"), std::string::npos) << r.output;
  std::ifstream in(record);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"model_digest\""), std::string::npos) << text;
  EXPECT_EQ(run_cli("tune " + model + " -o " + record).exit_code, 1);  // exists, no --force

  for (const char* command : {"run --random", "bench --iters 2", "report", "profile"}) {
    r = run_cli(str_cat(command, " ", model, " --level O3 --tuning ", record));
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.output;
  }
  r = run_cli(str_cat("report ", model, " --level O3 --tuning ", record));
  EXPECT_NE(r.output.find("t.json' (layouts "), std::string::npos) << r.output;
  r = run_cli("run " + other + " --random --tuning " + record);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("was made for another model"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("t.json"), std::string::npos) << r.output;
  r = run_cli("report " + other + " --tuning " + record);
  EXPECT_EQ(r.exit_code, 1) << r.output;

  // The same record claiming another target (not the one this process runs at: the suite also
  // runs at OPFUSE_TARGET=avx2, and may at sse41).
  std::string edited = text;
  const size_t value = edited.find("\"target\": \"") + 11;
  const size_t end = edited.find('"', value);
  const std::string other_target = edited.substr(value, end - value) == "sse41" ? "avx512_core" : "sse41";
  edited.replace(value, end - value, other_target);
  std::ofstream(record, std::ios::trunc) << edited;
  r = run_cli("run " + model + " --random --tuning " + record);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("measured for target " + other_target), std::string::npos) << r.output;
  r = run_cli("run " + model + " --random --tuning " + (dir_ / "missing.json").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
}

TEST_F(CliTest, DemoRunsAndReportsWhatItDid) {
  const std::string out = (dir_ / "demo").string();
  CommandResult r = run_cli("demo --quick --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* text : {"== ResNet-50", "== DeepLabV3", "graph O1", "graph O2", "graph O3",
                           "fusion report", "fold_batchnorm", "validation: every level matches eager",
                           "kernels:", "pictures:", "demo finished"}) {
    EXPECT_NE(r.output.find(text), std::string::npos) << text << " in " << r.output;
  }
  for (const char* file : {"resnet50.svg", "resnet50.html", "deeplabv3.svg", "deeplabv3.html"}) {
    EXPECT_TRUE(fs::exists(fs::path(out) / file)) << file;
  }
  std::ifstream svg(fs::path(out) / "resnet50.svg");
  std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("<svg"), std::string::npos);
  EXPECT_NE(text.find("after (O3)"), std::string::npos);
  // Never overwrites without --force, and says so before running anything.
  CommandResult again = run_cli("demo --quick --models resnet50 --out " + out);
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find("--force"), std::string::npos) << again.output;
  EXPECT_EQ(again.output.find("== ResNet-50"), std::string::npos) << again.output;
  EXPECT_EQ(run_cli("demo --resnet-size 3").exit_code, 1);
  EXPECT_EQ(run_cli("demo --models alexnet").exit_code, 1);
}


// An If on a scalar int input (a sample rate): `report --bind` analyses the plan graph mode
// compiles for that value, with the If taken; without it the If stays; a bad bind is named.
TEST_F(CliTest, ReportBindsAScalarInputAnIfDependsOn) {
  auto g = parse_graph(R"(
graph @main (%sr: i64[], %x: f32[2,3]) {
  %rate: i64[] = const [16000]
  %c = Equal(%sr, %rate)
  %y = If(%c, %x) {then_branch = graph @t (%x: f32[2,3]) captures 1 {
      %r = Relu(%x)
      return %r
    }, else_branch = graph @e (%x: f32[2,3]) captures 1 {
      %n = Neg(%x)
      return %n
    }} #rate_if
  return %y
}
)");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  auto bytes = export_onnx(*g, {});
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  const std::string path = (dir_ / "rate_if.onnx").string();
  std::ofstream(path, std::ios::binary) << *bytes;

  CommandResult bound = run_cli("report " + path + " --bind sr=16000");
  EXPECT_EQ(bound.exit_code, 0) << bound.output;
  EXPECT_NE(bound.output.find("specialize_inputs"), std::string::npos) << bound.output;
  EXPECT_NE(bound.output.find("inline_constant_if"), std::string::npos) << bound.output;
  CommandResult unbound = run_cli("report " + path);
  EXPECT_EQ(unbound.exit_code, 0) << unbound.output;
  EXPECT_EQ(unbound.output.find("inline_constant_if"), std::string::npos) << unbound.output;
  CommandResult wrong = run_cli("report " + path + " --bind x=1");
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.output.find("input 'x' is f32[2,3]; only scalar integer or bool inputs can be bound"),
            std::string::npos) << wrong.output;
  // An optimised export for that value holds no If any more.
  const std::string optimized = (dir_ / "rate_if_opt.onnx").string();
  CommandResult opt = run_cli("optimize " + path + " --bind sr=16000 -o " + optimized);
  EXPECT_EQ(opt.exit_code, 0) << opt.output;
  CommandResult info = run_cli("info " + optimized);
  EXPECT_EQ(info.output.find(" If "), std::string::npos) << info.output;
  // The run itself takes each branch by the input's value.
  const std::string sr = (dir_ / "sr.npy").string();
  ASSERT_TRUE(write_npy(sr, Tensor::scalar<int64_t>(8000)).is_ok());
  CommandResult run = run_cli("run " + path + " --input sr=" + sr + " --random");
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

}  // namespace
}  // namespace opfuse
