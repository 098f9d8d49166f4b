// The model config's keys (serving/model_config.h) reach the Session's options; a wrong type is
// an error naming the file and the key.
#include "serving/model_config.h"

#include <gtest/gtest.h>

namespace opfuse::serving {
namespace {

TEST(ModelConfig, FlushDenormalsReachesTheSessionOptions) {
  auto config = parse_model_config(R"({"flush_denormals": true, "threads": 2})", "config.json", "/models/m");
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  EXPECT_TRUE(config->flush_denormals);
  auto options = session_options_for(*config);
  ASSERT_TRUE(options.is_ok()) << options.status().message();
  EXPECT_TRUE(options->flush_denormals);
  EXPECT_EQ(options->threads, 2);

  auto defaults = parse_model_config("{}", "config.json", "/models/m");
  ASSERT_TRUE(defaults.is_ok());
  EXPECT_FALSE(session_options_for(*defaults)->flush_denormals);

  auto wrong = parse_model_config(R"({"flush_denormals": 1})", "config.json", "/models/m");
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_NE(wrong.status().message().find("\"flush_denormals\" must be true or false"), std::string::npos)
      << wrong.status().message();
  EXPECT_NE(wrong.status().message().find("config.json"), std::string::npos);
}

}  // namespace
}  // namespace opfuse::serving
