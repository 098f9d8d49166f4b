// The fusion report on a model whose numbers are worked out by hand (tests/testing/fusion_models.h).
#include "report/fusion_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ir/text_format.h"
#include "pipelines/pipeline.h"
#include "testing/fusion_models.h"

namespace opfuse {
namespace {

FusionReport report_for(const FusionConfig& fusion, OptLevel level = OptLevel::kO2) {
  Graph g = parse_graph(testing_models::kBlockAndHead).value();
  PipelineOptions options;
  options.fusion = fusion;
  auto analysis = analyze_fusion(g, level, options);
  EXPECT_TRUE(analysis.is_ok()) << analysis.status().message();
  return make_fusion_report(*analysis);
}

TEST(FusionReport, KernelsRulesAndTotals) {
  const FusionReport r = report_for({});
  EXPECT_EQ(r.level, "O2");
  ASSERT_EQ(r.rules.size(), 2u);
  EXPECT_EQ(r.rules[0].name, "epilogue_relu");  // rules are listed by name
  EXPECT_EQ(r.rules[0].applied, 2);
  EXPECT_EQ(r.rules[0].refused, 0);
  EXPECT_EQ(r.rules[1].name, "fold_batchnorm");
  EXPECT_EQ(r.rules[1].matched, 1);
  EXPECT_EQ(r.rules[1].applied, 1);
  ASSERT_EQ(r.kernels.size(), 2u);
  const auto& block = r.kernels[0];
  EXPECT_EQ(block.node, "/block/conv/Conv");
  EXPECT_EQ(block.kind, "opfuse::FusedConv");
  EXPECT_EQ(block.members, (std::vector<std::string>{"/block/conv/Conv", "/block/bn/BatchNormalization",
                                                     "/block/relu/Relu"}));
  EXPECT_EQ(block.member_ops, (std::vector<std::string>{"Conv", "BatchNormalization", "Relu"}));
  EXPECT_EQ(block.rules, (std::vector<std::string>{"epilogue_relu", "fold_batchnorm"}));
  EXPECT_EQ(block.bytes_saved, 512);  // BN's 256 + the conv output's write and read, 256
  EXPECT_EQ(r.kernels[1].members, (std::vector<std::string>{"/head/conv/Conv", "/head/relu/Relu"}));
  EXPECT_TRUE(r.refused.empty());
  EXPECT_EQ(r.nodes_before, 5u);
  EXPECT_EQ(r.nodes_after, 2u);
  EXPECT_EQ(r.kernels_before, 5u);
  EXPECT_EQ(r.kernels_after, 2u);
  // Before: conv 128+16+128, BN 128+4*8+128, relu 256, conv 272, relu 256.
  EXPECT_EQ(r.traffic_before, 272 + 288 + 256 + 272 + 256);
  // After: FusedConv with the folded bias (8 bytes) 280, FusedConv without bias 272.
  EXPECT_EQ(r.traffic_after, 280 + 272);
}

TEST(FusionReport, ExcludedHeadIsRefusedAndStaysUnfused) {
  FusionConfig c;
  c.excluded_node_globs = {"/head/*"};
  const FusionReport r = report_for(c);
  ASSERT_EQ(r.kernels.size(), 1u);
  EXPECT_EQ(r.kernels[0].node, "/block/conv/Conv");
  // Both fusers that could have taken the head's Relu say why they did not.
  ASSERT_EQ(r.refused.size(), 2u);
  EXPECT_EQ(r.refused[0].rule, "epilogue_relu");
  EXPECT_EQ(r.refused[0].what, "Relu '/head/relu/Relu' into Conv '/head/conv/Conv' as relu");
  EXPECT_EQ(r.refused[0].reason, "node excluded by glob '/head/*'");
  EXPECT_EQ(r.refused[1].rule, "region_fusion");
  EXPECT_EQ(r.refused[1].reason, "node excluded by glob '/head/*'");
  EXPECT_EQ(r.nodes_after, 3u);
  EXPECT_EQ(r.traffic_after, 280 + 272 + 256);
}

TEST(FusionReport, TextGolden) {
  FusionConfig c;
  c.excluded_node_globs = {"/head/*"};
  const std::string text = format_fusion_report(report_for(c));
  const std::string expected = testing_models::with_target_line(testing_models::kReportExcludedHead);
  EXPECT_EQ(text, expected);
}

TEST(FusionReport, JsonHasEverySection) {
  const auto j = nlohmann::json::parse(fusion_report_json(report_for({})));
  EXPECT_EQ(j["level"], "O2");
  EXPECT_EQ(j["rules"].size(), 2u);
  EXPECT_EQ(j["kernels"][0]["members"].size(), 3u);
  EXPECT_EQ(j["kernels"][0]["bytes_saved"], 512);
  EXPECT_EQ(j["totals"]["traffic_bytes_before"], 1344);
  EXPECT_EQ(j["totals"]["kernels_after"], 2);
  EXPECT_TRUE(j["refused"].empty());
}

TEST(FusionReport, O3SaysEachConvsLayoutAndWhy) {
  const FusionReport r = report_for({}, OptLevel::kO3);
  ASSERT_EQ(r.kernels.size(), 2u);
  const std::string blocked = str_cat("nChw", active_target().channel_block(), "c");  // the target's
  for (const auto& k : r.kernels) {
    EXPECT_NE(k.layout.find("'" + k.node + "' on " + blocked + " (estimated " + blocked + " "), std::string::npos) << k.layout;
  }
  EXPECT_NE(format_fusion_report(r).find("      layout: FusedConv '/head/conv/Conv' on " + blocked), std::string::npos);
  EXPECT_TRUE(report_for({}).kernels[0].layout.empty());  // O2 has no layout pass
  const auto j = nlohmann::json::parse(fusion_report_json(r));
  EXPECT_EQ(j["kernels"][0]["layout"], r.kernels[0].layout);
  EXPECT_FALSE(nlohmann::json::parse(fusion_report_json(report_for({})))["kernels"][0].contains("layout"));
}

TEST(FusionReport, O1FoldsOnly) {
  const FusionReport r = report_for({}, OptLevel::kO1);
  ASSERT_EQ(r.rules.size(), 1u);
  EXPECT_EQ(r.rules[0].name, "fold_batchnorm");
  ASSERT_EQ(r.kernels.size(), 1u);
  EXPECT_EQ(r.kernels[0].kind, "Conv");
  EXPECT_EQ(r.nodes_after, 4u);
}

}  // namespace
}  // namespace opfuse
