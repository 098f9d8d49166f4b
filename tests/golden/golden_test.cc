// Golden tests of passes: every tests/golden/**/*.ir file is one case. It is parsed, run through
// the passes its `// RUN:` line names (verifying the graph after each), printed, and the printed
// text is checked against its CHECK directives (tests/golden/filecheck.h). The pass decisions
// are printed after the graph as `// applied <pass>: <what>` and `// refused <pass>: <what>:
// <reason>` lines, so cases can check why a rewrite did not happen.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "filecheck.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "pipelines/pipeline.h"

namespace opfuse {
namespace {

namespace fs = std::filesystem;

fs::path golden_dir() { return fs::path(OPFUSE_SOURCE_DIR) / "tests" / "golden"; }

std::vector<std::string> golden_cases() {
  std::vector<std::string> cases;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(golden_dir(), ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file() && it->path().extension() == ".ir") {
      cases.push_back(fs::relative(it->path(), golden_dir()).string());
    }
  }
  std::sort(cases.begin(), cases.end());
  return cases;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs a parsed case; returns the status of parse + passes and, on success, the printed output.
Status run_case(const std::string& text, const golden::RunSpec& run, std::string& output) {
  ParseOptions parse_options;
  if (run.elided == "zeros") parse_options.elided_constants = ParseOptions::Elided::kZeros;
  if (run.elided == "pattern") parse_options.elided_constants = ParseOptions::Elided::kPattern;
  auto graph = parse_graph(text, parse_options);
  if (!graph.is_ok()) return graph.status();
  OPFUSE_TRY(verify_graph(*graph));
  PipelineOptions options;
  options.verify_after_each = true;
  options.passes = run.passes;
  // Goldens are deterministic: the layout pass uses its fixed heuristic, not timings.
  OptLevel level = OptLevel::kO0;
  if (!run.passes) {
    auto parsed = parse_opt_level(run.level);
    if (!parsed.is_ok()) return parsed.status();
    level = *parsed;
  }
  PassContext context;
  // Passes alone may compile for any tier; the host's does not matter.
  const auto tier = parse_isa_tier(run.target);
  if (!tier) return Status::user_error("unknown target " + run.target);
  context.target.isa = *tier;
  OPFUSE_TRY(run_pipeline(*graph, level, options, context));
  output = print_graph(*graph);
  for (const PassDecision& d : context.decisions) {
    output += d.applied ? str_cat("// applied ", d.pass, ": ", d.what, "\n")
                        : str_cat("// refused ", d.pass, ": ", d.what, ": ", d.reason, "\n");
  }
  return Status::ok();
}

class GoldenTest : public testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, Matches) {
  const fs::path path = golden_dir() / GetParam();
  const std::string text = read_file(path);
  ASSERT_FALSE(text.empty()) << "cannot read " << path;
  golden::GoldenFile file;
  const std::string bad = golden::parse_golden(text, file);
  ASSERT_TRUE(bad.empty()) << path << ": " << bad;

  std::string output;
  const Status status = run_case(text, file.run, output);
  if (file.run.expect_error) {
    ASSERT_FALSE(status.is_ok()) << path << ": expected an error containing '"
                                 << *file.run.expect_error << "', got output:\n" << output;
    EXPECT_NE(status.message().find(*file.run.expect_error), std::string::npos)
        << path << ": error '" << status.message() << "' does not contain '"
        << *file.run.expect_error << "'";
    return;
  }
  ASSERT_TRUE(status.is_ok()) << path << ": " << status.message();
  ASSERT_FALSE(file.directives.empty()) << path << ": no CHECK directives";
  const std::string failure = golden::check_output(output, file.directives);
  EXPECT_TRUE(failure.empty()) << path << ": " << failure << "\n----- output -----\n" << output;
}

std::string case_name(const testing::TestParamInfo<std::string>& info) {
  std::string name = fs::path(info.param).replace_extension().string();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenTest, testing::ValuesIn(golden_cases()), case_name);

TEST(GoldenDiscoveryTest, FindsCasesForEveryPass) {
  const std::vector<std::string> cases = golden_cases();
  for (const char* pass : {"dce", "constant_fold", "cse", "simplify", "fold_batchnorm", "pipeline"}) {
    const bool found = std::any_of(cases.begin(), cases.end(), [&](const std::string& c) {
      return c.rfind(std::string(pass) + "/", 0) == 0;
    });
    EXPECT_TRUE(found) << "no golden case under tests/golden/" << pass;
  }
}

// ---- The checker itself: each directive kind must be able to fail. ----

using golden::check_output;
using golden::Directive;
using Kind = golden::Directive::Kind;

const char* kOutput =
    "graph @main (%x: f32[2]) {\n"
    "  %a: f32[2] = Relu(%x)\n"
    "  %b: f32[2] = Neg(%a)\n"
    "  %c: f32[2] = Relu(%b)\n"
    "  return %c\n"
    "}\n";

TEST(FileCheckTest, CheckFindsInOrder) {
  EXPECT_EQ(check_output(kOutput, {{Kind::kCheck, "Relu(%x)", 1}, {Kind::kCheck, "Relu(%b)", 2}}), "");
  // Order matters: after Relu(%b) there is no Neg.
  EXPECT_NE(check_output(kOutput, {{Kind::kCheck, "Relu(%b)", 1}, {Kind::kCheck, "Neg", 2}}), "");
  EXPECT_NE(check_output(kOutput, {{Kind::kCheck, "Sigmoid", 1}}), "");
}

TEST(FileCheckTest, CheckNextMustBeTheFollowingLine) {
  EXPECT_EQ(check_output(kOutput, {{Kind::kCheck, "Relu(%x)", 1}, {Kind::kNext, "Neg(%a)", 2}}), "");
  EXPECT_NE(check_output(kOutput, {{Kind::kCheck, "Relu(%x)", 1}, {Kind::kNext, "Relu(%b)", 2}}), "");
  EXPECT_NE(check_output(kOutput, {{Kind::kNext, "graph", 1}}), "");
}

TEST(FileCheckTest, CheckNotOnlyBetweenItsNeighbours) {
  // Neg lies between the two Relus: forbidden there ...
  EXPECT_NE(check_output(kOutput, {{Kind::kCheck, "Relu(%x)", 1}, {Kind::kNot, "Neg", 2},
                                   {Kind::kCheck, "Relu(%b)", 3}}),
            "");
  // ... but not after the second one.
  EXPECT_EQ(check_output(kOutput, {{Kind::kCheck, "Relu(%b)", 1}, {Kind::kNot, "Neg", 2}}), "");
  // A trailing CHECK-NOT covers the rest of the output.
  EXPECT_NE(check_output(kOutput, {{Kind::kCheck, "graph", 1}, {Kind::kNot, "Neg", 2}}), "");
}

TEST(FileCheckTest, CheckDagAnyOrderDistinctMatches) {
  EXPECT_EQ(check_output(kOutput, {{Kind::kDag, "Relu(%b)", 1}, {Kind::kDag, "Relu(%x)", 2},
                                   {Kind::kCheck, "return", 3}}),
            "");
  // Two DAG lines cannot both claim the only Neg.
  EXPECT_NE(check_output(kOutput, {{Kind::kDag, "Neg", 1}, {Kind::kDag, "Neg", 2}}), "");
  // Two Relu lines exist, so two Relu DAGs succeed.
  EXPECT_EQ(check_output(kOutput, {{Kind::kDag, "= Relu", 1}, {Kind::kDag, "= Relu", 2}}), "");
}

TEST(FileCheckTest, RegexBlocks) {
  EXPECT_EQ(check_output(kOutput, {{Kind::kCheck, "%{{[a-z]}}: f32[2] = Neg", 1}}), "");
  EXPECT_NE(check_output(kOutput, {{Kind::kCheck, "%{{[0-9]}}: f32[2] = Neg", 1}}), "");
}

TEST(FileCheckTest, ParsesRunLine) {
  golden::GoldenFile f;
  EXPECT_EQ(golden::parse_golden("// RUN: passes=a,b expect-error=bad thing here\n// CHECK: x\n", f), "");
  ASSERT_TRUE(f.run.passes.has_value());
  EXPECT_EQ(*f.run.passes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(f.run.expect_error.value_or(""), "bad thing here");
  ASSERT_EQ(f.directives.size(), 1u);
  golden::GoldenFile g;
  EXPECT_NE(golden::parse_golden("// CHECK: x\n", g), "");  // no RUN line
  golden::GoldenFile h;
  EXPECT_NE(golden::parse_golden("// RUN: pases=a\n", h), "");  // typo is an error, not ignored
}

}  // namespace
}  // namespace opfuse
