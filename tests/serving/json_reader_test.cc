// The request parser against nlohmann's (the oracle) on valid JSON, and its refusals of invalid
// JSON that a lenient number or string reader would let through.
#include "serving/json_reader.h"

#include <gtest/gtest.h>

#include <charconv>

namespace opfuse::serving {
namespace {

using nlohmann::json;

TEST(JsonReader, MatchesNlohmannOnValidDocuments) {
  const char* documents[] = {
      R"({"inputs":[{"name":"x","shape":[2,3],"datatype":"FP32","data":[1,-2.5,3e10,0.1,-0,1E-5]}]})",
      R"([0, -1, 18446744073709551615, -9223372036854775808, 9223372036854775807, 1.7976931348623157e308])",
      R"(  {"a" : [ [1, 2] , [3 , 4] ] , "b" : {"c" : null, "d" : true, "e" : false} }  )",
      R"(["plain", "esc\"\\\/\b\f\n\r\t", "\u00e9\u4e2d\ud83d\ude00", "h\u00E9llo", "日本語", ""])",
      R"({"dup": 1, "dup": 2})",
      R"(0.30000000000000004)",
      R"([[[[[[[[[[]]]]]]]]]])",
      R"({})",
  };
  for (const char* text : documents) {
    auto got = parse_json(text);
    ASSERT_TRUE(got.is_ok()) << text << ": " << got.status().message();
    const json want = json::parse(text);
    EXPECT_EQ(*got, want) << text;
    EXPECT_EQ(got->dump(), want.dump()) << text;  // the same number types (unsigned/signed/double)
  }
}

TEST(JsonReader, RefusesWhatIsNotJson) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "expected a value"},
      {"[1,2", "expected ',' or ']'"},
      {"[1,2,]", "expected a value"},
      {"{\"a\":1,}", "expected a string key"},
      {"{a:1}", "expected a string key"},
      {"[01]", "expected ',' or ']'"},
      {"[+1]", "expected a value"},
      {"[.5]", "expected a value"},
      {"[1.]", "a digit after '.'"},
      {"[1e]", "a digit in the exponent"},
      {"[NaN]", "expected a value"},
      {"[Infinity]", "expected a value"},
      {"[-]", "expected a digit"},
      {"[1e999]", "out of the range"},
      {"[\"a\nb\"]", "escaped control character"},
      {"[\"\\x\"]", "an escape"},
      {"[\"\\ud800\"]", "low half of a surrogate pair"},
      {"[\"\\udc00\"]", "high surrogate"},
      {"[\"\xff\"]", "valid UTF-8"},
      {"[\"\xc0\xaf\"]", "valid UTF-8"},          // overlong '/'
      {"[\"\xed\xa0\x80\"]", "valid UTF-8"},      // an encoded surrogate
      {"[\"abc", "closing the string"},
      {"{} {}", "the end of the document"},
      {"tru", "expected a value"},
  };
  for (const auto& [text, words] : cases) {
    auto got = parse_json(text);
    ASSERT_FALSE(got.is_ok()) << text;
    EXPECT_NE(got.status().message().find("malformed JSON at byte "), std::string::npos) << got.status().message();
    EXPECT_NE(got.status().message().find(words), std::string::npos) << text << ": " << got.status().message();
  }
}

TEST(JsonReader, CapsNestingInsteadOfOverflowingTheStack) {
  std::string deep(100000, '[');
  auto got = parse_json(deep);
  ASSERT_FALSE(got.is_ok());
  EXPECT_NE(got.status().message().find("nested deeper than 64"), std::string::npos);
  std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parse_json(ok).is_ok());
}

TEST(JsonReader, ReadsFloatsExactly) {
  // from_chars rounds correctly: every float printed shortest reads back as itself.
  for (float x : {0.1f, 3.14159274f, 1e-38f, 1.17549435e-38f, 3.40282347e38f, 1e-45f, -2.5f}) {
    char buffer[64];
    auto end = std::to_chars(buffer, buffer + sizeof buffer, x).ptr;
    auto got = parse_json(std::string_view(buffer, end - buffer));
    ASSERT_TRUE(got.is_ok());
    EXPECT_EQ(static_cast<float>(got->get<double>()), x);
  }
}

}  // namespace
}  // namespace opfuse::serving
