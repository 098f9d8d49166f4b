// The pattern engine itself (patterns/pattern.h): the matcher (commutative operands from op
// traits, captures binding one value, constants by value with a tolerance, alternatives,
// optional trailing inputs), the standard guards, FusionConfig switches, the driver's counters,
// recorded decisions and iteration cap.
#include <gtest/gtest.h>

#include <set>

#include "ir/text_format.h"
#include "passes/pass.h"
#include "patterns/pattern.h"

namespace opfuse::patterns {
namespace {

Graph parse(const std::string& text) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return std::move(g).value();
}

Node* node_named(const Graph& g, const std::string& name) {
  Node* n = g.find_node(name);
  EXPECT_NE(n, nullptr) << name;
  return n;
}

// x * sigmoid(x) -> Silu-like marker op (Mish here: any unary op of the registry will do).
Pattern silu_to_mish() {
  Pattern p;
  p.name = "test_silu";
  p.family = "test";
  p.tree = op("Mul", {any("x"), op("Sigmoid", {any("x")})});
  p.rewrite = [](Graph& g, const Match& m) {
    return replace_match(g, m, "Mish", "", {m.value("x")}, {}, m.root->name());
  };
  return p;
}

const char* kSilu = R"(graph @main opset 13 (%x: f32[4], %z: f32[4]) {
  %s: f32[4] = Sigmoid(%x) #sig
  %y: f32[4] = Mul(%s, %x) #mul
  return %y
})";

TEST(PatternMatcherTest, CommutativeOperandsAreTriedInBothOrders) {
  Graph g = parse(kSilu);  // Mul(s, x): the tree says Mul(x, Sigmoid(x))
  auto m = match_at(silu_to_mish(), node_named(g, "mul"));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->value("x")->name(), "x");
  ASSERT_EQ(m->nodes.size(), 2u);
  EXPECT_EQ(m->nodes[0]->name(), "mul");
  EXPECT_EQ(m->nodes[1]->name(), "sig");
}

TEST(PatternMatcherTest, NonCommutativeOperandsAreNotSwapped) {
  Pattern p;
  p.tree = op("Sub", {any("a"), op("Neg", {any("b")})});
  Graph g = parse(R"(graph @main opset 13 (%x: f32[4], %z: f32[4]) {
  %n: f32[4] = Neg(%z)
  %y: f32[4] = Sub(%n, %x) #sub
  return %y
})");
  EXPECT_FALSE(match_at(p, node_named(g, "sub")).has_value());
}

TEST(PatternMatcherTest, ACaptureBindsOneValue) {
  // Mul(z, Sigmoid(x)): the two "x" leaves see different values.
  Graph g = parse(R"(graph @main opset 13 (%x: f32[4], %z: f32[4]) {
  %s: f32[4] = Sigmoid(%x)
  %y: f32[4] = Mul(%z, %s) #mul
  return %y
})");
  EXPECT_FALSE(match_at(silu_to_mish(), node_named(g, "mul")).has_value());
}

TEST(PatternMatcherTest, ScalarConstantsMatchByValueWithinTolerance) {
  Pattern p;
  p.tree = op("Mul", {any("x"), scalar(0.044715, 1e-4, "c")});
  const std::string head = "graph @main opset 13 (%x: f32[2]) {\n  %c: f32[2] = const ";
  const std::string tail = "\n  %y: f32[2] = Mul(%c, %x) #mul\n  return %y\n}";
  Graph close = parse(head + "[0.0447151, 0.0447151]" + tail);
  auto m = match_at(p, node_named(close, "mul"));
  ASSERT_TRUE(m.has_value());
  EXPECT_NEAR(m->scalar("c"), 0.0447151, 1e-7);
  Graph far = parse(head + "[0.045, 0.045]" + tail);
  EXPECT_FALSE(match_at(p, node_named(far, "mul")).has_value());
  Graph mixed = parse(head + "[0.044715, 1]" + tail);  // not one value
  EXPECT_FALSE(match_at(p, node_named(mixed, "mul")).has_value());
  // A graph input with an initializer is a default the caller may override: not a constant.
  Graph input = parse(R"(graph @main opset 13 (%x: f32[2], %c: f32[] = const [0.044715]) {
  %y: f32[2] = Mul(%c, %x) #mul
  return %y
})");
  EXPECT_FALSE(match_at(p, node_named(input, "mul")).has_value());
}

TEST(PatternMatcherTest, AnyScalarCapturesTheValue) {
  Pattern p;
  p.tree = op("Add", {any("x"), any_scalar("eps")});
  Graph g = parse(R"(graph @main opset 13 (%x: f32[2]) {
  %e: f32[] = const [0.00001]
  %y: f32[2] = Add(%x, %e) #add
  return %y
})");
  auto m = match_at(p, node_named(g, "add"));
  ASSERT_TRUE(m.has_value());
  EXPECT_NEAR(m->scalar("eps"), 1e-5, 1e-12);
}

TEST(PatternMatcherTest, OneOfEnumeratesAlternativesAndOpHeadIgnoresLaterInputs) {
  Pattern p;
  p.tree = op_head("Clip", {one_of({op("Relu", {any("x")}), op("Neg", {any("x")})}, "inner")});
  Graph g = parse(R"(graph @main opset 13 (%x: f32[2]) {
  %lo: f32[] = const [0]
  %n: f32[2] = Neg(%x)
  %y: f32[2] = Clip(%n, %lo) #clip
  return %y
})");
  auto m = match_at(p, node_named(g, "clip"));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->value("inner")->name(), "n");
  // Without op_head the arity must be exact.
  p.tree = op("Clip", {op("Neg", {any("x")})});
  EXPECT_FALSE(match_at(p, node_named(g, "clip")).has_value());
}

TEST(PatternMatcherTest, EveryFitIsEnumerated) {
  // Add(Relu(a), Relu(b)) against Add(Relu(x), any): two fits (x = a, x = b).
  Pattern p;
  p.tree = op("Add", {op("Relu", {any("x")}), any("other")});
  Graph g = parse(R"(graph @main opset 13 (%a: f32[2], %b: f32[2]) {
  %ra: f32[2] = Relu(%a)
  %rb: f32[2] = Relu(%b)
  %y: f32[2] = Add(%ra, %rb) #add
  return %y
})");
  std::vector<std::string> xs;
  for_each_match(p, node_named(g, "add"), [&](const Match& m) {
    xs.push_back(m.value("x")->name());
    return false;
  });
  EXPECT_EQ(xs, (std::vector<std::string>{"a", "b"}));
}

// ---- driver ----------------------------------------------------------------------------------

TEST(PatternDriverTest, AppliesRecordsAndCounts) {
  Graph g = parse(kSilu);
  const Pattern p = silu_to_mish();
  PassContext ctx;
  auto changed = run_patterns(g, {&p}, ctx, "test_pass");
  ASSERT_TRUE(changed.is_ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  ASSERT_EQ(g.num_nodes(), 1u);
  const Node* n = g.nodes()[0];
  EXPECT_EQ(n->op_type(), "Mish");
  EXPECT_EQ(n->name(), "mul");
  EXPECT_EQ(n->output(0)->name(), "y");
  EXPECT_TRUE(n->output(0)->is_graph_output());
  ASSERT_EQ(ctx.decisions.size(), 1u);
  const PassDecision& d = ctx.decisions[0];
  EXPECT_TRUE(d.applied);
  EXPECT_EQ(d.pass, "test_pass");
  EXPECT_EQ(d.rule, "test_silu");
  EXPECT_EQ(d.members, (std::vector<std::string>{"sig", "mul"}));
  EXPECT_EQ(d.result, "mul");
  EXPECT_EQ(ctx.rule_counters["test_silu"].matched, 1);
  EXPECT_EQ(ctx.rule_counters["test_silu"].applied, 1);
}

TEST(PatternDriverTest, SharedIntermediateAndGraphOutputAreRefusedOnce) {
  for (const char* extra : {"  %z2: f32[4] = Neg(%s)\n  return %y, %z2", "  return %y, %s"}) {
    SCOPED_TRACE(extra);
    Graph g = parse(std::string("graph @main opset 13 (%x: f32[4]) {\n  %s: f32[4] = Sigmoid(%x) #sig\n"
                                "  %y: f32[4] = Mul(%s, %x) #mul\n") + extra + "\n}");
    const Pattern p = silu_to_mish();
    PassContext ctx;
    ASSERT_FALSE(run_patterns(g, {&p}, ctx, "t").value());
    ASSERT_EQ(ctx.decisions.size(), 1u);
    EXPECT_FALSE(ctx.decisions[0].applied);
    EXPECT_EQ(ctx.decisions[0].reason,
              std::string(extra).find("Neg") != std::string::npos ? "shared intermediate" : "graph output");
    EXPECT_EQ(ctx.rule_counters["test_silu"].matched, 1);
    EXPECT_EQ(ctx.rule_counters["test_silu"].applied, 0);
  }
}

TEST(PatternDriverTest, FusionConfigDisablesRulesAndExcludesNodes) {
  const Pattern p = silu_to_mish();
  {
    Graph g = parse(kSilu);
    PassContext ctx;
    ctx.fusion.disabled_rules = {"test_silu"};
    EXPECT_FALSE(run_patterns(g, {&p}, ctx, "t").value());
    ASSERT_EQ(ctx.decisions.size(), 1u);
    EXPECT_EQ(ctx.decisions[0].reason, "rule disabled");
  }
  {
    Graph g = parse(kSilu);
    PassContext ctx;
    ctx.fusion.excluded_node_globs = {"si?"};
    EXPECT_FALSE(run_patterns(g, {&p}, ctx, "t").value());
    ASSERT_EQ(ctx.decisions.size(), 1u);
    EXPECT_EQ(ctx.decisions[0].reason, ctx.fusion.node_refusal(*node_named(g, "sig")));
    EXPECT_FALSE(ctx.decisions[0].reason.empty());
  }
  {
    Graph g = parse(kSilu);
    PassContext ctx;
    ctx.fusion.disabled_op_types = {"Sigmoid"};
    EXPECT_FALSE(run_patterns(g, {&p}, ctx, "t").value());
    EXPECT_EQ(g.num_nodes(), 2u);
  }
}

TEST(PatternDriverTest, ChecksRefuseWithTheirReasonAndConditionsStaySilent) {
  Pattern p = silu_to_mish();
  p.check = [](const Match&, const PassContext&) -> Reason { return "not today"; };
  Graph g = parse(kSilu);
  PassContext ctx;
  EXPECT_FALSE(run_patterns(g, {&p}, ctx, "t").value());
  ASSERT_EQ(ctx.decisions.size(), 1u);
  EXPECT_EQ(ctx.decisions[0].reason, "not today");
  p.condition = [](const Match&) { return false; };
  PassContext quiet;
  EXPECT_FALSE(run_patterns(g, {&p}, quiet, "t").value());
  EXPECT_TRUE(quiet.decisions.empty());
  EXPECT_TRUE(quiet.rule_counters.empty());
}

TEST(PatternDriverTest, HigherBenefitWinsOnTheSameRoot) {
  Pattern low = silu_to_mish();
  Pattern high = silu_to_mish();
  high.name = "test_high";
  high.benefit = 5;
  high.rewrite = [](Graph& g, const Match& m) {
    return replace_match(g, m, "Softplus", "", {m.value("x")}, {}, m.root->name());
  };
  Graph g = parse(kSilu);
  PassContext ctx;
  ASSERT_TRUE(run_patterns(g, {&low, &high}, ctx, "t").value());
  EXPECT_EQ(g.nodes()[0]->op_type(), "Softplus");
}

TEST(PatternDriverTest, ChainsReachAFixpointAndTheCapStopsPingPong) {
  // Neg(Neg(x)) -> x-like Identity... here: a rule that always rewrites Neg into Neg never ends.
  Pattern forever;
  forever.name = "test_forever";
  forever.tree = op("Neg", {any("x")});
  forever.rewrite = [](Graph& g, const Match& m) {
    return replace_match(g, m, "Neg", "", {m.value("x")}, {}, m.root->name());
  };
  Graph g = parse(R"(graph @main opset 13 (%x: f32[4]) {
  %y: f32[4] = Neg(%x) #neg
  return %y
})");
  PassContext ctx;
  DriverOptions options;
  options.max_rewrites = 7;
  ASSERT_TRUE(run_patterns(g, {&forever}, ctx, "t", options).value());
  EXPECT_EQ(ctx.rule_counters["test_forever"].applied, 7);
  ASSERT_FALSE(ctx.decisions.empty());
  EXPECT_NE(ctx.decisions.back().reason.find("iteration cap"), std::string::npos);
  EXPECT_EQ(g.num_nodes(), 1u);
}

TEST(PatternRegistryTest, RuleNamesAreUniqueAndEveryFamilyIsRegistered) {
  std::set<std::string> names, families;
  for (const Pattern& p : all_patterns()) {
    EXPECT_TRUE(names.insert(p.name).second) << "duplicate rule " << p.name;
    families.insert(p.family);
    EXPECT_TRUE(p.rewrite != nullptr) << p.name;
    EXPECT_FALSE(root_op_types(p.tree).empty()) << p.name;
  }
  for (const char* f : {"gelu", "epilogue", "anchor_affine", "focus"}) EXPECT_TRUE(families.count(f)) << f;
  EXPECT_NE(find_pattern("epilogue_relu"), nullptr);
}

}  // namespace
}  // namespace opfuse::patterns
