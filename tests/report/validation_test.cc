// Validation and bisection. A deliberately broken fusion rule, registered only here, rewrites
// Relus: into LeakyRelu(alpha 0), the same function, except one node that becomes a Sigmoid;
// --bisect must name the rule and that node.
#include "report/validation.h"

#include <gtest/gtest.h>

#include <sstream>

#include "core/random.h"
#include "ir/text_format.h"
#include "passes/extra_passes.h"
#include "passes/fusion_rules.h"
#include "passes/pass_util.h"
#include "pipelines/pipeline.h"

namespace opfuse {
namespace {

// Five Relus in a chain, each after an Add of a constant (so values go negative).
const char* kChain = R"(graph @main opset 13 (%x: f32[2,8]) {
  %k: f32[8] = const [-0.5, 0.25, -0.25, 0.5, -1, 1, -0.75, 0.75]
  %a0 = Add(%x, %k) #"/s0/add"
  %r0 = Relu(%a0) #"/s0/relu"
  %a1 = Add(%r0, %k) #"/s1/add"
  %r1 = Relu(%a1) #"/s1/relu"
  %a2 = Add(%r1, %k) #"/s2/add"
  %r2 = Relu(%a2) #"/s2/relu"
  %a3 = Add(%r2, %k) #"/s3/add"
  %r3 = Relu(%a3) #"/s3/relu"
  %a4 = Add(%r3, %k) #"/s4/add"
  %y = Relu(%a4) #"/s4/relu"
  return %y
}
)";

constexpr const char* kBrokenRule = "test_broken_relu";
constexpr const char* kGuilty = "/s2/relu";

// Rewrites every Relu into LeakyRelu (alpha 0: the same function), except kGuilty into a Sigmoid
// (wrong: sigmoid(2) = 0.88, not 2; positive values survive the later Relus, so it shows in y).
// Honours FusionConfig and records decisions like a real rule.
Result<bool> run_broken(Graph& graph, PassContext& ctx) {
  if (!ctx.fusion.rule_enabled(kBrokenRule)) return false;
  bool changed = false;
  for (Node* node : graph.nodes()) {
    if (node->op_type() != "Relu") continue;
    PassDecision d{kBrokenRule, str_cat("Relu '", node->name(), "'"), false, {}, kBrokenRule, {node->name()}, {}, 0};
    if (!ctx.fusion.node_fusible(*node)) {
      d.reason = ctx.fusion.node_refusal(*node);
      ctx.decide(d);
      continue;
    }
    const std::string name = node->name();
    Value* in = node->input(0);
    Value* out = node->output(0);
    Attributes attrs;
    if (name != kGuilty) attrs["alpha"] = 0.0f;
    OPFUSE_ASSIGN_OR_RETURN(Node * leaky, graph.add_node(name == kGuilty ? "Sigmoid" : "LeakyRelu", {in},
                                                         {out->name() + "_leaky"}, attrs, name + "_leaky"));
    leaky->output(0)->dtype = out->dtype;
    leaky->output(0)->shape = out->shape;
    if (!replace_uses_keeping_outputs(graph, out, leaky->output(0))) {
      OPFUSE_TRY(graph.remove_node(leaky));
      continue;  // a graph output keeps its Relu
    }
    OPFUSE_TRY(graph.remove_node(node));
    d.applied = true;
    d.result = name + "_leaky";
    ctx.decide(d);
    changed = true;
  }
  if (changed) OPFUSE_TRY(graph.topological_sort());
  return changed;
}

class BisectTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(register_extra_pass(kBrokenRule, "a deliberately wrong rule (tests only)", run_broken).is_ok());
  }
  void TearDown() override { unregister_extra_pass(kBrokenRule); }

  TensorMap inputs() {
    Tensor x = Tensor::zeros(DType::kF32, {2, 8}).value();
    Random rng(7);
    fill_uniform(x, rng, -1.0, 1.0);
    return {{"x", x}};
  }
};

TEST_F(BisectTest, TheBrokenRuleIsAKnownRuleAndBreaksO2) {
  EXPECT_TRUE(is_known_fusion_rule(kBrokenRule));
  Graph g = parse_graph(kChain).value();
  SessionOptions eager;
  eager.mode = ExecutionMode::kEager;
  TensorMap reference = Session::create(g.clone(), eager).value().run(inputs()).value();
  SessionOptions o2;
  o2.level = OptLevel::kO2;
  ValidationResult v = validate_against(g, o2, inputs(), reference, {}).value();
  EXPECT_FALSE(v.ok);
  ASSERT_EQ(v.outputs.size(), 1u);
  EXPECT_GT(v.outputs[0].max_abs, 1e-3);
  SessionOptions o1;  // registered passes run at O2 and O3 only
  o1.level = OptLevel::kO1;
  EXPECT_TRUE(validate_against(g, o1, inputs(), reference, {}).value().ok);
  o2.pipeline.fusion.disabled_rules = {kBrokenRule};
  EXPECT_TRUE(validate_against(g, o2, inputs(), reference, {}).value().ok);
}

TEST_F(BisectTest, FindsTheRuleAndTheNode) {
  Graph g = parse_graph(kChain).value();
  SessionOptions o2;
  o2.level = OptLevel::kO2;
  std::ostringstream log;
  BisectResult b = bisect_fusion(g, o2, inputs(), {}, &log).value();
  EXPECT_TRUE(b.level_fails);
  EXPECT_TRUE(b.fusion_at_fault);
  EXPECT_EQ(b.rule, kBrokenRule) << log.str();
  EXPECT_TRUE(b.rule_alone);
  EXPECT_EQ(b.nodes, std::vector<std::string>{kGuilty}) << log.str();
  EXPECT_NE(b.summary.find("--exclude '/s2/relu'"), std::string::npos) << b.summary;
  // 4 rewritable Relus: full, none, only the rule, the rule's kernels, then halving 4 -> 1.
  EXPECT_LE(b.compilations, 9);
}

TEST_F(BisectTest, PassingLevelHasNothingToBisect) {
  Graph g = parse_graph(kChain).value();
  SessionOptions o2;
  o2.level = OptLevel::kO2;
  o2.pipeline.fusion.excluded_node_globs = {kGuilty};
  BisectResult b = bisect_fusion(g, o2, inputs(), {}).value();
  EXPECT_FALSE(b.level_fails);
  EXPECT_EQ(b.compilations, 1);
}

// x^5000 near x = 1 multiplies x's relative rounding by 5000: one ulp of input (1.2e-7) moves
// the output by about 6e-4 of itself. The Relu chain passes a ulp on as a ulp.
TEST(RoundingSensitivity, FollowsTheModelsConditioning) {
  const char* kPower = R"(graph @main opset 13 (%x: f32[64]) {
  %n: f32[1] = const [5000]
  %y = Pow(%x, %n)
  return %y
}
)";
  SessionOptions eager;
  eager.mode = ExecutionMode::kEager;
  const auto sensitivity = [&](const char* text, std::vector<int64_t> dims, double lo, double hi) {
    const Session session = Session::create(parse_graph(text).value(), eager).value();
    Tensor x = Tensor::zeros(DType::kF32, dims).value();
    Random rng(3);
    fill_uniform(x, rng, lo, hi);
    const TensorMap inputs{{"x", x}};
    const TensorMap reference = session.run(inputs).value();
    return rounding_sensitivity(session, inputs, reference).value();
  };
  const double power = sensitivity(kPower, {64}, 0.99, 1.01);
  EXPECT_GT(power, 1e-4);
  EXPECT_LT(power, 2e-3);
  EXPECT_DOUBLE_EQ(tolerance_for_sensitivity(power).rtol, 10 * power);
  // An input quantized first absorbs its ulps; the weights after it do not.
  const char* kQuantizedInput = R"(graph @main (%x: f32[4,8]) {
  %s: f32[] = const [0.125]
  %z: u8[] = const [128]
  %w: f32[8,3] = const [0.5, -1, 2, 0.25, 3, -0.75, 1.5, 1, -2, 0.3, 0.7, -0.1, 1, 1, 1, -1, 0.5, 0.2, 0.9, -0.4, 0.6, 0.8, -0.3, 0.1]
  %q = QuantizeLinear(%x, %s, %z)
  %d = DequantizeLinear(%q, %s, %z)
  %y = MatMul(%d, %w)
  return %y
}
)";
  const double quantized = sensitivity(kQuantizedInput, {4, 8}, -3, 3);
  EXPECT_GT(quantized, 0.0);
  EXPECT_LT(quantized, 1e-6);
  const double chain = sensitivity(kChain, {2, 8}, -1, 1);
  EXPECT_LT(chain, 1e-6);
  EXPECT_DOUBLE_EQ(tolerance_for_sensitivity(chain).rtol, 1e-4);
  EXPECT_DOUBLE_EQ(tolerance_for_sensitivity(chain).atol, 1e-6);
}

TEST(CompareOutputs, AbsoluteAndRelative) {
  TensorMap want{{"y", Tensor::from_vector<float>({3}, {1, -4, 2})}};
  TensorMap got{{"y", Tensor::from_vector<float>({3}, {1, -4.002f, 2})}};
  ValidationResult r = compare_outputs(got, want, {1e-4, 0});
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_NEAR(r.outputs[0].max_abs, 0.002, 1e-6);
  EXPECT_NEAR(r.outputs[0].max_rel, 0.0005, 1e-6);  // 0.002 / 4
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(compare_outputs(got, want, {1e-3, 0}).ok);      // 0.002 <= 1e-3 * 4
  EXPECT_TRUE(compare_outputs(got, want, {0, 0.0021}).ok);    // atol alone
  TensorMap missing;
  EXPECT_FALSE(compare_outputs(missing, want, {}).ok);
}

}  // namespace
}  // namespace opfuse
