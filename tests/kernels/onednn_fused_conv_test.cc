// The oneDNN FusedConv kernel (post-ops in the primitive) against the FusedConv reference kernel
// (Conv's reference, then each post-op applied elementwise), on random shapes per post-op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/kernel.h"
#include "ops/fused.h"
#include "kernels/onednn_test_util.h"
#include "ops/infer_shapes.h"

namespace opfuse {
namespace {

using Ints = std::vector<int64_t>;

using onednn_test::random_f32;

Shape shape_of(const Ints& dims) { return Tensor::zeros(DType::kF32, dims).value().shape(); }

struct ConvCase {
  Ints x, w;
  Ints strides, pads;
  int64_t group = 1;
  bool bias = true;
};

// Builds FusedConv(x, W, [b], [r]) {epilogue} with constant W/b, runs the kernel create_kernel
// picks and the reference kernel, and compares them.
// `placement` and `implementation`: a tuning record's epilogue placement, and the kernel's
// implementation string that shows it.
void check(const ConvCase& c, const std::vector<std::string>& epilogue, std::mt19937& gen,
           std::string_view want_kernel = "onednn.fused_conv",
           KernelCompileContext::Epilogue placement = KernelCompileContext::Epilogue::kDefault,
           std::string* implementation = nullptr) {
  SCOPED_TRACE(str_cat("x", dims_to_string(c.x), " w", dims_to_string(c.w), " epilogue[0] ",
                       epilogue.empty() ? "" : epilogue[0]));
  bool residual = false;
  for (const std::string& e : epilogue) residual |= e == "add";
  Graph g;
  Tensor x = random_f32(c.x, gen), w = random_f32(c.w, gen, 0.5f), b = random_f32({c.w[0]}, gen);
  Value* xv = g.add_input("x", DType::kF32, x.shape());
  Value* wv = g.add_constant("w", w);
  Value* bv = c.bias ? g.add_constant("b", b) : nullptr;
  // The residual's dims are the conv output's: infer them from a plain Conv first.
  Attributes attrs = {{"strides", c.strides}, {"pads", c.pads}, {"group", c.group}};
  Tensor r;
  std::vector<Value*> inputs = {xv, wv, bv};
  if (residual) {
    Graph probe;
    auto conv = probe.add_node("Conv", {probe.add_input("x", DType::kF32, x.shape()), probe.add_constant("w", w)},
                               {"y"}, attrs);
    ASSERT_TRUE(conv.is_ok());
    ASSERT_TRUE(infer_shapes(probe).is_ok());
    Ints y_dims;
    for (const Dim& d : *(*conv)->output(0)->shape) y_dims.push_back(d.value());
    r = random_f32(y_dims, gen);
    inputs.push_back(g.add_input("r", DType::kF32, r.shape()));
  }
  attrs["epilogue"] = epilogue;
  auto node = g.add_node("FusedConv", inputs, {"y"}, attrs, "fused", std::string(kFusedDomain));
  ASSERT_TRUE(node.is_ok()) << node.status().message();
  const Status inferred = infer_shapes(g);
  ASSERT_TRUE(inferred.is_ok()) << inferred.message();
  std::vector<const Tensor*> args = {&x, &w, c.bias ? &b : nullptr};
  std::vector<const Tensor*> constants = {nullptr, &w, c.bias ? &b : nullptr};
  if (residual) {
    args.push_back(&r);
    constants.push_back(nullptr);
  }
  KernelCompileContext ctx{**node, constants, 1};
  ctx.epilogue = placement;
  auto kernel = create_kernel(ctx);
  ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();
  EXPECT_EQ((*kernel)->name(), want_kernel);
  if (implementation != nullptr) *implementation = (*kernel)->implementation();
  Ints y_dims;
  for (const Dim& d : *(*node)->output(0)->shape) y_dims.push_back(d.value());
  Tensor got = Tensor::zeros(DType::kF32, y_dims).value();
  Tensor want = Tensor::zeros(DType::kF32, y_dims).value();
  Tensor* got_ptr = &got;
  Tensor* want_ptr = &want;
  ASSERT_TRUE((*kernel)->run(args, {&got_ptr, 1}).is_ok());
  ASSERT_TRUE(make_reference_kernel(**node)->run(args, {&want_ptr, 1}).is_ok());
  double diff = 0, scale = 1e-30;
  for (int64_t i = 0; i < want.numel(); ++i) {
    diff = std::max(diff, std::abs(got.get_double(i) - want.get_double(i)));
    scale = std::max(scale, std::abs(want.get_double(i)));
  }
  EXPECT_LE(diff / scale, 1e-4);
}

const std::vector<std::vector<std::string>> kEpilogues = {
    {"relu"}, {"leaky_relu:0.1"}, {"clip:0:6"}, {"sigmoid"}, {"sigmoid_mul"}, {"hardswish"},
    {"tanh"}, {"elu:0.5"}, {"gelu_erf"}, {"add"}, {"add", "relu"}, {"relu", "add"},
    {"clip:-1:1", "add", "sigmoid_mul"},
    {"hardsigmoid:0.2:0.5"}, {"gelu_tanh"}, {"linear:2:-1"}, {"relu", "linear:0.5:1", "add"},
};

TEST(OneDnnFusedConvTest, EveryPostOpMatchesTheReferenceOnRandomShapes) {
  std::mt19937 gen(7);
  const std::vector<ConvCase> cases = {
      {{1, 8, 9, 9}, {16, 8, 3, 3}, {1, 1}, {1, 1, 1, 1}, 1, true},    // 3x3 (blocked inside)
      {{2, 16, 7, 7}, {8, 16, 1, 1}, {1, 1}, {0, 0, 0, 0}, 1, false},  // pointwise, plain
      {{1, 8, 10, 10}, {8, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, 8, true},   // depthwise, strided
      {{1, 4, 6, 6}, {6, 2, 3, 3}, {1, 1}, {0, 1, 0, 1}, 2, true},      // grouped, asymmetric pads
  };
  for (const ConvCase& c : cases) {
    for (const auto& e : kEpilogues) check(c, e, gen);
  }
}

// A tuning record's placement moves the epilogue: all of it into our own pass after the conv, or
// as much as keeps NaN into oneDNN's kernel (never less than the default puts there; the kernel's
// own guard still keeps post-ops off oneDNN's slow GEMM convs). Results match the reference
// either way.
TEST(OneDnnFusedConvTest, EpiloguePlacementFromATuningRecord) {
  std::mt19937 gen(21);
  const ConvCase c{{1, 8, 10, 10}, {16, 8, 3, 3}, {1, 1}, {1, 1, 1, 1}};
  using Epilogue = KernelCompileContext::Epilogue;
  // Post-ops left to our pass: the ones after "then " in the implementation string.
  auto own_pass_ops = [](const std::string& impl) {
    const size_t at = impl.find(", then ");
    return at == std::string::npos ? 0 : 1 + std::count(impl.begin() + static_cast<std::ptrdiff_t>(at) + 7, impl.end(), ',');
  };
  for (const std::vector<std::string>& epilogue :
       std::vector<std::vector<std::string>>{{"relu"}, {"clip:-1:1", "add", "sigmoid_mul"}, {"add", "relu"}}) {
    std::string own, standard, library;
    check(c, epilogue, gen, "onednn.fused_conv", Epilogue::kOwnPass, &own);
    check(c, epilogue, gen, "onednn.fused_conv", Epilogue::kDefault, &standard);
    check(c, epilogue, gen, "onednn.fused_conv", Epilogue::kLibrary, &library);
    EXPECT_EQ(own_pass_ops(own), static_cast<std::ptrdiff_t>(epilogue.size())) << own;
    EXPECT_LE(own_pass_ops(library), own_pass_ops(standard)) << library << " vs " << standard;
  }
}

TEST(OneDnnFusedConvTest, ReferenceKernelAppliesPostOpsInOrder) {
  // 1x1 conv with W = [1], no bias: Y = X. Epilogue relu then add r then clip to [-1, 1].
  Graph g;
  Value* xv = g.add_input("x", DType::kF32, shape_of({1, 1, 1, 4}));
  Value* rv = g.add_input("r", DType::kF32, shape_of({1, 1, 1, 4}));
  Value* wv = g.add_constant("w", Tensor::from_vector<float>({1, 1, 1, 1}, {1.0f}));
  Attributes attrs = {{"epilogue", std::vector<std::string>{"relu", "add", "clip:-1:1"}}};
  auto node = g.add_node("FusedConv", {xv, wv, nullptr, rv}, {"y"}, attrs, "f", "opfuse");
  ASSERT_TRUE(node.is_ok()) << node.status().message();
  ASSERT_TRUE(infer_shapes(g).is_ok());
  Tensor x = Tensor::from_vector<float>({1, 1, 1, 4}, {-2.0f, 0.5f, 3.0f, -0.25f});
  Tensor r = Tensor::from_vector<float>({1, 1, 1, 4}, {-0.5f, 0.25f, -2.5f, 2.0f});
  Tensor w = Tensor::from_vector<float>({1, 1, 1, 1}, {1.0f});
  Tensor y = Tensor::zeros(DType::kF32, {1, 1, 1, 4}).value();
  Tensor* yp = &y;
  std::vector<const Tensor*> args = {&x, &w, nullptr, &r};
  ASSERT_TRUE(make_reference_kernel(**node)->run(args, {&yp, 1}).is_ok());
  // relu: [0, 0.5, 3, 0]; + r: [-0.5, 0.75, 0.5, 2]; clip: [-0.5, 0.75, 0.5, 1].
  const std::vector<float> want = {-0.5f, 0.75f, 0.5f, 1.0f};
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(y.data<float>()[i], want[i]) << i;
}

TEST(OneDnnFusedConvTest, MalformedEpilogueIsAUserError) {
  Graph g;
  Value* xv = g.add_input("x", DType::kF32, shape_of({1, 1, 2, 2}));
  Value* wv = g.add_constant("w", Tensor::from_vector<float>({1, 1, 1, 1}, {1.0f}));
  for (const char* bad : {"frobnicate", "clip:0", "relu:1", "clip:a:b"}) {
    Attributes attrs = {{"epilogue", std::vector<std::string>{bad}}};
    auto node = g.add_node("FusedConv", {xv, wv}, {""}, attrs, "", "opfuse");
    ASSERT_TRUE(node.is_ok());
    const Status s = infer_shapes(g);
    EXPECT_FALSE(s.is_ok()) << bad;
    EXPECT_NE(s.message().find(bad), std::string::npos) << s.message();
    ASSERT_TRUE(g.remove_node(*node).is_ok());
  }
}

TEST(OneDnnFusedConvTest, PostOpFormatRoundTrips) {
  const std::string text = format_post_op("leaky_relu", {0.1f});
  auto op = parse_post_op(text);
  ASSERT_TRUE(op.has_value()) << text;
  EXPECT_EQ(op->spec->name, "leaky_relu");
  ASSERT_EQ(op->params.size(), 1u);
  EXPECT_EQ(op->params[0], 0.1f);
  EXPECT_EQ(format_post_op("clip", {0.0f, 6.0f}), "clip:0:6");
}

}  // namespace
}  // namespace opfuse
