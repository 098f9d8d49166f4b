#include "ir/verifier.h"

#include <gtest/gtest.h>

#include "ir/text_format.h"
#include "ops/registry.h"

namespace opfuse {
namespace {

Status pass_through(InferContext& ctx) {
  for (size_t i = 0; i < ctx.num_outputs(); ++i) ctx.set_output(i, DType::kF32, std::nullopt);
  return Status::ok();
}
Status not_runnable(KernelContext& ctx) { return ctx.error("test op"); }

// Test-only ops in their own domain: Unary (1 -> 1, optional attrs), Ranged (2..3 -> 1..2) and
// NeedsAxis (a required int attribute).
void register_verifier_test_ops() {
  static const bool done = [] {
    auto add = [](OpDef def) {
      def.domain = "test.verify";
      def.infer = pass_through;
      def.reference = not_runnable;
      Status s = OpRegistry::global().add(std::move(def));
      EXPECT_TRUE(s.is_ok()) << s.message();
    };
    OpDef unary;
    unary.name = "Unary";
    unary.attrs = {{"alpha", AttrType::kFloat, AttrValue(1.0f), false},
                   {"mode", AttrType::kString, AttrValue(std::string("a")), false}};
    add(unary);
    OpDef ranged;
    ranged.name = "Ranged";
    ranged.min_inputs = 2;
    ranged.max_inputs = 3;
    ranged.min_outputs = 1;
    ranged.max_outputs = 2;
    add(ranged);
    OpDef needs_axis;
    needs_axis.name = "NeedsAxis";
    needs_axis.attrs = {{"axis", AttrType::kInt, std::nullopt, true}};
    add(needs_axis);
    return true;
  }();
  (void)done;
}

class VerifierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_verifier_test_ops();
    x_ = g_.add_input("x", DType::kF32, make_shape({2}));
    w_ = g_.add_constant("w", Tensor::from_vector<float>({2}, {1, 2}));
  }

  Node* add(const std::string& op, std::vector<Value*> inputs, std::vector<std::string> outputs,
            const std::string& name, Attributes attrs = {}) {
    auto node = g_.add_node(op, std::move(inputs), std::move(outputs), std::move(attrs), name,
                            "test.verify");
    EXPECT_TRUE(node.is_ok()) << node.status().message();
    return node.is_ok() ? *node : nullptr;
  }

  // Expects verification to fail with `kind` and a message containing every one of `parts`.
  void expect_error(ErrorKind kind, const std::vector<std::string>& parts) {
    Status s = verify_graph(g_);
    ASSERT_FALSE(s.is_ok()) << "verified unexpectedly";
    EXPECT_EQ(s.kind(), kind) << s.message();
    for (const std::string& part : parts) {
      EXPECT_NE(s.message().find(part), std::string::npos)
          << "'" << part << "' missing from: " << s.message();
    }
  }

  Graph g_;
  Value* x_ = nullptr;
  Value* w_ = nullptr;
};

TEST_F(VerifierTest, AcceptsAWellFormedGraph) {
  Node* a = add("Unary", {x_}, {"a"}, "a", {{"alpha", 2.0f}});
  Node* b = add("Ranged", {a->output(0), w_, nullptr}, {"b", "c"}, "b");
  add("NeedsAxis", {b->output(1)}, {"d"}, "d", {{"axis", int64_t{0}}});
  g_.add_output(b->output(0));
  g_.add_output(x_);  // an input may also be an output
  g_.add_output(w_);  // and so may a constant
  Status s = verify_graph(g_);
  EXPECT_TRUE(s.is_ok()) << s.message();
}

TEST_F(VerifierTest, TooFewInputs) {
  add("Ranged", {x_}, {"y"}, "r1");
  expect_error(ErrorKind::kUser, {"Ranged node 'r1'", "has 1 inputs", "takes 2 to 3"});
}

TEST_F(VerifierTest, TooManyInputs) {
  add("Unary", {x_, x_}, {"y"}, "u1");
  expect_error(ErrorKind::kUser, {"Unary node 'u1'", "has 2 inputs", "takes 1"});
}

TEST_F(VerifierTest, TooManyOutputs) {
  add("Ranged", {x_, w_}, {"p", "q", "r"}, "r3");
  expect_error(ErrorKind::kUser, {"Ranged node 'r3'", "has 3 outputs", "produces 1 to 2"});
}

TEST_F(VerifierTest, RequiredInputOmitted) {
  add("Ranged", {x_, nullptr, w_}, {"y"}, "r2");
  expect_error(ErrorKind::kUser, {"Ranged node 'r2'", "required input 1 is missing"});
}

TEST_F(VerifierTest, UnknownAttribute) {
  add("Unary", {x_}, {"y"}, "u2", {{"beta", 1.0f}});
  expect_error(ErrorKind::kUser, {"Unary node 'u2'", "unknown attribute 'beta'", "alpha, mode"});
}

TEST_F(VerifierTest, AttributeOfTheWrongType) {
  add("Unary", {x_}, {"y"}, "u3", {{"alpha", int64_t{1}}});
  expect_error(ErrorKind::kUser,
               {"Unary node 'u3'", "attribute 'alpha'", "should be float", "but is int"});
}

TEST_F(VerifierTest, RequiredAttributeMissing) {
  add("NeedsAxis", {x_}, {"y"}, "n1");
  expect_error(ErrorKind::kUser, {"NeedsAxis node 'n1'", "required attribute 'axis'", "missing"});
}

TEST_F(VerifierTest, InputThatNothingDefines) {
  Value* ghost = g_.add_value("ghost", DType::kF32, make_shape({2}));
  add("Unary", {ghost}, {"y"}, "u4");
  expect_error(ErrorKind::kUser,
               {"Unary node 'u4'", "input 0 ('ghost')", "not a graph input, a constant or a node output"});
}

TEST_F(VerifierTest, NodesOutOfTopologicalOrder) {
  Node* first = add("Unary", {x_}, {"a"}, "first");
  Node* second = add("Unary", {x_}, {"b"}, "second");
  g_.set_input(first, 0, second->output(0));
  expect_error(ErrorKind::kUser, {"Unary node 'first'", "produced by Unary node 'second'",
                                  "not in topological order"});
}

TEST_F(VerifierTest, NodeReadingItsOwnOutput) {
  Node* n = add("Unary", {x_}, {"a"}, "loop");
  g_.set_input(n, 0, n->output(0));
  expect_error(ErrorKind::kUser, {"Unary node 'loop'", "its own output", "cycle"});
}

TEST_F(VerifierTest, ValueBothConstantAndProduced) {
  Node* n = add("Unary", {x_}, {"a"}, "u5");
  g_.set_constant(n->output(0), Tensor::from_vector<float>({2}, {0, 0}));
  expect_error(ErrorKind::kUser, {"Unary node 'u5'", "output 'a'", "also a constant"});
}

TEST_F(VerifierTest, GraphOutputThatNothingDefines) {
  g_.add_output(g_.add_value("floating"));
  expect_error(ErrorKind::kUser, {"graph output 'floating'", "not a graph input, a constant or a node output"});
}

TEST_F(VerifierTest, ConstantWhoseDeclaredTypeDisagreesWithItsData) {
  w_->dtype = DType::kI64;  // what a buggy pass might do
  expect_error(ErrorKind::kInternal, {"constant 'w'", "i64[2]", "f32[2]"});
}

// Links that only an opfuse bug can break are internal errors. (Duplicate names, a value
// produced twice and use lists out of sync cannot be built through Graph's public API at all.)
TEST_F(VerifierTest, InputFromAnotherGraph) {
  Graph other;
  Value* foreign = other.add_input("foreign", DType::kF32, make_shape({2}));
  add("Unary", {foreign}, {"y"}, "u6");
  expect_error(ErrorKind::kInternal, {"Unary node 'u6'", "input 0 is a value of another graph"});
}

TEST_F(VerifierTest, GraphOutputFromAnotherGraph) {
  Graph other;
  g_.add_output(other.add_input("foreign", DType::kF32, make_shape({2})));
  expect_error(ErrorKind::kInternal, {"graph output is not a value of the graph"});
}

TEST_F(VerifierTest, ChecksGraphsParsedFromText) {
  // The parser keeps what the text says; the verifier is what rejects it.
  auto g = parse_graph(
      "graph @main (%x: f32[2]) {\n"
      "  %y = test.verify::Unary(%x) {alpha = 1} #act\n"
      "  return %y\n"
      "}\n");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  Status s = verify_graph(*g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message(), "Unary node 'act': attribute 'alpha' should be float but is int");

  auto ok = parse_graph(
      "graph @main (%x: f32[2]) {\n"
      "  %y = test.verify::Unary(%x) {alpha = 1.0, mode = \"b\"}\n"
      "  %z, %t = test.verify::Ranged(%y, %x, _)\n"
      "  return %z\n"
      "}\n");
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  Status good = verify_graph(*ok);
  EXPECT_TRUE(good.is_ok()) << good.message();
}

}  // namespace
}  // namespace opfuse
