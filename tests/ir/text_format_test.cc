#include "ir/text_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "ir/verifier.h"
#include "ops/registry.h"
#include "ops/infer_shapes.h"

namespace opfuse {
namespace {

// Test-only ops in their own domain, so they never clash with the built-in ones.
Status copy_first_input_type(InferContext& ctx) {
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    ctx.set_output(i, ctx.has_input(0) ? ctx.input_dtype(0) : DType::kF32, std::nullopt);
  }
  return Status::ok();
}
Status not_runnable(KernelContext& ctx) { return ctx.error("test op"); }

void register_text_test_ops() {
  static const bool done = [] {
    auto add = [](const std::string& name, int min_in, int max_in, int min_out, int max_out) {
      OpDef def;
      def.name = name;
      def.domain = "test.text";
      def.min_inputs = min_in;
      def.max_inputs = max_in;
      def.min_outputs = min_out;
      def.max_outputs = max_out;
      def.infer = copy_first_input_type;
      def.reference = not_runnable;
      Status s = OpRegistry::global().add(std::move(def));
      EXPECT_TRUE(s.is_ok()) << s.message();
    };
    add("Kitchen", 0, 4, 1, 1);
    add("Split3", 1, 2, 1, 3);
    add("Sink", 0, 4, 0, 0);
    add("const", 1, 1, 1, 1);  // an op named like a keyword must still print and parse
    return true;
  }();
  (void)done;
}

class TextFormatTest : public ::testing::Test {
 protected:
  void SetUp() override { register_text_test_ops(); }

  // Parses `text`, which must be in canonical form, and checks it prints back identically.
  static Graph expect_round_trip(const std::string& text, const ParseOptions& options = {}) {
    auto parsed = parse_graph(text, options);
    EXPECT_TRUE(parsed.is_ok()) << parsed.status().message() << "\nin:\n" << text;
    if (!parsed.is_ok()) return Graph();
    EXPECT_EQ(print_graph(*parsed), text);
    return std::move(parsed).value();
  }

  static std::string parse_error(const std::string& text, const ParseOptions& options = {}) {
    auto parsed = parse_graph(text, options);
    EXPECT_FALSE(parsed.is_ok()) << "parsed unexpectedly:\n" << text;
    if (parsed.is_ok()) return "";
    EXPECT_EQ(parsed.status().kind(), ErrorKind::kUser);
    return parsed.status().message();
  }
};

uint32_t float_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

TEST_F(TextFormatTest, PrintsAGraphBuiltInCode) {
  Graph g;
  g.opset_imports[""] = 13;
  Value* x = g.add_input("x", DType::kF32, {Dim::symbol("batch"), Dim(3)});
  Value* w = g.add_constant("w", Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6.5f}));
  auto node = g.add_node("Kitchen", {x, w, nullptr}, {"y"},
                         {{"f", 1.0f}, {"i", int64_t{1}}, {"s", std::string("linear")}},
                         "fc/Gemm", "test.text");
  ASSERT_TRUE(node.is_ok()) << node.status().message();
  Value* y = (*node)->output(0);
  y->dtype = DType::kF32;
  y->shape = Shape{Dim::symbol("batch"), Dim(2)};
  g.add_output(y);
  EXPECT_EQ(print_graph(g),
            "graph @main opset 13 (%x: f32[batch,3]) {\n"
            "  %w: f32[2,3] = const [1, 2, 3, 4, 5, 6.5]\n"
            "  %y: f32[batch,2] = test.text::Kitchen(%x, %w, _) {f = 1.0, i = 1, s = \"linear\"} "
            "#\"fc/Gemm\"\n"
            "  return %y\n"
            "}\n");
}

TEST_F(TextFormatTest, ParsesIntoTheExpectedGraph) {
  auto g = parse_graph(R"(
    // comments are allowed anywhere
    graph @main (%x: f32[batch,3], %m: i64[*]) {
      %w: f32[2] = const [0.5, -1]
      %y: f32[batch,2], %z = test.text::Split3(%x, %w) #s
      return %z, %x
    })");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_EQ(g->inputs().size(), 2u);
  EXPECT_EQ(g->inputs()[0]->name(), "x");
  EXPECT_EQ(g->inputs()[0]->dtype, DType::kF32);
  EXPECT_EQ(*g->inputs()[0]->shape, (Shape{Dim::symbol("batch"), Dim(3)}));
  EXPECT_EQ(g->inputs()[1]->dtype, DType::kI64);
  EXPECT_FALSE(g->inputs()[1]->shape.has_value());
  const Value* w = g->find_value("w");
  ASSERT_TRUE(w && w->is_constant());
  EXPECT_EQ(w->constant()->to_float_vector(), (std::vector<float>{0.5f, -1.0f}));
  ASSERT_EQ(g->num_nodes(), 1u);
  const Node* n = g->nodes()[0];
  EXPECT_EQ(n->name(), "s");
  EXPECT_EQ(n->op_type(), "Split3");
  EXPECT_EQ(n->domain(), "test.text");
  ASSERT_EQ(n->outputs().size(), 2u);
  EXPECT_EQ(n->output(0)->name(), "y");
  EXPECT_EQ(n->output(0)->type_string(), "f32[batch,2]");  // written types are kept
  EXPECT_EQ(n->output(1)->dtype, DType::kUndefined);       // and nothing is inferred
  ASSERT_EQ(g->outputs().size(), 2u);
  EXPECT_EQ(g->outputs()[0]->name(), "z");
  EXPECT_EQ(g->outputs()[1]->name(), "x");
}

TEST_F(TextFormatTest, RoundTripsEveryAttributeKind) {
  const std::string text =
      "graph @main (%x: f32[2]) {\n"
      "  %y: f32[2] = test.text::Kitchen(%x) {e1 = ints [], e2 = floats [], e3 = strings [], "
      "f = 0.1, fs = [1.0, -2.5, 1e-05], i = -7, is = [1, -2, 9223372036854775807], "
      "s = \"a \\\"quoted\\\" \\\\ line\\n\\x01\", ss = [\"p\", \"\"], "
      "t = tensor<i64[2]> [3, 4], t2 = tensor<f32[]> [2.5], t3 = tensor<bool[3]> splat true}\n"
      "  return %y\n"
      "}\n";
  Graph g = expect_round_trip(text);
  ASSERT_EQ(g.num_nodes(), 1u);
  const Attributes& a = g.nodes()[0]->attrs;
  EXPECT_EQ(std::get<std::vector<int64_t>>(a.at("e1")), std::vector<int64_t>{});
  EXPECT_EQ(std::get<std::vector<float>>(a.at("e2")), std::vector<float>{});
  EXPECT_EQ(std::get<std::vector<std::string>>(a.at("e3")), std::vector<std::string>{});
  EXPECT_EQ(float_bits(std::get<float>(a.at("f"))), float_bits(0.1f));
  EXPECT_EQ(std::get<std::vector<float>>(a.at("fs")), (std::vector<float>{1.0f, -2.5f, 1e-5f}));
  EXPECT_EQ(std::get<int64_t>(a.at("i")), -7);
  EXPECT_EQ(std::get<std::vector<int64_t>>(a.at("is")),
            (std::vector<int64_t>{1, -2, std::numeric_limits<int64_t>::max()}));
  EXPECT_EQ(std::get<std::string>(a.at("s")), std::string("a \"quoted\" \\ line\n\x01"));
  EXPECT_EQ(std::get<std::vector<std::string>>(a.at("ss")), (std::vector<std::string>{"p", ""}));
  const Tensor& t = std::get<Tensor>(a.at("t"));
  EXPECT_EQ(t.type_string(), "i64[2]");
  EXPECT_EQ(t.to_int_vector(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(std::get<Tensor>(a.at("t2")).type_string(), "f32[]");
  EXPECT_EQ(std::get<Tensor>(a.at("t3")).to_int_vector(), (std::vector<int64_t>{1, 1, 1}));
}

TEST_F(TextFormatTest, FloatAttributesAreBitExact) {
  const std::vector<float> values = {0.1f, 1e-5f, -0.0f, 0.0f, 1.0f, 3.4028235e38f, 1e-45f,
                                     123456789.0f, std::numeric_limits<float>::infinity(),
                                     -std::numeric_limits<float>::infinity()};
  Graph g;
  Value* x = g.add_input("x", DType::kF32, make_shape({1}));
  Attributes attrs{{"fs", values},
                   {"n", std::numeric_limits<float>::quiet_NaN()},
                   {"z", -0.0f},
                   {"one", 1.0f}};
  auto node = g.add_node("Kitchen", {x}, {"y"}, attrs, "", "test.text");
  ASSERT_TRUE(node.is_ok());
  g.add_output((*node)->output(0));
  const std::string text = print_graph(g);
  // Floats always read as floats (a '.' or an exponent), in their shortest exact spelling.
  EXPECT_NE(text.find("fs = [0.1, 1e-05, -0.0, 0.0, 1.0, 3.4028235e+38, 1e-45, 123456792.0, inf, "
                      "-inf]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("n = nan, one = 1.0, z = -0.0"), std::string::npos) << text;
  Graph back = expect_round_trip(text);
  const Attributes& a = back.nodes()[0]->attrs;
  const auto& fs = std::get<std::vector<float>>(a.at("fs"));
  ASSERT_EQ(fs.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(float_bits(fs[i]), float_bits(values[i])) << i;
  EXPECT_TRUE(std::isnan(std::get<float>(a.at("n"))));
  EXPECT_EQ(float_bits(std::get<float>(a.at("z"))), 0x80000000u);
  EXPECT_EQ(attr_type_of(a.at("one")), AttrType::kFloat);
}

TEST_F(TextFormatTest, ConstantsOfEveryDType) {
  const std::string text =
      "graph @main () {\n"
      "  %a: f32[4] = const [0.1, -0, inf, nan]\n"
      "  %b: f16[4] = const [0.1, -2, 65504, -inf]\n"
      "  %c: f64[2] = const [0.1, 1e-300]\n"
      "  %d: i64[2] = const [-9223372036854775808, 9223372036854775807]\n"
      "  %e: i32[2] = const [-2147483648, 7]\n"
      "  %f: i16[1] = const [-32768]\n"
      "  %g: i8[2] = const [-128, 127]\n"
      "  %h: u64[1] = const [18446744073709551615]\n"
      "  %i: u32[1] = const [4294967295]\n"
      "  %j: u16[1] = const [65535]\n"
      "  %k: u8[2] = const [0, 255]\n"
      "  %l: bool[3] = const [true, false, true]\n"
      "  %s: i64[] = const [42]\n"
      "  %z: f32[0] = const []\n"
      "  return %a, %b, %c, %d, %e, %f, %g, %h, %i, %j, %k, %l, %s, %z\n"
      "}\n";
  Graph g = expect_round_trip(text);
  auto data = [&](const char* name) { return g.find_value(name)->constant(); };
  EXPECT_EQ(float_bits(data("a")->data<float>()[0]), float_bits(0.1f));
  EXPECT_EQ(float_bits(data("a")->data<float>()[1]), 0x80000000u);
  EXPECT_TRUE(std::isnan(data("a")->data<float>()[3]));
  // IEEE half bits: 0.1 rounds to 0x2e66, -2 is 0xc000, 65504 (max) is 0x7bff, -inf is 0xfc00.
  const Half* h = data("b")->data<Half>();
  EXPECT_EQ(h[0].bits, 0x2e66);
  EXPECT_EQ(h[1].bits, 0xc000);
  EXPECT_EQ(h[2].bits, 0x7bff);
  EXPECT_EQ(h[3].bits, 0xfc00);
  EXPECT_EQ(data("c")->data<double>()[0], 0.1);
  EXPECT_EQ(data("c")->data<double>()[1], 1e-300);
  EXPECT_EQ(data("d")->data<int64_t>()[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(data("g")->data<int8_t>()[0], -128);
  EXPECT_EQ(data("h")->data<uint64_t>()[0], std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(data("k")->data<uint8_t>()[1], 255);
  EXPECT_EQ(data("l")->data<bool>()[1], false);
  EXPECT_EQ(data("l")->data<bool>()[2], true);
  EXPECT_EQ(data("s")->rank(), 0);
  EXPECT_EQ(data("s")->get_int(0), 42);
  EXPECT_EQ(data("z")->numel(), 0);
}

TEST_F(TextFormatTest, HalfConstantsBuiltInCodePrintShortestDecimals) {
  Graph g;
  g.add_output(g.add_constant(
      "h", Tensor::from_vector<Half>({3}, {Half{0x2e66}, Half{0x0001}, Half{0x3c00}})));
  // 0x0001 is the smallest subnormal, 2^-24 = 5.96e-08.
  EXPECT_NE(print_graph(g).find("%h: f16[3] = const [0.1, 6e-08, 1]"), std::string::npos)
      << print_graph(g);
  expect_round_trip(print_graph(g));
}

TEST_F(TextFormatTest, SymbolicUnknownAndUntypedValues) {
  expect_round_trip(
      "graph @main (%x: f32[batch,\"2*seq\",?,3], %u: f32[*], %v, %w: ?[2], %s: bool[]) {\n"
      "  %y = test.text::Kitchen(%x, %u, %v, %w)\n"
      "  %q = test.text::Kitchen(%s) #Kitchen_0\n"
      "  return %y\n"
      "}\n");
  // `?[*]` says nothing, so it prints as no type at all.
  auto g = parse_graph("graph @main (%x: ?[*]) { return %x }");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(print_graph(*g), "graph @main (%x) {\n  return %x\n}\n");
}

TEST_F(TextFormatTest, QuotedNamesAndKeywords) {
  Graph g = expect_round_trip(
      "graph @\"my graph\" (%\"onnx::Conv_12\": f32[\"tensor\"], %0: f32[1]) {\n"
      "  %\"a b\" = test.text::\"const\"(%\"onnx::Conv_12\") #\"node/\\\"1\\\"\"\n"
      "  %1.weight = test.text::Kitchen(%0) {\"attr name\" = 1, \"tensor\" = 2}\n"
      "  return %\"a b\", %1.weight\n"
      "}\n");
  EXPECT_EQ(g.name, "my graph");
  ASSERT_NE(g.find_value("onnx::Conv_12"), nullptr);
  EXPECT_EQ(g.find_value("onnx::Conv_12")->shape->at(0).symbol_name(), "tensor");
  ASSERT_EQ(g.num_nodes(), 2u);
  EXPECT_EQ(g.nodes()[0]->op_type(), "const");
  EXPECT_EQ(g.nodes()[0]->name(), "node/\"1\"");
  EXPECT_TRUE(g.nodes()[1]->attrs.count("attr name"));
}

TEST_F(TextFormatTest, OptionalInputsMultipleOutputsAndNoOutputs) {
  Graph g = expect_round_trip(
      "graph @main (%x: f32[6]) {\n"
      "  %p: f32[2], %q: f32[2], %r: f32[2] = test.text::Split3(%x, _) {axis = 0}\n"
      "  %y = test.text::Kitchen(_, %p, _, _)\n"
      "  test.text::Sink(%q, %r)\n"
      "  test.text::Sink() #sink2\n"
      "  return %y\n"
      "}\n");
  ASSERT_EQ(g.num_nodes(), 4u);
  const Node* split = g.nodes()[0];
  EXPECT_EQ(split->inputs().size(), 2u);
  EXPECT_FALSE(split->has_input(1));
  EXPECT_EQ(split->outputs().size(), 3u);
  const Node* kitchen = g.nodes()[1];
  EXPECT_EQ(kitchen->inputs().size(), 4u);  // trailing omitted inputs are kept
  EXPECT_EQ(kitchen->input(1), split->output(0));
  EXPECT_EQ(g.nodes()[2]->outputs().size(), 0u);
  EXPECT_EQ(g.nodes()[2]->name(), "Sink");  // unnamed nodes are named after their op
}

TEST_F(TextFormatTest, OpsetImportsAndInputDefaults) {
  Graph g = expect_round_trip(
      "graph @main opset 13, com.microsoft 1, test.text 2 (%x: f32[2], %k: i64[1] = const [3]) {\n"
      "  return %x, %k\n"
      "}\n");
  EXPECT_EQ(g.opset_imports.at(""), 13);
  EXPECT_EQ(g.opset_imports.at("com.microsoft"), 1);
  EXPECT_EQ(g.opset_imports.at("test.text"), 2);
  const Value* k = g.find_value("k");
  EXPECT_TRUE(k->is_graph_input());
  ASSERT_TRUE(k->is_constant());
  EXPECT_EQ(k->constant()->get_int(0), 3);
}

TEST_F(TextFormatTest, LargeConstantsAreElidedOrSplatted) {
  Graph g;
  std::vector<float> ramp(20);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<float>(i);
  g.add_output(g.add_constant("w", Tensor::from_vector<float>({4, 5}, ramp)));
  g.add_output(g.add_constant("z", Tensor::from_vector<float>({64}, std::vector<float>(64, 0.5f))));
  Attributes attrs{{"t", Tensor::from_vector<int64_t>({20}, std::vector<int64_t>(ramp.begin(), ramp.end()))}};
  auto node = g.add_node("Kitchen", {}, {"y"}, attrs, "", "test.text");
  ASSERT_TRUE(node.is_ok());
  g.add_output((*node)->output(0));
  const std::string text = print_graph(g);
  EXPECT_EQ(text,
            "graph @main () {\n"
            "  %w: f32[4,5] = const elided\n"
            "  %z: f32[64] = const splat 0.5\n"
            "  %y = test.text::Kitchen() {t = tensor<i64[20]> elided}\n"
            "  return %w, %z, %y\n"
            "}\n");
  // With a higher limit the data is printed and survives.
  PrintOptions all;
  all.max_constant_elements = 100;
  EXPECT_NE(print_graph(g, all).find("const [0, 1, 2, 3, 4, 5, 6"), std::string::npos);

  EXPECT_EQ(parse_error(text),
            "line 2:24: constant data is elided; print with a larger "
            "PrintOptions::max_constant_elements, or parse with "
            "ParseOptions::elided_constants = kZeros or kPattern");
  ParseOptions zeros;
  zeros.elided_constants = ParseOptions::Elided::kZeros;
  auto z = parse_graph(text, zeros);
  ASSERT_TRUE(z.is_ok()) << z.status().message();
  EXPECT_EQ(z->find_value("w")->constant()->to_float_vector(), std::vector<float>(20, 0.0f));
  EXPECT_EQ(z->find_value("z")->constant()->to_float_vector(), std::vector<float>(64, 0.5f));

  ParseOptions pattern;
  pattern.elided_constants = ParseOptions::Elided::kPattern;
  Graph p = expect_round_trip(text, pattern);
  std::vector<float> w = p.find_value("w")->constant()->to_float_vector();
  EXPECT_EQ(w[0], -1.0f);     // (0 % 17 - 8) / 8
  EXPECT_EQ(w[1], -0.875f);   // (1 - 8) / 8
  EXPECT_EQ(w[16], 1.0f);     // (16 - 8) / 8
  EXPECT_EQ(w[17], -1.0f);    // wraps at 17
  EXPECT_EQ(std::get<Tensor>(p.nodes()[0]->attrs.at("t")).get_int(3), -5);
}

TEST_F(TextFormatTest, SplatConstantsWrittenByHand) {
  auto g = parse_graph("graph @main () {\n  %s: i8[2,2] = const splat -3\n  return %s\n}\n");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->find_value("s")->constant()->to_int_vector(), (std::vector<int64_t>{-3, -3, -3, -3}));
}

TEST_F(TextFormatTest, ParseErrorsNameLineColumnAndWhatWasExpected) {
  const std::string header = "graph @main (%x: f32[2]) {\n";
  struct Case {
    std::string text;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"graph @main (%x: f32[2] {\n", "line 1:25: expected ')' after inputs, found '{'"},
      {"graph main () {}", "line 1:7: expected a graph name like @main after 'graph', found 'main'"},
      {header + "  %y = Nope(%x)\n  return %y\n}", "line 2:8: unknown op 'Nope' (domain ai.onnx)"},
      {header + "  %y = test.text::Kitchen(%zz)\n  return %y\n}",
       "line 2:27: undefined value %zz (values must be defined before they are used)"},
      {header + "  %y = test.text::Kitchen(%x)\n  %y = test.text::Kitchen(%x)\n  return %y\n}",
       "line 3:3: value %y is defined twice (first at line 2:3)"},
      {header + "  %x = test.text::Kitchen(%x)\n  return %x\n}",
       "line 2:3: value %x is defined twice (first at line 1:14)"},
      {header + "  %y = test.text::Kitchen(%x) {a = []}\n  return %y\n}",
       "line 2:36: an empty list needs its type: ints [], floats [] or strings []"},
      {header + "  %y = test.text::Kitchen(%x) {a = 1, a = 2}\n  return %y\n}",
       "line 2:39: attribute 'a' is set twice"},
      {header + "  %c: u8[2] = const [1, 300]\n  return %c\n}",
       "line 2:25: value 300 is out of range for u8"},
      {header + "  %c: f32[2,2] = const [1, 2, 3]\n  return %c\n}",
       "line 2:24: type f32[2,2] has 4 elements but the data has 3"},
      {header + "  %c: f32[2] = const [1, 1e39]\n  return %c\n}",
       "line 2:26: number 1e39 is out of range for f32"},
      {header + "  %c: f32[n] = const [1]\n  return %c\n}",
       "line 2:3: a constant needs a dtype and known dims, like f32[2,3]"},
      {header + "  %c: i64[2] = const [1, 2.5]\n  return %c\n}",
       "line 2:26: expected a i64 integer, found '2.5'"},
      {header + "  %y = test.text::Kitchen(%x) {s = \"abc}\n  return %y\n}",
       "line 2:36: unterminated string"},
      {header + "  %y = test.text::Kitchen(%x) $\n  return %y\n}",
       "line 2:31: unexpected character '$'"},
      {header + "  %y = test.text::Kitchen(%x) #n\n  %z = test.text::Kitchen(%x) #n\n  return %y\n}",
       "line 3:31: node name #n is used twice"},
      {header + "  %y = test.text::Kitchen(%x)\n}", "line 3:1: expected 'return' before '}', found '}'"},
      {header + "  return %x\n} extra", "line 3:3: expected end of input after the graph, found 'extra'"},
      {header + "  return %x\n", "line 3:1: expected '}' after return, found end of input"},
      {header + "  %y: f32[-1] = test.text::Kitchen(%x)\n  return %y\n}", "line 2:11: dim -1 is negative"},
      {header + "  %y: float[2] = test.text::Kitchen(%x)\n  return %y\n}",
       "line 2:7: expected a dtype (f32, f16, f64, i64, i32, i16, i8, u64, u32, u16, u8, bool or ?), "
       "found 'float'"},
      {"graph @main opset 13, 14 () {\n  return\n}", "line 1:23: opset of domain ai.onnx is given twice"},
  };
  for (const Case& c : cases) EXPECT_EQ(parse_error(c.text), c.error) << c.text;
}

TEST_F(TextFormatTest, HugeSplatIsRejectedBeforeAllocating) {
  const std::string err =
      parse_error("graph @main () {\n  %c: f32[100000,100000] = const splat 0\n  return %c\n}");
  EXPECT_NE(err.find("line 2:34: constant f32[100000,100000] is larger than "
                     "ParseOptions::max_constant_bytes"),
            std::string::npos)
      << err;
  EXPECT_NE(parse_error("graph @main () {\n  %c: f32[9223372036854775807,4] = const splat 0\n"
                        "  return %c\n}")
                .find("overflows"),
            std::string::npos);
  // The budget covers all constants together.
  ParseOptions small;
  small.max_constant_bytes = 1000;
  const std::string two =
      "graph @main () {\n  %a: f32[200] = const splat 1\n  %b: f32[200] = const splat 2\n"
      "  return %a, %b\n}";
  EXPECT_EQ(parse_error(two, small),
            "line 3:24: constant f32[200] is larger than ParseOptions::max_constant_bytes (1000 "
            "bytes, of which 800 are used by earlier constants)");
  small.max_constant_bytes = 1600;
  EXPECT_TRUE(parse_graph(two, small).is_ok());
}

// With the built-in ops: text -> graph that verifies and infers as hand-computed -> same text.
TEST_F(TextFormatTest, BuiltInOpsParseVerifyAndInfer) {
  auto g = parse_graph(
      "graph @main opset 13 (%x: f32[batch,6], %b: f32[6]) {\n"
      "  %s: i64[2] = const [2, 4]\n"
      "  %sum = Add(%x, %b)\n"
      "  %act = LeakyRelu(%sum) {alpha = 0.1}\n"
      "  %p, %q = Split(%act, %s) {axis = 1}\n"
      "  return %p, %q\n"
      "}\n");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  Status verified = verify_graph(*g);
  ASSERT_TRUE(verified.is_ok()) << verified.message();
  Status inferred = infer_shapes(*g);
  ASSERT_TRUE(inferred.is_ok()) << inferred.message();
  EXPECT_EQ(print_graph(*g),
            "graph @main opset 13 (%x: f32[batch,6], %b: f32[6]) {\n"
            "  %s: i64[2] = const [2, 4]\n"
            "  %sum: f32[batch,6] = Add(%x, %b)\n"
            "  %act: f32[batch,6] = LeakyRelu(%sum) {alpha = 0.1}\n"
            "  %p: f32[batch,2], %q: f32[batch,4] = Split(%act, %s) {axis = 1}\n"
            "  return %p, %q\n"
            "}\n");
  expect_round_trip(print_graph(*g));
}

// Truncations and random mutations of a valid text must parse or fail with a user error, never
// crash; whatever parses must print to text that parses back and prints identically.
TEST_F(TextFormatTest, MangledTextNeverCrashes) {
  const std::string valid =
      "graph @main opset 13, com.microsoft 1 (%x: f32[batch,3], %\"q r\": i64[*], %k: i64[1] = "
      "const [3]) {\n"
      "  %w: f32[2,3] = const [1, 2, 3, 4, 5, 6]\n"
      "  %h: f16[2] = const [0.1, -inf]\n"
      "  %s: bool[4] = const splat true\n"
      "  %y: f32[batch,2] = test.text::Kitchen(%x, %w, _) {f = 1.0, fs = [0.1, nan], "
      "s = \"a\\n\", t = tensor<i8[2]> [1, -1], e = ints []} #\"fc/1\"\n"
      "  %p, %q: ?[2] = test.text::Split3(%y, %k) // comment\n"
      "  test.text::Sink(%p, %q)\n"
      "  return %y, %x\n"
      "}\n";
  ASSERT_TRUE(parse_graph(valid).is_ok()) << parse_graph(valid).status().message();

  auto check = [](const std::string& text) {
    auto g = parse_graph(text);
    if (!g.is_ok()) {
      EXPECT_EQ(g.status().kind(), ErrorKind::kUser) << g.status().message();
      EXPECT_EQ(g.status().message().rfind("line ", 0), 0u) << g.status().message();
      return;
    }
    const std::string printed = print_graph(*g);
    auto again = parse_graph(printed);
    ASSERT_TRUE(again.is_ok()) << again.status().message() << "\nfrom:\n" << text;
    EXPECT_EQ(print_graph(*again), printed) << "from:\n" << text;
  };

  for (size_t n = 0; n <= valid.size(); ++n) check(valid.substr(0, n));

  std::mt19937 rng(12345);
  const std::string alphabet = "%@#\"\\()[]{}<>,:=?*-_ .e0123456789afinx\n/\x01\xff";
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text = valid;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = rng() % text.size();
      switch (rng() % 4) {
        case 0: text[at] = alphabet[rng() % alphabet.size()]; break;
        case 1: text.erase(at, 1 + rng() % 8); break;
        case 2: text.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
        case 3: {  // duplicate a slice somewhere else
          const size_t len = std::min<size_t>(1 + rng() % 30, text.size() - at);
          text.insert(rng() % text.size(), text.substr(at, len));
          break;
        }
      }
    }
    check(text);
  }
  for (int iter = 0; iter < 500; ++iter) {  // pure noise
    std::string text(rng() % 64, ' ');
    for (char& c : text) c = static_cast<char>(rng() % 256);
    check(text);
  }
}

}  // namespace
}  // namespace opfuse
