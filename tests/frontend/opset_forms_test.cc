// Import of forms from other opsets (frontend/onnx/canonicalize.cc, opsets.cc) and of Ifs on
// constant conditions (constant_if.cc). Each rewrite of
// an older (opset < 11) or newer (18-21) node form gives exactly the outputs of the same model
// written in the form the op records implement; forms with no counterpart are refused naming
// the node and what is unsupported.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/random.h"
#include "frontend/onnx/importer.h"
#include "ops/eager.h"
#include "testing/onnx_builders.h"

namespace opfuse {
namespace {

using testing_onnx::add_node;

onnx::ModelProto model(int64_t opset, const std::vector<int64_t>& x_dims) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(opset);
  m.mutable_graph()->set_name("g");
  testing_onnx::add_value_info(m.mutable_graph()->mutable_input(), "x", x_dims, onnx::TensorProto::FLOAT);
  return m;
}
void outputs(onnx::ModelProto& m, const std::vector<std::string>& names) {
  for (const std::string& n : names) m.mutable_graph()->add_output()->set_name(n);
}
void ints_attr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void floats_attr(onnx::NodeProto* n, const std::string& name, const std::vector<float>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}
void int_attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void float_attr(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
void string_attr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}
void ints_init(onnx::ModelProto& m, const std::string& name, const std::vector<int64_t>& v) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) t->add_int64_data(x);
}
void floats_init(onnx::ModelProto& m, const std::string& name, const std::vector<float>& v,
                 std::vector<int64_t> dims = {}) {
  if (dims.empty()) dims = {static_cast<int64_t>(v.size())};
  testing_onnx::add_float_initializer(m, name, dims, v);
}

Result<Graph> load(const onnx::ModelProto& m) {
  std::string bytes;
  EXPECT_TRUE(m.SerializeToString(&bytes));
  return load_onnx_bytes(bytes, "", {}, "test.onnx");
}

Tensor input(const std::vector<int64_t>& dims) {
  Tensor t = Tensor::zeros(DType::kF32, dims).value();
  Random rng(7);
  fill_uniform(t, rng, -3.0f, 3.0f);
  float* d = t.data<float>();
  d[0] = std::numeric_limits<float>::infinity();
  if (t.numel() > 1) d[1] = -std::numeric_limits<float>::infinity();
  return t;
}

// Both models import, and give bit-identical outputs on the same input.
void expect_same(const onnx::ModelProto& other_form, const onnx::ModelProto& record_form,
                 const std::vector<int64_t>& x_dims, int64_t want_graph_opset) {
  auto a = load(other_form);
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  auto b = load(record_form);
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ(a->opset_imports.at(""), want_graph_opset);
  const TensorMap in = {{"x", input(x_dims)}};
  auto got = run_eager(*a, in);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  auto want = run_eager(*b, in);
  ASSERT_TRUE(want.is_ok()) << want.status().message();
  ASSERT_EQ(got->size(), want->size());
  for (const auto& [name, t] : *want) {
    const Tensor& g = got->at(name);
    ASSERT_EQ(g.dims(), t.dims()) << name;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float w = t.data<float>()[i], v = g.data<float>()[i];
      ASSERT_TRUE(w == v || (std::isnan(w) && std::isnan(v))) << name << "[" << i << "]: " << v << " vs " << w;
    }
  }
}

void expect_refused(const onnx::ModelProto& m, const std::vector<std::string>& parts) {
  const Status s = load(m).status();
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.kind(), ErrorKind::kUser) << s.message();
  for (const std::string& p : parts) EXPECT_NE(s.message().find(p), std::string::npos) << p << " not in: " << s.message();
}

TEST(OpsetForms, SliceAttributesOfOpset9) {
  onnx::ModelProto old = model(9, {4, 6});
  auto* n = add_node(old, "Slice", {"x"}, {"y"}, "s", "");
  ints_attr(n, "starts", {1, -4});
  ints_attr(n, "ends", {3, 100});
  ints_attr(n, "axes", {0, 1});
  outputs(old, {"y"});
  onnx::ModelProto now = model(13, {4, 6});
  ints_init(now, "starts", {1, -4});
  ints_init(now, "ends", {3, 100});
  ints_init(now, "axes", {0, 1});
  add_node(now, "Slice", {"x", "starts", "ends", "axes"}, {"y"}, "s", "");
  outputs(now, {"y"});
  expect_same(old, now, {4, 6}, 11);
}

TEST(OpsetForms, PadAttributesOfOpset10) {
  onnx::ModelProto old = model(10, {2, 3});
  auto* n = add_node(old, "Pad", {"x"}, {"y"}, "p", "");
  ints_attr(n, "pads", {0, 1, 1, 2});
  float_attr(n, "value", 1.5f);
  outputs(old, {"y"});
  onnx::ModelProto now = model(13, {2, 3});
  ints_init(now, "pads", {0, 1, 1, 2});
  floats_init(now, "value", {1.5f}, {});
  now.mutable_graph()->mutable_initializer(1)->clear_dims();  // a scalar
  add_node(now, "Pad", {"x", "pads", "value"}, {"y"}, "p", "");
  outputs(now, {"y"});
  expect_same(old, now, {2, 3}, 11);
}

TEST(OpsetForms, ClipAttributesOfOpset6AndTheirDefaults) {
  // max only: the default min is the lowest float, so -inf becomes it, as in Clip-6.
  onnx::ModelProto old = model(9, {3, 4});
  float_attr(add_node(old, "Clip", {"x"}, {"y"}, "c", ""), "max", 1.0f);
  outputs(old, {"y"});
  onnx::ModelProto now = model(13, {3, 4});
  floats_init(now, "lo", {std::numeric_limits<float>::lowest()}, {});
  floats_init(now, "hi", {1.0f}, {});
  now.mutable_graph()->mutable_initializer(0)->clear_dims();
  now.mutable_graph()->mutable_initializer(1)->clear_dims();
  add_node(now, "Clip", {"x", "lo", "hi"}, {"y"}, "c", "");
  outputs(now, {"y"});
  expect_same(old, now, {3, 4}, 11);
}

// The records' form of Upsample and Resize-10: Resize-13 by constant scales, nearest, with the
// asymmetric transform and the given rounding.
onnx::ModelProto asymmetric_resize(const std::vector<int64_t>& x_dims, const std::vector<float>& scales,
                                   const std::string& nearest_mode, const std::string& node_name) {
  onnx::ModelProto m = model(13, x_dims);
  floats_init(m, "scales", scales);
  auto* r = add_node(m, "Resize", {"x", "", "scales"}, {"y"}, node_name, "");
  string_attr(r, "coordinate_transformation_mode", "asymmetric");
  string_attr(r, "nearest_mode", nearest_mode);
  outputs(m, {"y"});
  return m;
}

TEST(OpsetForms, UpsampleIsResizeWithAsymmetricFloor) {
  for (int64_t opset : {7, 9}) {
    SCOPED_TRACE(opset);
    onnx::ModelProto old = model(opset, {1, 2, 3, 3});
    onnx::NodeProto* n;
    if (opset < 9) {
      n = add_node(old, "Upsample", {"x"}, {"y"}, "u", "");
      floats_attr(n, "scales", {1, 1, 2, 3});
    } else {
      floats_init(old, "scales", {1, 1, 2, 3});
      n = add_node(old, "Upsample", {"x", "scales"}, {"y"}, "u", "");
    }
    string_attr(n, "mode", "nearest");
    outputs(old, {"y"});
    expect_same(old, asymmetric_resize({1, 2, 3, 3}, {1, 1, 2, 3}, "floor", "u"), {1, 2, 3, 3}, 11);
  }
}

// Source positions 0, 1.67, 3.33: rounding up (ONNX Runtime's reading) and down differ.
TEST(OpsetForms, Resize10DownsamplesRoundingUp) {
  onnx::ModelProto old = model(10, {1, 1, 6, 6});
  floats_init(old, "scales", {1, 1, 0.6f, 0.6f});
  add_node(old, "Resize", {"x", "scales"}, {"y"}, "r", "");
  outputs(old, {"y"});
  expect_same(old, asymmetric_resize({1, 1, 6, 6}, {1, 1, 0.6f, 0.6f}, "ceil", "r"), {1, 1, 6, 6}, 11);
}

TEST(OpsetForms, BatchNormalizationSpatialOfOpset7) {
  auto bn = [](int64_t opset, bool spatial_attr) {
    onnx::ModelProto m = model(opset, {1, 2, 3, 3});
    floats_init(m, "s", {1.5f, 0.5f});
    floats_init(m, "b", {0.1f, -0.2f});
    floats_init(m, "mean", {0.3f, 0.0f});
    floats_init(m, "var", {2.0f, 0.5f});
    auto* n = add_node(m, "BatchNormalization", {"x", "s", "b", "mean", "var"}, {"y"}, "bn", "");
    if (spatial_attr) int_attr(n, "spatial", 1);
    outputs(m, {"y"});
    return m;
  };
  expect_same(bn(7, true), bn(13, false), {1, 2, 3, 3}, 11);
  onnx::ModelProto per_element = bn(7, false);
  int_attr(per_element.mutable_graph()->mutable_node(0), "spatial", 0);
  expect_refused(per_element, {"node 'bn'", "spatial = 0"});
}

TEST(OpsetForms, ReduceAxesInputOfOpset18) {
  onnx::ModelProto newer = model(18, {2, 3, 4});
  ints_init(newer, "axes", {-1, 1});
  int_attr(add_node(newer, "ReduceMean", {"x", "axes"}, {"y"}, "r", ""), "keepdims", 0);
  auto* noop = add_node(newer, "ReduceMax", {"x"}, {"z"}, "n", "");
  int_attr(noop, "noop_with_empty_axes", 1);
  outputs(newer, {"y", "z"});
  onnx::ModelProto now = model(13, {2, 3, 4});
  auto* r = add_node(now, "ReduceMean", {"x"}, {"y"}, "r", "");
  ints_attr(r, "axes", {-1, 1});
  int_attr(r, "keepdims", 0);
  add_node(now, "Identity", {"x"}, {"z"}, "n", "");
  outputs(now, {"y", "z"});
  expect_same(newer, now, {2, 3, 4}, 17);

  onnx::ModelProto computed = model(18, {2, 3, 4});
  testing_onnx::add_value_info(computed.mutable_graph()->mutable_input(), "axes", {1}, onnx::TensorProto::INT64);
  add_node(computed, "ReduceMean", {"x", "axes"}, {"y"}, "r", "");
  outputs(computed, {"y"});
  expect_refused(computed, {"node 'r'", "ReduceMean at opset 18", "axes computed at run time"});
}

TEST(OpsetForms, SplitNumOutputsOfOpset18) {
  onnx::ModelProto newer = model(18, {7, 2});
  int_attr(add_node(newer, "Split", {"x"}, {"a", "b", "c"}, "s", ""), "num_outputs", 3);
  outputs(newer, {"a", "b", "c"});
  onnx::ModelProto now = model(13, {7, 2});
  ints_init(now, "split", {3, 3, 1});
  add_node(now, "Split", {"x", "split"}, {"a", "b", "c"}, "s", "");
  outputs(now, {"a", "b", "c"});
  expect_same(newer, now, {7, 2}, 17);
}

TEST(OpsetForms, ScatterOfOpset9And10IsScatterElements) {
  auto form = [](int64_t opset, const char* op) {
    onnx::ModelProto m = model(opset, {5});
    ints_init(m, "indices", {4, 0, 2});
    floats_init(m, "updates", {10, 20, 30});
    int_attr(add_node(m, op, {"x", "indices", "updates"}, {"y"}, "s", ""), "axis", 0);
    outputs(m, {"y"});
    return m;
  };
  for (int64_t opset : {9, 10}) {
    SCOPED_TRACE(opset);
    expect_same(form(opset, "Scatter"), form(11, "ScatterElements"), {5}, 11);
  }
}

TEST(OpsetForms, NewerFormsWithNoCounterpartAreRefused) {
  onnx::ModelProto resize = model(19, {1, 1, 4, 4});
  floats_init(resize, "scales", {1, 1, 0.5f, 0.5f});
  int_attr(add_node(resize, "Resize", {"x", "", "scales"}, {"y"}, "r", ""), "antialias", 1);
  outputs(resize, {"y"});
  expect_refused(resize, {"node 'r'", "Resize at opset 19", "antialias"});

  onnx::ModelProto pad = model(19, {2, 3});
  ints_init(pad, "pads", {0, 1, 0, 1});
  string_attr(add_node(pad, "Pad", {"x", "pads"}, {"y"}, "p", ""), "mode", "wrap");
  outputs(pad, {"y"});
  expect_refused(pad, {"node 'p'", "Pad at opset 19", "wrap"});
}

TEST(OpsetForms, OpsUnchangedOrWidenedAcrossOpsetsReadAsTheRecords) {
  // Conv and Relu at opset 9 and at opset 21 read as opsets 11 and 17.
  for (int64_t opset : {9, 21}) {
    SCOPED_TRACE(opset);
    auto conv = [](int64_t o) {
      onnx::ModelProto m = model(o, {1, 2, 5, 5});
      floats_init(m, "w", std::vector<float>(18, 0.25f), {1, 2, 3, 3});
      add_node(m, "Conv", {"x", "w"}, {"c"}, "conv", "");
      add_node(m, "Relu", {"c"}, {"y"}, "relu", "");
      outputs(m, {"y"});
      return m;
    };
    expect_same(conv(opset), conv(13), {1, 2, 5, 5}, opset < 11 ? 11 : 17);
  }
  // Pad-1 (its `paddings` attribute) changed before any form opfuse reads.
  onnx::ModelProto pad1 = model(1, {2, 3});
  ints_attr(add_node(pad1, "Pad", {"x"}, {"y"}, "p", ""), "paddings", {0, 1, 0, 1});
  outputs(pad1, {"y"});
  expect_refused(pad1, {"node 'p'", "op Pad (domain ai.onnx, opset 1) is not supported", "changed between opset 1 and 11"});
  onnx::ModelProto too_new = model(22, {2, 3});
  add_node(too_new, "Relu", {"x"}, {"y"}, "r", "");
  outputs(too_new, {"y"});
  expect_refused(too_new, {"opset 22", "ai.onnx", "not supported"});
}

// ---- If on a constant condition (frontend/onnx/constant_if.cc) ------------------------------

void bool_init(onnx::GraphProto* g, const std::string& name, bool v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::BOOL);
  t->add_int32_data(v ? 1 : 0);
}
onnx::GraphProto* branch(onnx::NodeProto* n, const std::string& name) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(name);
  return a->mutable_g();
}
onnx::NodeProto* branch_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                             std::vector<std::string> out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  for (auto& i : in) n->add_input(i);
  for (auto& o : out) n->add_output(o);
  return n;
}

// y = If(true) { t = Relu(x) (outer x); If(false) { Neg(t) } else { Sigmoid(t) * w } } else { Neg(x) }:
// nested, with a branch initializer, outer-scope reads and a Constant-node condition.
TEST(ConstantIf, TakenBranchesAreInlinedNestedIncluded) {
  onnx::ModelProto m = model(13, {2, 3});
  bool_init(m.mutable_graph(), "flag", true);
  auto* c = add_node(m, "Constant", {}, {"off"}, "off", "");
  auto* v = c->add_attribute();
  v->set_name("value");
  v->set_type(onnx::AttributeProto::TENSOR);
  v->mutable_t()->set_data_type(onnx::TensorProto::BOOL);
  v->mutable_t()->add_int32_data(0);
  auto* outer = add_node(m, "If", {"flag"}, {"y"}, "outer", "");
  onnx::GraphProto* then_g = branch(outer, "then_branch");
  branch_node(then_g, "Relu", {"x"}, {"t"});
  auto* inner = branch_node(then_g, "If", {"off"}, {"u"});
  inner->set_name("inner");
  onnx::GraphProto* inner_then = branch(inner, "then_branch");
  branch_node(inner_then, "Neg", {"t"}, {"n"});
  inner_then->add_output()->set_name("n");
  onnx::GraphProto* inner_else = branch(inner, "else_branch");
  auto* w = inner_else->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_float_data(2.5f);
  branch_node(inner_else, "Sigmoid", {"t"}, {"s"});
  branch_node(inner_else, "Mul", {"s", "w"}, {"m"});
  inner_else->add_output()->set_name("m");
  then_g->add_output()->set_name("u");
  onnx::GraphProto* else_g = branch(outer, "else_branch");
  branch_node(else_g, "Neg", {"x"}, {"e"});
  else_g->add_output()->set_name("e");
  outputs(m, {"y"});

  onnx::ModelProto plain = model(13, {2, 3});
  floats_init(plain, "w", {2.5f}, {});
  plain.mutable_graph()->mutable_initializer(0)->clear_dims();
  add_node(plain, "Relu", {"x"}, {"t"}, "relu", "");
  add_node(plain, "Sigmoid", {"t"}, {"s"}, "sig", "");
  add_node(plain, "Mul", {"s", "w"}, {"y"}, "mul", "");
  outputs(plain, {"y"});
  expect_same(m, plain, {2, 3}, 13);

  auto g = load(m);
  ASSERT_TRUE(g.is_ok());
  for (const Node* n : g->nodes()) EXPECT_NE(n->op_type(), "If");
}

// y = If(c) { If(c2) { Relu(x) } else { x * w } } else { Neg(x) }, c and c2 inputs: the Ifs stay,
// each reads outer values (x from two levels up, w from the main graph's initializers). x is
// passed in; the constant w is held by each branch reading it, so it is a constant there too.
TEST(ConstantIf, IfsOnRunTimeConditionsImportWithTheirOuterScopeReads) {
  onnx::ModelProto m = model(13, {2});
  testing_onnx::add_value_info(m.mutable_graph()->mutable_input(), "c", {}, onnx::TensorProto::BOOL);
  testing_onnx::add_value_info(m.mutable_graph()->mutable_input(), "c2", {}, onnx::TensorProto::BOOL);
  floats_init(m, "w", {3.0f, -1.0f}, {2});
  auto* n = add_node(m, "If", {"c"}, {"y"}, "gate", "");
  onnx::GraphProto* then_g = branch(n, "then_branch");
  auto* inner = branch_node(then_g, "If", {"c2"}, {"u"});
  inner->set_name("inner");
  branch_node(branch(inner, "then_branch"), "Relu", {"x"}, {"r"});
  inner->mutable_attribute(0)->mutable_g()->add_output()->set_name("r");
  branch_node(branch(inner, "else_branch"), "Mul", {"x", "w"}, {"p"});
  inner->mutable_attribute(1)->mutable_g()->add_output()->set_name("p");
  then_g->add_output()->set_name("u");
  branch_node(branch(n, "else_branch"), "Neg", {"x"}, {"e"});
  n->mutable_attribute(1)->mutable_g()->add_output()->set_name("e");
  outputs(m, {"y"});
  auto g = load(m);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const Node* gate = g->find_node("gate");
  ASSERT_NE(gate, nullptr);
  // Its inputs: the condition, then the outer values its branches read (c2, x), not w.
  EXPECT_EQ(gate->inputs().size(), 3u);
  const auto& then_graph = std::get<GraphAttr>(gate->attrs.at("then_branch"));
  const Node* inner_if = then_graph->find_node("inner");
  ASSERT_NE(inner_if, nullptr);
  EXPECT_EQ(inner_if->inputs().size(), 2u);  // c2, x
  const auto& else_graph = std::get<GraphAttr>(inner_if->attrs.at("else_branch"));
  ASSERT_EQ(else_graph->nodes().size(), 1u);
  const Tensor* w = else_graph->nodes()[0]->input(1)->constant();
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->data<float>()[0], 3.0f);
  const Tensor x = input({2});
  for (bool c : {true, false}) {
    for (bool c2 : {true, false}) {
      auto got = run_eager(*g, {{"x", x}, {"c", Tensor::scalar<bool>(c)}, {"c2", Tensor::scalar<bool>(c2)}});
      ASSERT_TRUE(got.is_ok()) << got.status().message();
      const float x1 = x.data<float>()[1];
      const float want = !c ? -x1 : c2 ? std::max(x1, 0.0f) : x1 * -1.0f;
      EXPECT_FLOAT_EQ(got->at("y").data<float>()[1], want) << c << c2;
    }
  }
}

TEST(ConstantIf, ABranchWithTheWrongOutputCountIsNamed) {
  onnx::ModelProto m = model(13, {2});
  bool_init(m.mutable_graph(), "flag", false);
  auto* n = add_node(m, "If", {"flag"}, {"y"}, "gate", "");
  branch(n, "then_branch")->add_output()->set_name("x");
  onnx::GraphProto* e = branch(n, "else_branch");
  e->add_output()->set_name("x");
  e->add_output()->set_name("x");
  outputs(m, {"y"});
  expect_refused(m, {"node 'gate' (If)", "else_branch has 2 outputs but the If has 1"});
}

}  // namespace
}  // namespace opfuse
