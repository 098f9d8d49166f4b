// The elementwise op family and the generic scalar-expression evaluator. Expected values are
// numpy / torch results pasted as literals (float32 inputs, computed in float64 and rounded),
// hand-computed values, or simple per-element loops written independently of the evaluator.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ops/reference.h"
#include "ops/registry.h"
#include "ops/infer_shapes.h"

namespace opfuse {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
const char* const kNodeName = "node_under_test";

// "alpha=0.1,approximate=tanh": numbers become float attributes, anything else strings.
Attributes parse_attrs(const std::string& spec) {
  Attributes attrs;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t end = spec.find(',', pos);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(pos, end - pos);
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    char* rest = nullptr;
    const float f = std::strtof(value.c_str(), &rest);
    if (rest != nullptr && *rest == '\0') {
      attrs[key] = f;
    } else {
      attrs[key] = value;
    }
    pos = end + 1;
  }
  return attrs;
}

// Builds a one-node graph with graph inputs of the tensors' types (nullptr = omitted optional
// input), runs shape inference and then the reference kernel. Also checks that what inference
// said about the output matches the tensor the kernel produced.
Result<Tensor> run_op(const std::string& op, const std::vector<const Tensor*>& inputs,
                      Attributes attrs = {}) {
  Graph g;
  std::vector<Value*> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    values.push_back(inputs[i] ? g.add_input(str_cat("in", i), inputs[i]->dtype(), inputs[i]->shape())
                               : nullptr);
  }
  OPFUSE_ASSIGN_OR_RETURN(Node * node, g.add_node(op, values, {"y"}, std::move(attrs), kNodeName));
  g.add_output(node->output(0));
  OPFUSE_TRY(infer_shapes(g));
  OPFUSE_ASSIGN_OR_RETURN(std::vector<Tensor> outs, run_reference(*node, inputs));
  const Value* y = node->output(0);
  EXPECT_EQ(y->dtype, outs[0].dtype()) << op;
  EXPECT_TRUE(y->shape.has_value() && *y->shape == outs[0].shape())
      << op << ": inferred " << (y->shape ? shape_to_string(*y->shape) : "?") << ", kernel "
      << outs[0].type_string();
  return outs[0];
}

Tensor run_ok(const std::string& op, const std::vector<const Tensor*>& inputs, Attributes attrs = {}) {
  Result<Tensor> r = run_op(op, inputs, std::move(attrs));
  EXPECT_TRUE(r.is_ok()) << op << ": " << r.status().message();
  return r.is_ok() ? r.value() : Tensor();
}

// A user error whose message mentions every one of `needles`.
void expect_user_error(const Status& s, const std::vector<std::string>& needles) {
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.kind(), ErrorKind::kUser) << s.message();
  for (const std::string& n : needles) {
    EXPECT_NE(s.message().find(n), std::string::npos) << "'" << n << "' not in: " << s.message();
  }
}

bool close(double got, double want, double rel, double abs_tol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= abs_tol + rel * std::fabs(want);
}

void expect_values(const Tensor& t, const std::vector<double>& want, double rel = 4e-6,
                   double abs_tol = 1e-6, const std::string& what = "") {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size())) << what << " " << t.type_string();
  for (int64_t i = 0; i < t.numel(); ++i) {
    EXPECT_TRUE(close(t.get_double(i), want[i], rel, abs_tol))
        << what << " element " << i << ": got " << t.get_double(i) << ", want " << want[i];
  }
}

// --- unary ops: one table row per op, numpy/torch expected values ---------------------------

const std::vector<float> kX = {-3.5f, -2.5f, -1.0f, -0.5f, 0.0f, 0.3f, 0.5f, 1.5f, 2.5f, 4.0f};
const std::vector<float> kPos = {0.01f, 0.5f, 1.0f, 2.0f, 10.0f};

struct UnaryCase {
  const char* op;
  const char* attrs;
  const std::vector<float>& input;
  std::vector<double> want;
};

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
    {"Relu", "", kX, {0, 0, 0, 0, 0, 0.300000012, 0.5, 1.5, 2.5, 4}},
    {"LeakyRelu", "alpha=0.1", kX, {-0.349999994, -0.25, -0.100000001, -0.0500000007, 0, 0.300000012, 0.5, 1.5, 2.5, 4}},
    {"LeakyRelu", "", kX, {-0.035, -0.025, -0.01, -0.005, 0, 0.300000012, 0.5, 1.5, 2.5, 4}},
    {"Sigmoid", "", kX, {0.0293122306, 0.0758581832, 0.268941432, 0.377540678, 0.5, 0.574442506, 0.622459352, 0.817574501, 0.924141824, 0.982013762}},
    {"HardSigmoid", "", kX, {0, 0, 0.300000012, 0.400000006, 0.5, 0.560000002, 0.600000024, 0.800000012, 1, 1}},
    {"HardSigmoid", "alpha=0.5,beta=0.25", kX, {0, 0, 0, 0, 0.25, 0.400000006, 0.5, 1, 1, 1}},
    {"HardSwish", "", kX, {-0, -0.208333328, -0.333333343, -0.208333328, 0, 0.165000007, 0.291666657, 1.125, 2.29166675, 4}},
    {"Tanh", "", kX, {-0.998177886, -0.986614287, -0.761594176, -0.462117165, 0, 0.291312635, 0.462117165, 0.905148268, 0.986614287, 0.999329329}},
    {"Erf", "", kX, {-0.999999285, -0.999593019, -0.842700779, -0.520499885, 0, 0.328626782, 0.520499885, 0.966105163, 0.999593019, 1}},
    {"Exp", "", kX, {0.0301973838, 0.0820849985, 0.36787945, 0.606530666, 1, 1.34985888, 1.64872122, 4.48168898, 12.1824942, 54.5981483}},
    {"Reciprocal", "", kX, {-0.285714298, -0.400000006, -1, -2, kInf, 3.33333325, 2, 0.666666687, 0.400000006, 0.25}},
    {"Neg", "", kX, {3.5, 2.5, 1, 0.5, -0, -0.300000012, -0.5, -1.5, -2.5, -4}},
    {"Abs", "", kX, {3.5, 2.5, 1, 0.5, 0, 0.300000012, 0.5, 1.5, 2.5, 4}},
    {"Elu", "alpha=0.5", kX, {-0.484901309, -0.458957493, -0.316060275, -0.196734667, 0, 0.300000012, 0.5, 1.5, 2.5, 4}},
    {"Elu", "", kX, {-0.969802618, -0.917914987, -0.63212055, -0.393469334, 0, 0.300000012, 0.5, 1.5, 2.5, 4}},
    {"Selu", "", kX, {-1.70500934, -1.61378574, -1.11133075, -0.691758215, 0, 0.315210313, 0.525350511, 1.57605147, 2.62675238, 4.20280409}},
    {"Softplus", "", kX, {0.0297504179, 0.078889735, 0.313261688, 0.474076986, 0.693147182, 0.854355276, 0.974076986, 1.70141327, 2.57888985, 4.01814985}},
    {"Softsign", "", kX, {-0.777777791, -0.714285731, -0.5, -0.333333343, 0, 0.230769232, 0.333333343, 0.600000024, 0.714285731, 0.800000012}},
    {"ThresholdedRelu", "alpha=0.4", kX, {0, 0, 0, 0, 0, 0, 0.5, 1.5, 2.5, 4}},
    {"ThresholdedRelu", "", kX, {0, 0, 0, 0, 0, 0, 0, 1.5, 2.5, 4}},
    {"Celu", "alpha=2", kX, {-1.65245211, -1.42699039, -0.786938667, -0.442398429, 0, 0.300000012, 0.5, 1.5, 2.5, 4}},
    {"Floor", "", kX, {-4, -3, -1, -1, 0, 0, 0, 1, 2, 4}},
    {"Ceil", "", kX, {-3, -2, -1, -0, 0, 1, 1, 2, 3, 4}},
    {"Round", "", kX, {-4, -2, -1, -0, 0, 0, 0, 2, 2, 4}},
    {"Sign", "", kX, {-1, -1, -1, -1, 0, 1, 1, 1, 1, 1}},
    {"Sin", "", kX, {0.350783229, -0.598472118, -0.841470957, -0.47942555, 0, 0.295520216, 0.47942555, 0.997494996, 0.598472118, -0.756802499}},
    {"Cos", "", kX, {-0.93645668, -0.801143587, 0.540302277, 0.87758255, 1, 0.955336511, 0.87758255, 0.070737198, -0.801143587, -0.653643608}},
    {"Gelu", "", kX, {-0.000814201776, -0.0155241629, -0.158655256, -0.154268771, 0, 0.18537344, 0.345731229, 1.39978921, 2.48447585, 3.9998734}},
    {"Gelu", "approximate=tanh", kX, {-0.000616197649, -0.0150842657, -0.158808008, -0.154285997, 0, 0.185370937, 0.345714003, 1.39957154, 2.48491573, 3.99992967}},
    {"Mish", "", kX, {-0.104095757, -0.196816206, -0.30340147, -0.220743775, 0, 0.208001375, 0.375245214, 1.40337825, 2.47139239, 3.99741292}},
    {"Log", "", kPos, {-4.60517025, -0.693147182, 0, 0.693147182, 2.30258512}},
    {"Sqrt", "", kPos, {0.100000001, 0.707106769, 1, 1.41421354, 3.1622777}},
    // Clip with no bounds is the identity.
    {"Clip", "", kX, {-3.5, -2.5, -1, -0.5, 0, 0.300000012, 0.5, 1.5, 2.5, 4}},
  };
  return cases;
}

TEST(ElementwiseUnaryTest, MatchesNumpyOnF32) {
  for (const UnaryCase& c : unary_cases()) {
    const Tensor x = Tensor::from_vector<float>({static_cast<int64_t>(c.input.size())}, c.input);
    const Tensor y = run_ok(c.op, {&x}, parse_attrs(c.attrs));
    ASSERT_EQ(y.dtype(), DType::kF32) << c.op;
    expect_values(y, c.want, 4e-6, 1e-6, str_cat(c.op, " ", c.attrs));
  }
}

TEST(ElementwiseUnaryTest, RoundIsHalfToEven) {
  const Tensor x = Tensor::from_vector<float>({6}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4999f});
  expect_values(run_ok("Round", {&x}), {0, 2, 2, -0.0, -2, 2});
}

TEST(ElementwiseUnaryTest, NaNPropagatesThroughReluAndMax) {
  const Tensor x = Tensor::from_vector<float>({2}, {kNaN, -1.0f});
  expect_values(run_ok("Relu", {&x}), {kNaN, 0});
  const Tensor zero = Tensor::scalar<float>(0.0f);
  expect_values(run_ok("Max", {&zero, &x}), {kNaN, 0});
  expect_values(run_ok("Min", {&x, &zero}), {kNaN, -1});
}

TEST(ElementwiseUnaryTest, IsNaNAndNotGiveBool) {
  const Tensor x = Tensor::from_vector<float>({3}, {kNaN, 1.0f, kInf});
  const Tensor nan = run_ok("IsNaN", {&x});
  ASSERT_EQ(nan.dtype(), DType::kBool);
  expect_values(nan, {1, 0, 0});
  const Tensor b = Tensor::from_vector<bool>({3}, {true, false, true});
  const Tensor n = run_ok("Not", {&b});
  ASSERT_EQ(n.dtype(), DType::kBool);
  expect_values(n, {0, 1, 0});
}

TEST(ElementwiseUnaryTest, IntegerReluNegAbsSign) {
  const Tensor x = Tensor::from_vector<int32_t>({4}, {-7, 0, 5, -1});
  const Tensor relu = run_ok("Relu", {&x});
  EXPECT_EQ(relu.dtype(), DType::kI32);
  expect_values(relu, {0, 0, 5, 0});
  expect_values(run_ok("Neg", {&x}), {7, 0, -5, 1});
  expect_values(run_ok("Abs", {&x}), {7, 0, 5, 1});
  expect_values(run_ok("Sign", {&x}), {-1, 0, 1, -1});
  // Negating the most negative i8 wraps, as two's complement does.
  const Tensor small = Tensor::from_vector<int8_t>({2}, {-128, 127});
  expect_values(run_ok("Neg", {&small}), {-128, -127});
}

// --- binary ops ------------------------------------------------------------------------------

TEST(ElementwiseBinaryTest, ArithmeticOnF32) {
  const Tensor a = Tensor::from_vector<float>({4}, {2.0f, -3.0f, 0.5f, 4.0f});
  const Tensor b = Tensor::from_vector<float>({4}, {3.0f, 2.0f, -1.0f, 0.5f});
  expect_values(run_ok("Add", {&a, &b}), {5, -1, -0.5, 4.5});
  expect_values(run_ok("Sub", {&a, &b}), {-1, -5, 1.5, 3.5});
  expect_values(run_ok("Mul", {&a, &b}), {6, -6, -0.5, 2});
  expect_values(run_ok("Div", {&a, &b}), {0.666666687, -1.5, -0.5, 8});
  expect_values(run_ok("Pow", {&a, &b}), {8, 9, 2, 2});
  expect_values(run_ok("Max", {&a, &b}), {3, 2, 0.5, 4});
  expect_values(run_ok("Min", {&a, &b}), {2, -3, -1, 0.5});
}

TEST(ElementwiseBinaryTest, FloatModAndFmod) {
  const Tensor a = Tensor::from_vector<float>({4}, {5.5f, -5.5f, 5.5f, -5.5f});
  const Tensor b = Tensor::from_vector<float>({4}, {2.0f, 2.0f, -2.0f, -2.0f});
  // numpy.fmod: sign of the dividend; numpy.mod: sign of the divisor.
  expect_values(run_ok("Mod", {&a, &b}, {{"fmod", int64_t{1}}}), {1.5, -1.5, 1.5, -1.5});
  expect_values(run_ok("Mod", {&a, &b}), {1.5, 0.5, -0.5, -1.5});
}

TEST(ElementwiseBinaryTest, IntegerDivTruncatesAndModFollowsOnnx) {
  const Tensor a = Tensor::from_vector<int64_t>({5}, {7, -7, 7, -7, 6});
  const Tensor b = Tensor::from_vector<int64_t>({5}, {2, 2, -2, -2, 3});
  const Tensor div = run_ok("Div", {&a, &b});
  EXPECT_EQ(div.dtype(), DType::kI64);
  EXPECT_EQ(div.to_int_vector(), (std::vector<int64_t>{3, -3, -3, 3, 2}));
  EXPECT_EQ(run_ok("Mod", {&a, &b}).to_int_vector(), (std::vector<int64_t>{1, 1, -1, -1, 0}));
  EXPECT_EQ(run_ok("Mod", {&a, &b}, {{"fmod", int64_t{1}}}).to_int_vector(),
            (std::vector<int64_t>{1, -1, 1, -1, 0}));
  // i32 keeps its dtype.
  const Tensor a32 = Tensor::from_vector<int32_t>({3}, {-9, 9, 100});
  const Tensor b32 = Tensor::from_vector<int32_t>({3}, {4, -4, 7});
  const Tensor d32 = run_ok("Div", {&a32, &b32});
  EXPECT_EQ(d32.dtype(), DType::kI32);
  EXPECT_EQ(d32.to_int_vector(), (std::vector<int64_t>{-2, -2, 14}));
  EXPECT_EQ(run_ok("Mod", {&a32, &b32}).to_int_vector(), (std::vector<int64_t>{3, -3, 2}));
}

TEST(ElementwiseBinaryTest, IntegerDivisionByZeroDoesNotCrash) {
  // ONNX leaves it undefined; opfuse returns 0 rather than trapping on user data.
  const Tensor a = Tensor::from_vector<int64_t>({3}, {5, std::numeric_limits<int64_t>::min(), 4});
  const Tensor b = Tensor::from_vector<int64_t>({3}, {0, -1, 0});
  const Tensor d = run_ok("Div", {&a, &b});
  EXPECT_EQ(d.get_int(0), 0);
  EXPECT_EQ(d.get_int(1), std::numeric_limits<int64_t>::min());  // wraps
  EXPECT_EQ(run_ok("Mod", {&a, &b}).to_int_vector(), (std::vector<int64_t>{0, 0, 0}));
}

TEST(ElementwiseBinaryTest, IntegerPowAndMixedTypePow) {
  const Tensor a = Tensor::from_vector<int64_t>({4}, {2, 3, -2, 5});
  const Tensor b = Tensor::from_vector<int64_t>({4}, {10, 2, 3, 0});
  EXPECT_EQ(run_ok("Pow", {&a, &b}).to_int_vector(), (std::vector<int64_t>{1024, 9, -8, 1}));
  // The exponent's type may differ from the base's; the output has the base's.
  const Tensor x = Tensor::from_vector<float>({3}, {2.0f, 9.0f, 1.5f});
  const Tensor e = Tensor::from_vector<int64_t>({3}, {-1, 2, 3});
  const Tensor y = run_ok("Pow", {&x, &e});
  EXPECT_EQ(y.dtype(), DType::kF32);
  expect_values(y, {0.5, 81, 3.375});
}

TEST(ElementwiseBinaryTest, ComparisonsGiveBool) {
  const Tensor a = Tensor::from_vector<float>({4}, {1.0f, 2.0f, 3.0f, kNaN});
  const Tensor b = Tensor::from_vector<float>({4}, {2.0f, 2.0f, 2.0f, kNaN});
  const struct {
    const char* op;
    std::vector<double> want;
  } cases[] = {{"Equal", {0, 1, 0, 0}},       {"Less", {1, 0, 0, 0}},
               {"Greater", {0, 0, 1, 0}},     {"LessOrEqual", {1, 1, 0, 0}},
               {"GreaterOrEqual", {0, 1, 1, 0}}};
  for (const auto& c : cases) {
    const Tensor y = run_ok(c.op, {&a, &b});
    EXPECT_EQ(y.dtype(), DType::kBool) << c.op;
    expect_values(y, c.want, 0, 0, c.op);
  }
  const Tensor i = Tensor::from_vector<int64_t>({3}, {-1, 5, 7});
  const Tensor j = Tensor::scalar<int64_t>(5);
  expect_values(run_ok("Less", {&i, &j}), {1, 0, 0});
  expect_values(run_ok("Equal", {&i, &j}), {0, 1, 0});
  const Tensor p = Tensor::from_vector<bool>({2}, {true, false});
  const Tensor q = Tensor::from_vector<bool>({2}, {true, true});
  expect_values(run_ok("Equal", {&p, &q}), {1, 0});
}

TEST(ElementwiseBinaryTest, LogicOps) {
  const Tensor a = Tensor::from_vector<bool>({4}, {false, false, true, true});
  const Tensor b = Tensor::from_vector<bool>({4}, {false, true, false, true});
  for (const auto& [op, want] : std::vector<std::pair<std::string, std::vector<double>>>{
           {"And", {0, 0, 0, 1}}, {"Or", {0, 1, 1, 1}}, {"Xor", {0, 1, 1, 0}}}) {
    const Tensor y = run_ok(op, {&a, &b});
    EXPECT_EQ(y.dtype(), DType::kBool) << op;
    expect_values(y, want, 0, 0, op);
  }
}

TEST(ElementwiseBinaryTest, VariadicSumMeanMaxMin) {
  const Tensor a = Tensor::from_vector<float>({2, 2}, {1, 2, 3, 4});
  const Tensor b = Tensor::from_vector<float>({2}, {10, -20});
  const Tensor c = Tensor::scalar<float>(0.5f);
  expect_values(run_ok("Sum", {&a, &b, &c}), {11.5, -17.5, 13.5, -15.5});
  expect_values(run_ok("Mean", {&a, &b, &c}), {11.5 / 3, -17.5 / 3, 13.5 / 3, -15.5 / 3});
  expect_values(run_ok("Max", {&a, &b, &c}), {10, 2, 10, 4});
  expect_values(run_ok("Min", {&a, &b, &c}), {0.5, -20, 0.5, -20});
  expect_values(run_ok("Sum", {&a}), {1, 2, 3, 4});
  expect_values(run_ok("Min", {&b}), {10, -20});
}

// --- broadcasting ----------------------------------------------------------------------------

TEST(ElementwiseBroadcastTest, ScalarOperand) {
  const Tensor a = Tensor::from_vector<float>({2, 3}, {1.5f, -2, 3, 0.25f, 4, -6});
  const Tensor s = Tensor::scalar<float>(10.0f);
  const Tensor y = run_ok("Add", {&a, &s});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2, 3}));
  expect_values(y, {11.5, 8, 13, 10.25, 14, 4});
  expect_values(run_ok("Sub", {&s, &a}), {8.5, 12, 7, 9.75, 6, 16});
}

TEST(ElementwiseBroadcastTest, PerChannelAgainstNCHW) {
  std::vector<float> xs(24);
  for (int i = 0; i < 24; ++i) xs[i] = static_cast<float>(i);
  const Tensor x = Tensor::from_vector<float>({2, 3, 2, 2}, xs);
  const Tensor b = Tensor::from_vector<float>({3, 1, 1}, {10, -1, 0.5f});
  const Tensor y = run_ok("Mul", {&x, &b});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2, 3, 2, 2}));
  expect_values(y, {0, 10, 20, 30, -4, -5, -6, -7, 4, 4.5, 5, 5.5,
                    120, 130, 140, 150, -16, -17, -18, -19, 10, 10.5, 11, 11.5});
}

TEST(ElementwiseBroadcastTest, SizeOneDimsOnBothSides) {
  const Tensor a = Tensor::from_vector<float>({3, 1}, {1, 2, 3});
  const Tensor b = Tensor::from_vector<float>({1, 4}, {10, 20, 30, 40});
  const Tensor y = run_ok("Sub", {&a, &b});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{3, 4}));
  expect_values(y, {-9, -19, -29, -39, -8, -18, -28, -38, -7, -17, -27, -37});
}

TEST(ElementwiseBroadcastTest, RankMismatch) {
  std::vector<float> xs(24);
  for (int i = 0; i < 24; ++i) xs[i] = static_cast<float>(i);
  const Tensor x = Tensor::from_vector<float>({2, 3, 4}, xs);
  const Tensor b = Tensor::from_vector<float>({4}, {100, 200, 300, 400});
  const Tensor y = run_ok("Add", {&b, &x});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2, 3, 4}));
  expect_values(y, {100, 201, 302, 403, 104, 205, 306, 407, 108, 209, 310, 411,
                    112, 213, 314, 415, 116, 217, 318, 419, 120, 221, 322, 423});
  // A rank-0 tensor against a [1,1,1] one gives [1,1,1].
  const Tensor s = Tensor::scalar<float>(2.0f);
  const Tensor one = Tensor::from_vector<float>({1, 1, 1}, {3});
  const Tensor p = run_ok("Mul", {&s, &one});
  EXPECT_EQ(p.dims(), (std::vector<int64_t>{1, 1, 1}));
  expect_values(p, {6});
}

TEST(ElementwiseBroadcastTest, MixedBroadcastAndTransposedPattern) {
  // [2,1,3] against [1,2,1]: neither input is contiguous with the [2,2,3] output.
  const Tensor a = Tensor::from_vector<int64_t>({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = Tensor::from_vector<int64_t>({1, 2, 1}, {10, 20});
  EXPECT_EQ(run_ok("Mul", {&a, &b}).to_int_vector(),
            (std::vector<int64_t>{10, 20, 30, 20, 40, 60, 40, 50, 60, 80, 100, 120}));
}

TEST(ElementwiseBroadcastTest, EmptyTensor) {
  const Tensor a = Tensor::zeros(DType::kF32, {0, 3}).value();
  const Tensor b = Tensor::from_vector<float>({3}, {1, 2, 3});
  const Tensor y = run_ok("Add", {&a, &b});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{0, 3}));
}

TEST(ElementwiseBroadcastTest, NonBroadcastableShapesNameTheNode) {
  const Tensor a = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = Tensor::from_vector<float>({4}, {1, 2, 3, 4});
  // Caught by shape inference on the graph...
  expect_user_error(run_op("Add", {&a, &b}).status(), {kNodeName, "[2,3]", "[4]"});
  // ...and by the kernel itself when the graph's shapes were symbolic.
  Graph g;
  Value* x = g.add_input("x", DType::kF32, {Dim::symbol("N"), Dim::symbol("M")});
  Value* y = g.add_input("y", DType::kF32, {Dim::symbol("K")});
  Node* node = g.add_node("Add", {x, y}, {"z"}, {}, "late_add").value();
  ASSERT_TRUE(infer_shapes(g).is_ok());
  expect_user_error(run_reference(*node, {&a, &b}).status(), {"late_add", "[2,3]", "[4]"});
}

TEST(ElementwiseBroadcastTest, WhereBroadcastsAllThreeInputs) {
  const Tensor c = Tensor::from_vector<bool>({2, 1}, {true, false});
  const Tensor x = Tensor::from_vector<float>({1, 3}, {1, 2, 3});
  const Tensor y = Tensor::scalar<float>(-1.0f);
  const Tensor w = run_ok("Where", {&c, &x, &y});
  EXPECT_EQ(w.dtype(), DType::kF32);
  EXPECT_EQ(w.dims(), (std::vector<int64_t>{2, 3}));
  expect_values(w, {1, 2, 3, -1, -1, -1});
  // Integer and bool branches keep their dtype.
  const Tensor xi = Tensor::from_vector<int32_t>({3}, {7, 8, 9});
  const Tensor yi = Tensor::scalar<int32_t>(0);
  const Tensor wi = run_ok("Where", {&c, &xi, &yi});
  EXPECT_EQ(wi.dtype(), DType::kI32);
  EXPECT_EQ(wi.to_int_vector(), (std::vector<int64_t>{7, 8, 9, 0, 0, 0}));
  const Tensor f = Tensor::scalar<float>(1.0f);
  expect_user_error(run_op("Where", {&f, &x, &y}).status(), {kNodeName, "f32", "bool"});
}

TEST(ElementwiseBroadcastTest, PReluSlopePerChannel) {
  const Tensor x = Tensor::from_vector<float>({1, 2, 1, 2}, {-2, 3, -4, 5});
  const Tensor slope = Tensor::from_vector<float>({2, 1, 1}, {0.5f, 0.25f});
  const Tensor y = run_ok("PRelu", {&x, &slope});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{1, 2, 1, 2}));
  expect_values(y, {-1, 3, -1, 5});
  // The slope may not grow X (unidirectional broadcasting).
  const Tensor big = Tensor::from_vector<float>({2, 2, 1, 2}, {1, 1, 1, 1, 1, 1, 1, 1});
  expect_user_error(run_op("PRelu", {&x, &big}).status(), {kNodeName, "slope"});
}

TEST(ElementwiseBroadcastTest, ClipWithMissingBounds) {
  const Tensor x = Tensor::from_vector<float>({5}, {-5, -1, 0, 1, 5});
  const Tensor lo = Tensor::scalar<float>(-2.0f);
  const Tensor hi = Tensor::scalar<float>(1.5f);
  expect_values(run_ok("Clip", {&x, &lo, &hi}), {-2, -1, 0, 1, 1.5});
  expect_values(run_ok("Clip", {&x, nullptr, &hi}), {-5, -1, 0, 1, 1.5});
  expect_values(run_ok("Clip", {&x, &lo}), {-2, -1, 0, 1, 5});
  expect_values(run_ok("Clip", {&x, &lo, nullptr}), {-2, -1, 0, 1, 5});
  // Integer data, including values near the type limits.
  const Tensor xi = Tensor::from_vector<int64_t>(
      {3}, {std::numeric_limits<int64_t>::min(), 3, std::numeric_limits<int64_t>::max()});
  const Tensor hi_i = Tensor::scalar<int64_t>(2);
  EXPECT_EQ(run_ok("Clip", {&xi, nullptr, &hi_i}).to_int_vector(),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 2, 2}));
  const Tensor u = Tensor::from_vector<uint8_t>({3}, {0, 100, 255});
  const Tensor lo_u = Tensor::scalar<uint8_t>(10);
  const Tensor clipped = run_ok("Clip", {&u, &lo_u});
  EXPECT_EQ(clipped.dtype(), DType::kU8);
  EXPECT_EQ(clipped.to_int_vector(), (std::vector<int64_t>{10, 100, 255}));
  // min must be a scalar.
  const Tensor vec = Tensor::from_vector<float>({2}, {0, 1});
  expect_user_error(run_op("Clip", {&x, &vec}).status(), {kNodeName, "min"});
}

// --- dtypes ----------------------------------------------------------------------------------

TEST(ElementwiseDTypeTest, CastTruncatesAndConvertsToBool) {
  const Tensor x = Tensor::from_vector<float>({5}, {-2.7f, -0.5f, 0.5f, 2.7f, 300.9f});
  const Tensor i = run_ok("Cast", {&x}, {{"to", int64_t{6}}});
  EXPECT_EQ(i.dtype(), DType::kI32);
  EXPECT_EQ(i.to_int_vector(), (std::vector<int64_t>{-2, 0, 0, 2, 300}));
  const Tensor z = Tensor::from_vector<float>({4}, {0.0f, -0.0f, 0.1f, -3.0f});
  const Tensor b = run_ok("Cast", {&z}, {{"to", int64_t{9}}});
  EXPECT_EQ(b.dtype(), DType::kBool);
  expect_values(b, {0, 0, 1, 1});
  const Tensor n = Tensor::from_vector<int64_t>({2}, {3, -4});
  const Tensor h = run_ok("Cast", {&n}, {{"to", int64_t{10}}});
  EXPECT_EQ(h.dtype(), DType::kF16);
  expect_values(h, {3, -4});
  expect_user_error(run_op("Cast", {&x}).status(), {kNodeName, "to"});
  expect_user_error(run_op("Cast", {&x}, {{"to", int64_t{8}}}).status(), {kNodeName, "8"});
}

TEST(ElementwiseDTypeTest, F16InputsComputeInFloatAndStayF16) {
  const Tensor a = Tensor::from_vector<Half>(
      {3}, {float_to_half(1.5f), float_to_half(-2.0f), float_to_half(0.25f)});
  const Tensor b = Tensor::from_vector<Half>({1}, {float_to_half(2.25f)});
  const Tensor sum = run_ok("Add", {&a, &b});
  EXPECT_EQ(sum.dtype(), DType::kF16);
  expect_values(sum, {3.75, 0.25, 2.5}, 0, 0);
  const Tensor s = run_ok("Sigmoid", {&a});
  EXPECT_EQ(s.dtype(), DType::kF16);
  expect_values(s, {0.817574476, 0.119202922, 0.562176501}, 1e-3, 0);
  const Tensor lt = run_ok("Less", {&a, &b});
  EXPECT_EQ(lt.dtype(), DType::kBool);
  expect_values(lt, {1, 1, 1});
}

TEST(ElementwiseDTypeTest, F64KeepsDoublePrecision) {
  const Tensor x = Tensor::from_vector<double>({3}, {1.0, 1e-10, -0.5});
  const Tensor e = run_ok("Exp", {&x});
  EXPECT_EQ(e.dtype(), DType::kF64);
  expect_values(e, {2.718281828459045, 1.0000000001, 0.6065306597126334}, 1e-15, 0);
  const Tensor d = Tensor::scalar<double>(3.0);
  expect_values(run_ok("Div", {&x, &d}), {1.0 / 3, 1e-10 / 3, -0.5 / 3}, 1e-15, 0);
}

TEST(ElementwiseDTypeTest, MismatchedDTypesAreUserErrorsNamingBoth) {
  const Tensor f = Tensor::from_vector<float>({2}, {1, 2});
  const Tensor i = Tensor::from_vector<int64_t>({2}, {1, 2});
  expect_user_error(run_op("Add", {&f, &i}).status(), {kNodeName, "f32", "i64"});
  expect_user_error(run_op("Exp", {&i}).status(), {kNodeName, "i64"});
  expect_user_error(run_op("And", {&f, &f}).status(), {kNodeName, "f32", "bool"});
  expect_user_error(run_op("Gelu", {&f}, {{"approximate", std::string("fast")}}).status(),
                    {kNodeName, "fast"});
}

// --- the parallel path -----------------------------------------------------------------------

std::vector<float> pseudo_random(size_t n, uint32_t seed) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    out[i] = static_cast<float>(static_cast<int32_t>(seed >> 8) % 20000) / 1000.0f - 10.0f;
  }
  return out;
}

TEST(ElementwiseLargeTest, PerChannelAddOverManyChunks) {
  const int64_t n = 4, c = 64, hw = 32 * 32;  // 262144 elements: the OpenMP path
  const std::vector<float> xs = pseudo_random(n * c * hw, 1);
  const std::vector<float> bs = pseudo_random(c, 2);
  const Tensor x = Tensor::from_vector<float>({n, c, 32, 32}, xs);
  const Tensor b = Tensor::from_vector<float>({c, 1, 1}, bs);
  const Tensor y = run_ok("Add", {&x, &b});
  ASSERT_EQ(y.numel(), n * c * hw);
  int64_t mismatches = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    if (y.data<float>()[i] != xs[i] + bs[(i / hw) % c]) ++mismatches;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(ElementwiseLargeTest, ActivationAndWhereOverManyChunks) {
  const std::vector<float> xs = pseudo_random(3 * 100003, 7);  // not a multiple of the chunk
  const Tensor x = Tensor::from_vector<float>({3, 100003}, xs);
  const Tensor hs = run_ok("HardSwish", {&x});
  int64_t bad = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const float v = xs[i];
    const float want = v * std::max(0.0f, std::min(1.0f, v / 6.0f + 0.5f));
    if (std::fabs(hs.data<float>()[i] - want) > 1e-5f) ++bad;
  }
  EXPECT_EQ(bad, 0);

  // cond [3,1] against x [3,100003] and a scalar y.
  const Tensor cond = Tensor::from_vector<bool>({3, 1}, {true, false, true});
  const Tensor y = Tensor::scalar<float>(42.0f);
  const Tensor w = run_ok("Where", {&cond, &x, &y});
  bad = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const float want = (i / 100003) == 1 ? 42.0f : xs[i];
    if (w.data<float>()[i] != want) ++bad;
  }
  EXPECT_EQ(bad, 0);
}

TEST(ElementwiseLargeTest, IntegerDivWithRowBroadcast) {
  const int64_t rows = 300, cols = 333;  // 99900 elements
  std::vector<int64_t> a(rows * cols), d(cols);
  for (int64_t i = 0; i < rows * cols; ++i) a[i] = (i * 7919) % 20001 - 10000;
  for (int64_t j = 0; j < cols; ++j) d[j] = (j % 2 ? 1 : -1) * (j % 13 + 1);
  const Tensor ta = Tensor::from_vector<int64_t>({rows, cols}, a);
  const Tensor td = Tensor::from_vector<int64_t>({cols}, d);
  const Tensor q = run_ok("Div", {&ta, &td});
  int64_t bad = 0;
  for (int64_t i = 0; i < rows * cols; ++i) {
    if (q.data<int64_t>()[i] != a[i] / d[i % cols]) ++bad;
  }
  EXPECT_EQ(bad, 0);
}

// --- shape inference, records ----------------------------------------------------------------

TEST(ElementwiseInferTest, SymbolicDimsFlowThrough) {
  Graph g;
  Value* x = g.add_input("x", DType::kF32, {Dim::symbol("N"), Dim(3), Dim::symbol("H"), Dim()});
  Value* b = g.add_input("b", DType::kF32, make_shape({3, 1, 1}));
  Value* s = g.add_input("s", DType::kF32, {Dim::symbol("S")});
  Value* t = g.add_input("t", DType::kF32, {Dim::symbol("T")});
  Value* one = g.add_input("one", DType::kF32, {Dim(1), Dim(5)});
  Value* r = g.add_value("r", DType::kF32);  // rank unknown
  Node* add = g.add_node("Add", {x, b}, {"y1"}).value();
  Node* lt = g.add_node("Less", {s, one}, {"y2"}).value();
  Node* mix = g.add_node("Mul", {s, t}, {"y3"}).value();
  Node* unk = g.add_node("Sub", {r, b}, {"y4"}).value();
  Node* relu = g.add_node("Relu", {x}, {"y5"}).value();
  ASSERT_TRUE(infer_shapes(g).is_ok());
  EXPECT_EQ(*add->output(0)->shape,
            (Shape{Dim::symbol("N"), Dim(3), Dim::symbol("H"), Dim()}));
  EXPECT_EQ(lt->output(0)->dtype, DType::kBool);
  EXPECT_EQ(*lt->output(0)->shape, (Shape{Dim(1), Dim(5)}));
  ASSERT_EQ(mix->output(0)->shape->size(), 1u);
  EXPECT_FALSE((*mix->output(0)->shape)[0].is_known());  // S against T: unknown
  EXPECT_FALSE(unk->output(0)->shape.has_value());
  EXPECT_EQ(*relu->output(0)->shape, *x->shape);
}

TEST(ElementwiseRecordTest, KindsTraitsAndFlops) {
  const OpRegistry& reg = OpRegistry::global();
  const char* const expected_ops[] = {
      "Relu", "LeakyRelu", "PRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Erf",
      "Exp", "Log", "Sqrt", "Reciprocal", "Neg", "Abs", "Pow", "Add", "Sub", "Mul", "Div", "Max",
      "Min", "Sum", "Mean", "Where", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
      "Not", "And", "Or", "Xor", "Cast", "Elu", "Selu", "Softplus", "Softsign", "ThresholdedRelu",
      "Celu", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos", "IsNaN", "Mod", "Gelu", "Mish",
      "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "IsInf", "Shrink", "CastLike"};
  for (const char* name : expected_ops) EXPECT_NE(reg.find("", name), nullptr) << name;
  EXPECT_EQ(reg.find("", "Relu")->kind, FusionKind::kElementwise);
  EXPECT_EQ(reg.find("", "Add")->kind, FusionKind::kBroadcast);
  EXPECT_EQ(reg.find("", "Where")->kind, FusionKind::kBroadcast);
  EXPECT_EQ(reg.find("", "Cast")->kind, FusionKind::kElementwise);
  EXPECT_TRUE(reg.find("", "Add")->traits.commutative);
  EXPECT_TRUE(reg.find("", "Mul")->traits.associative);
  EXPECT_FALSE(reg.find("", "Sub")->traits.commutative);
  EXPECT_TRUE(reg.find("", "Relu")->traits.idempotent);
  EXPECT_FALSE(reg.find("", "Sigmoid")->traits.idempotent);
  EXPECT_TRUE(reg.find("", "Sigmoid")->traits.inplace);
  EXPECT_FALSE(reg.find("", "Equal")->traits.inplace);
  EXPECT_EQ(reg.find("", "Gelu")->min_opset, 1);
  EXPECT_EQ(reg.find("", "Gelu")->max_opset, 20);

  Graph g;
  Value* x = g.add_input("x", DType::kF32, make_shape({2, 3}));
  Value* d = g.add_input("d", DType::kF32, {Dim::symbol("N")});
  Node* add = g.add_node("Add", {x, x}, {"a"}).value();
  Node* exp = g.add_node("Exp", {x}, {"e"}).value();
  Node* dyn = g.add_node("Relu", {d}, {"r"}).value();
  ASSERT_TRUE(infer_shapes(g).is_ok());
  EXPECT_EQ(add->def().flops(*add), 6);
  EXPECT_EQ(exp->def().flops(*exp), 24);  // transcendental: 4 per element
  EXPECT_EQ(dyn->def().flops(*dyn), -1);
}

}  // namespace
}  // namespace opfuse
