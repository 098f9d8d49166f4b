#include "passes/fusion_config.h"

#include <gtest/gtest.h>

namespace opfuse {
namespace {

TEST(GlobMatch, StarAndQuestionMark) {
  EXPECT_TRUE(glob_match("classifier/*", "classifier/fc"));
  EXPECT_TRUE(glob_match("classifier/*", "classifier/"));
  EXPECT_FALSE(glob_match("classifier/*", "backbone/classifier/fc"));
  EXPECT_TRUE(glob_match("*classifier*", "backbone/classifier/fc"));
  EXPECT_TRUE(glob_match("layer?/conv", "layer1/conv"));
  EXPECT_FALSE(glob_match("layer?/conv", "layer12/conv"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_FALSE(glob_match("a", ""));
  EXPECT_TRUE(glob_match("a*b*c", "aXXbYYbc"));
  EXPECT_FALSE(glob_match("a*b*c", "aXXbYYb"));
}

TEST(FusionConfig, RuleSwitches) {
  FusionConfig c;
  EXPECT_TRUE(c.rule_enabled("conv_epilogue"));
  c.disabled_rules.insert("conv_epilogue");
  EXPECT_FALSE(c.rule_enabled("conv_epilogue"));
  EXPECT_TRUE(c.rule_enabled("gelu_erf"));
  c.enabled_rules.insert("layernorm");
  EXPECT_FALSE(c.rule_enabled("gelu_erf"));
  EXPECT_TRUE(c.rule_enabled("layernorm"));
}

}  // namespace
}  // namespace opfuse
