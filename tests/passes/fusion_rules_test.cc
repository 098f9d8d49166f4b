// The fusion configuration: rule names (one list, errors naming the valid ones), the JSON file,
// and the fusing passes honouring it and filling in their decisions.
#include "passes/fusion_rules.h"

#include <gtest/gtest.h>

#include "ir/text_format.h"
#include "passes/fusion_config_json.h"
#include "passes/pass.h"
#include "pipelines/pipeline.h"
#include "testing/fusion_models.h"
#include "graph_test_util.h"

namespace opfuse {
namespace {

using testing_graphs::count_op;

TEST(FusionRules, KnownRulesAreTheFusingPassesAndRegisteredNames) {
  EXPECT_TRUE(is_known_fusion_rule("fold_batchnorm"));
  EXPECT_TRUE(is_known_fusion_rule("fuse_patterns"));
  EXPECT_TRUE(is_known_fusion_rule("epilogue_relu"));  // every pattern is a rule
  EXPECT_FALSE(is_known_fusion_rule("constant_fold"));  // canonicalisation is not a fusion rule
  EXPECT_FALSE(is_known_fusion_rule("test_only_rule"));
  register_fusion_rule("test_only_rule", "a rule a test registers");
  EXPECT_TRUE(is_known_fusion_rule("test_only_rule"));
  EXPECT_TRUE(is_known_fusion_rule("fp16_in_fp32"));  // not exact, so a switch
  EXPECT_NE(known_fusion_rule_list().find("fold_batchnorm, fp16_in_fp32, fuse_patterns"), std::string::npos);
}

TEST(FusionRules, UnknownNamesListTheValidOnes) {
  FusionConfig c;
  c.disabled_rules.insert("epilogue_rlu");
  Status s = validate_fusion_config(c);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.kind(), ErrorKind::kUser);
  EXPECT_NE(s.message().find("unknown fusion rule 'epilogue_rlu'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("epilogue_relu"), std::string::npos) << s.message();

  FusionConfig ops;
  ops.disabled_op_types.insert("Softmx");
  s = validate_fusion_config(ops);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("unknown op type 'Softmx'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Softmax"), std::string::npos) << s.message();

  FusionConfig bad_threshold;
  bad_threshold.region_min_traffic_saving = 1.5;
  EXPECT_FALSE(validate_fusion_config(bad_threshold).is_ok());
  FusionConfig bad_size;
  bad_size.max_region_nodes = 0;
  EXPECT_FALSE(validate_fusion_config(bad_size).is_ok());
}

TEST(FusionConfigJson, ReadsEveryKey) {
  auto f = parse_fusion_config_json(R"({"level": "O2", "disable": ["epilogue_relu"],
      "enable_only": ["fold_batchnorm"], "disable_op_types": ["Softmax"], "exclude": ["/fc/*"],
      "region_threshold": 0.5, "max_region_nodes": 10, "region_table_budget": "2MiB"})", "test");
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->level, "O2");
  EXPECT_EQ(f->fusion.disabled_rules, std::set<std::string>{"epilogue_relu"});
  EXPECT_EQ(f->fusion.enabled_rules, std::set<std::string>{"fold_batchnorm"});
  EXPECT_EQ(f->fusion.disabled_op_types, std::set<std::string>{"Softmax"});
  EXPECT_EQ(f->fusion.excluded_node_globs, std::vector<std::string>{"/fc/*"});
  EXPECT_DOUBLE_EQ(f->fusion.region_min_traffic_saving, 0.5);
  EXPECT_EQ(f->fusion.max_region_nodes, 10);
  EXPECT_EQ(f->fusion.region_table_budget_bytes, 2 * 1024 * 1024);
}

TEST(FusionConfigJson, TheRenamedMemoryBudgetSaysWhatItBecame) {
  auto old = parse_fusion_config_json(R"({"memory_budget": "2MiB"})", "c.json");
  ASSERT_FALSE(old.is_ok());
  EXPECT_NE(old.status().message().find("c.json: \"memory_budget\" is now \"region_table_budget\""),
            std::string::npos)
      << old.status().message();
}

TEST(FusionConfigJson, ErrorsNameTheFileAndKey) {
  auto unknown = parse_fusion_config_json(R"({"disabled": ["x"]})", "config file 'c.json'");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("config file 'c.json': unknown key \"disabled\""), std::string::npos)
      << unknown.status().message();
  EXPECT_NE(unknown.status().message().find("enable_only"), std::string::npos);
  // Rule names are checked once, where the settings are used: the error names the file.
  auto rule = parse_fusion_config_json(R"({"disable": ["nope"]})", "fusion config 'f.json'");
  ASSERT_TRUE(rule.is_ok());
  const Status invalid = validate_fusion_config(rule->fusion);
  EXPECT_NE(invalid.message().find("fusion config 'f.json': unknown fusion rule 'nope'"), std::string::npos)
      << invalid.message();
  EXPECT_FALSE(parse_fusion_config_json(R"({"exclude": "x"})", "f").is_ok());
  EXPECT_FALSE(parse_fusion_config_json(R"({"max_region_nodes": 1.5})", "f").is_ok());
  EXPECT_FALSE(parse_fusion_config_json(R"([1])", "f").is_ok());
  EXPECT_FALSE(parse_fusion_config_json(R"({)", "f").is_ok());
}

TEST(FusionConfigJson, ByteSizes) {
  EXPECT_EQ(*parse_byte_size("4096"), 4096);
  EXPECT_EQ(*parse_byte_size("64KB"), 64000);
  EXPECT_EQ(*parse_byte_size("64k"), 65536);
  EXPECT_EQ(*parse_byte_size("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(*parse_byte_size("1G"), int64_t{1} << 30);
  EXPECT_FALSE(parse_byte_size("12 parsecs").is_ok());
  EXPECT_FALSE(parse_byte_size("").is_ok());
  EXPECT_FALSE(parse_byte_size("-5").is_ok());
}

// Runs O2 on the block-and-head model with `fusion`.
PassContext run_o2(const FusionConfig& fusion, Graph& graph) {
  graph = parse_graph(testing_models::kBlockAndHead).value();
  PipelineOptions options;
  options.fusion = fusion;
  PassContext ctx;
  EXPECT_TRUE(run_pipeline(graph, OptLevel::kO2, options, ctx).is_ok());
  return ctx;
}

TEST(FusingPasses, FillDecisionsAndCounters) {
  Graph g;
  PassContext ctx = run_o2({}, g);
  EXPECT_EQ(count_op(g, "FusedConv"), 2);
  EXPECT_EQ(g.num_nodes(), 2u);
  ASSERT_EQ(ctx.decisions.size(), 3u);
  const PassDecision& fold = ctx.decisions[0];
  EXPECT_TRUE(fold.applied);
  EXPECT_EQ(fold.rule, "fold_batchnorm");
  EXPECT_EQ(fold.members, (std::vector<std::string>{"/block/bn/BatchNormalization", "/block/conv/Conv"}));
  EXPECT_EQ(fold.result, "/block/conv/Conv");
  EXPECT_EQ(fold.bytes_saved, 256);  // BN read 128 bytes and wrote 128
  const PassDecision& relu = ctx.decisions[1];
  EXPECT_EQ(relu.rule, "epilogue_relu");
  EXPECT_EQ(relu.members, (std::vector<std::string>{"/block/conv/Conv", "/block/relu/Relu"}));
  EXPECT_EQ(relu.result, "/block/conv/Conv");
  EXPECT_EQ(relu.bytes_saved, 256);  // the conv output: written once, read once
  EXPECT_EQ(ctx.rule_counters["fold_batchnorm"].matched, 1);
  EXPECT_EQ(ctx.rule_counters["fold_batchnorm"].applied, 1);
  EXPECT_EQ(ctx.rule_counters["epilogue_relu"].matched, 2);
  EXPECT_EQ(ctx.rule_counters["epilogue_relu"].applied, 2);
}

TEST(FusingPasses, DisabledRulesDoNothing) {
  Graph g;
  FusionConfig c;
  c.disabled_rules = {"epilogue_relu"};
  PassContext ctx = run_o2(c, g);
  EXPECT_EQ(count_op(g, "FusedConv"), 0);
  EXPECT_EQ(count_op(g, "BatchNormalization"), 0);  // the fold still ran
  FusionConfig only_epilogue;
  only_epilogue.enabled_rules = {"epilogue_relu"};
  ctx = run_o2(only_epilogue, g);
  EXPECT_EQ(count_op(g, "BatchNormalization"), 1);
  EXPECT_EQ(count_op(g, "FusedConv"), 1);  // the head; the block's Conv feeds the BN, not a Relu
}

TEST(FusingPasses, ExcludedNodesAreRefusedWithTheGlob) {
  Graph g;
  FusionConfig c;
  c.excluded_node_globs = {"/head/*"};
  PassContext ctx = run_o2(c, g);
  ASSERT_NE(g.find_node("/head/conv/Conv"), nullptr);
  EXPECT_EQ(g.find_node("/head/conv/Conv")->op_type(), "Conv");
  EXPECT_NE(g.find_node("/head/relu/Relu"), nullptr);
  EXPECT_EQ(g.find_node("/block/conv/Conv")->op_type(), "FusedConv");
  bool refused = false;
  for (const PassDecision& d : ctx.decisions) {
    if (!d.applied && d.reason == "node excluded by glob '/head/*'" && d.rule == "epilogue_relu") refused = true;
  }
  EXPECT_TRUE(refused);
  EXPECT_EQ(ctx.rule_counters["epilogue_relu"].applied, 1);
  EXPECT_EQ(ctx.rule_counters["epilogue_relu"].matched, 2);

  FusionConfig no_bn;
  no_bn.disabled_op_types = {"BatchNormalization"};
  ctx = run_o2(no_bn, g);
  EXPECT_EQ(count_op(g, "BatchNormalization"), 1);
  bool op_refused = false;
  for (const PassDecision& d : ctx.decisions) {
    op_refused |= !d.applied && d.rule == "fold_batchnorm" && d.reason == "op type BatchNormalization excluded from fusion";
  }
  EXPECT_TRUE(op_refused);
}

}  // namespace
}  // namespace opfuse
