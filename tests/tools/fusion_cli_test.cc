// The fusion tooling commands of the `opfuse` binary: report, viz, profile, validate, optimize,
// the fusion flags and config file, and the seed scenario (a classifier head excluded by glob).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "frontend/onnx/exporter.h"
#include "ir/text_format.h"
#include "testing/cli_runner.h"
#include "testing/fusion_models.h"
#include "testing/zoo.h"

namespace opfuse {
namespace {

namespace fs = std::filesystem;
using testing_cli::run_cli;

class FusionCliTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           str_cat("opfuse_fusion_cli_", getpid(), "_", testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // The block-and-head model as an ONNX file.
    Graph g = parse_graph(testing_models::kBlockAndHead).value();
    model_ = (dir_ / "block.onnx").string();
    std::ofstream(model_, std::ios::binary) << export_onnx(g).value();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
    return path(name);
  }
  static std::string read(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  fs::path dir_;
  std::string model_;
};


TEST_F(FusionCliTest, ReportGolden) {
  auto r = run_cli("report " + model_ + " --level O2 --exclude '/head/*'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, testing_models::with_target_line(testing_models::kReportExcludedHead));
  // The same from a config file, level included.
  const std::string config = write("c.json", R"({"level": "O2", "exclude": ["/head/*"]})");
  r = run_cli("report " + model_ + " --fusion-config " + config);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, testing_models::with_target_line(testing_models::kReportExcludedHead));
  // A --level flag wins over the file's.
  r = run_cli("report " + model_ + " --fusion-config " + config + " --level O1");
  EXPECT_NE(r.output.find("fusion report at O1"), std::string::npos) << r.output;
}

TEST_F(FusionCliTest, ReportJsonAndRules) {
  auto r = run_cli("report " + model_ + " --level O2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["kernels"].size(), 2u);
  EXPECT_EQ(j["totals"]["nodes_after"], 2);
  r = run_cli("report --rules");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("fold_batchnorm"), std::string::npos);
  EXPECT_NE(r.output.find("epilogue_relu"), std::string::npos);
  EXPECT_EQ(r.output.find("constant_fold"), std::string::npos);
  // -o writes through the no-clobber writer.
  const std::string out = path("r.txt");
  EXPECT_EQ(run_cli("report " + model_ + " -o " + out).exit_code, 0);
  r = run_cli("report " + model_ + " -o " + out);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("exists; pass --force"), std::string::npos) << r.output;
  EXPECT_EQ(run_cli("report " + model_ + " -o " + out + " --force").exit_code, 0);
}

TEST_F(FusionCliTest, ConfigErrorsListTheValidNames) {
  // Each bad flag or config file: exit code 1 and every listed phrase in what the CLI says.
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"report " + model_ + " --disable fuse_epilog",
       {"unknown fusion rule 'fuse_epilog' (valid: ", "epilogue_relu, "}},
      {"report " + model_ + " --enable-only nothing", {"unknown fusion rule 'nothing'"}},
      {"run " + model_ + " --random --disable-op Convolution", {"unknown op type 'Convolution' (valid: ", "Conv, "}},
      {"report " + model_ + " --region-threshold lots", {"--region-threshold 'lots' is not a number"}},
      {"report " + model_ + " --region-threshold 2", {"fraction in [0, 1]"}},
      {"report " + model_ + " --region-table-budget 3parsecs", {"unknown size unit"}},
      {"report " + model_ + " --fusion-config " + write("bad.json", R"({"exclude": ["/x"], "colour": 1})"),
       {"unknown key \"colour\""}},
      {"report " + model_ + " --fusion-config " + write("rule.json", R"({"disable": ["bogus"]})"),
       {"rule.json': unknown fusion rule 'bogus'"}},
      {"report " + model_ + " --fusion-config " + path("missing.json"), {"cannot read fusion config"}},
  };
  for (const auto& [args, phrases] : cases) {
    SCOPED_TRACE(args);
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 1);
    for (const std::string& phrase : phrases) EXPECT_NE(r.output.find(phrase), std::string::npos) << r.output;
  }
}

TEST_F(FusionCliTest, VizWritesEveryFormatAndNeverClobbers) {
  const std::string svg = path("g.svg");
  auto r = run_cli("viz " + model_ + " --level O2 --exclude '/head/*' -o " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 fused kernels, 2 refused candidates"), std::string::npos) << r.output;
  const std::string text = read(svg);
  EXPECT_NE(text.find("<svg"), std::string::npos);
  EXPECT_NE(text.find("before (O0)"), std::string::npos);
  EXPECT_NE(text.find("after (O2)"), std::string::npos);
  EXPECT_NE(text.find("refused: epilogue_relu: node excluded by glob"), std::string::npos);
  r = run_cli("viz " + model_ + " -o " + svg);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("exists; pass --force"), std::string::npos);
  EXPECT_EQ(read(svg), text);  // untouched
  EXPECT_EQ(run_cli("viz " + model_ + " -o " + svg + " --force").exit_code, 0);
  r = run_cli("viz " + model_ + " -o " + path("g.html"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string html = read(path("g.html"));
  EXPECT_NE(html.find("<h2>Fusion report</h2>"), std::string::npos);
  EXPECT_EQ(std::count(html.begin(), html.end(), '<') > 100, true);
  EXPECT_NE(html.find("Before fusion (O0)"), std::string::npos);
  r = run_cli("viz " + model_ + " -o " + path("g.dot"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(read(path("g.dot")).find("subgraph cluster_b_0"), std::string::npos);
  r = run_cli("viz " + model_ + " -o " + path("g.pdf"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(".svg, .html, .dot or .png"), std::string::npos);
}

TEST_F(FusionCliTest, ProfileTableShareAndTrace) {
  const std::string trace = path("t.json");
  auto r = run_cli("profile " + model_ + " --level O2 --runs 3 --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("O1: 4 kernels per run"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("O2: 2 kernels per run"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("small-op share (kernels writing < 64KiB):"), std::string::npos);
  EXPECT_NE(r.output.find("100.0% of kernel time in 2 of 2 kernels"), std::string::npos) << r.output;
  const auto j = nlohmann::json::parse(read(trace));
  EXPECT_EQ(j["traceEvents"].size(), 2u + 4u + 2u);  // 2 process names, 4 + 2 steps
  r = run_cli("profile " + model_ + " --trace " + trace);
  EXPECT_EQ(r.exit_code, 1);
  r = run_cli("profile " + model_ + " --runs 0");
  EXPECT_EQ(r.exit_code, 1);
}

TEST_F(FusionCliTest, ValidatePassesAndFails) {
  auto r = run_cli("validate " + model_ + " --level O2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("O2 agrees with eager"), std::string::npos);
  EXPECT_NE(r.output.find("  y "), std::string::npos);
  // Without --rtol the tolerance comes from eager mode's own rounding sensitivity (a small
  // conv net: the 1e-4 floor); with it, no sensitivity is measured.
  EXPECT_NE(r.output.find("eager's rounding sensitivity: one ulp of its inputs and weights moves its outputs by"), std::string::npos);
  EXPECT_NE(r.output.find("eager vs O2 (rtol 0.0001, atol 1e-06)"), std::string::npos) << r.output;
  // No tolerance at all: BN folding rounds differently, so O2 fails ...
  r = run_cli("validate " + model_ + " --level O2 --rtol 0 --atol 0 --bisect");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("FAIL"), std::string::npos);
  EXPECT_NE(r.output.find("differs from eager beyond tolerance"), std::string::npos);
  EXPECT_NE(r.output.find("culprit: "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("rounding sensitivity"), std::string::npos) << r.output;
  r = run_cli("validate " + model_ + " --rtol -1");
  EXPECT_EQ(r.exit_code, 1);
}

TEST_F(FusionCliTest, OptimizeWritesAModelOpfuseRunsAgain) {
  const std::string out = path("opt.onnx");
  auto r = run_cli("optimize " + model_ + " --level O2 -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("5 nodes -> 2 (2 opfuse)"), std::string::npos) << r.output;
  r = run_cli("info " + out);
  EXPECT_NE(r.output.find("FusedConv"), std::string::npos) << r.output;
  r = run_cli("validate " + out + " --level O0");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(run_cli("optimize " + model_ + " -o " + out).exit_code, 1);  // exists
  const std::string standard = path("std.onnx");
  r = run_cli("optimize " + model_ + " --level O2 --standard-only -o " + standard);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("5 nodes -> 4 (4 ai.onnx)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rules producing opfuse ops left out: epilogue_relu"), std::string::npos);
  // Standard ONNX's own checker accepts it.
  const int checked = std::system(("/usr/bin/python3 -c \"import onnx; onnx.checker.check_model(onnx.load('" +
                                   standard + "'), full_check=True)\" 2>/dev/null").c_str());
  if (checked != 0 && std::system("/usr/bin/python3 -c 'import onnx' 2>/dev/null") == 0) {
    ADD_FAILURE() << "onnx.checker rejects the --standard-only export";
  }
}

// The seed scenario: the classifier head of resnet_tiny excluded by glob keeps its nodes unfused
// (and says so in the report and the picture) while the backbone fuses.
TEST_F(FusionCliTest, ClassifierExcludedByGlobStaysUnfused) {
  const fs::path model = testing_zoo::zoo_dir() / "resnet_tiny.onnx";
  if (!fs::exists(model)) GTEST_SKIP() << "no zoo";
  const std::string excl = "--exclude '/fc/*' --exclude '/Flatten' --exclude '/pool/*'";
  auto r = run_cli("report " + model.string() + " --level O2 --json " + excl);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  std::set<std::string> fused;
  for (const auto& k : j["kernels"]) {
    for (const auto& m : k["members"]) fused.insert(m.get<std::string>());
  }
  EXPECT_GT(j["kernels"].size(), 5u);  // the backbone's Conv+BN+Relu(+Add) blocks
  EXPECT_TRUE(fused.count("/stem/stem.0/Conv"));
  for (const char* head : {"/fc/Gemm", "/Flatten", "/pool/GlobalAveragePool"}) EXPECT_FALSE(fused.count(head)) << head;
  std::set<std::string> excluded;
  for (const auto& e : j["excluded"]) excluded.insert(e["node"].get<std::string>());
  EXPECT_EQ(excluded, (std::set<std::string>{"/fc/Gemm", "/Flatten", "/pool/GlobalAveragePool"}));
  // The optimised graph keeps them as they were.
  const std::string opt = path("r.onnx");
  ASSERT_EQ(run_cli("optimize " + model.string() + " --level O2 -o " + opt + " " + excl).exit_code, 0);
  r = run_cli("info " + opt);
  EXPECT_NE(r.output.find("Gemm"), std::string::npos);
  EXPECT_NE(r.output.find("Flatten"), std::string::npos);
  // The picture marks them.
  const std::string dot = path("r.dot");
  ASSERT_EQ(run_cli("viz " + model.string() + " --level O2 -o " + dot + " " + excl).exit_code, 0);
  const std::string text = read(dot);
  EXPECT_NE(text.find("node excluded by glob '/fc/*'"), std::string::npos);
  EXPECT_NE(text.find("subgraph cluster_b_0"), std::string::npos);
}

}  // namespace
}  // namespace opfuse
