// The residual add of a conv epilogue as oneDNN's sum post-op (kernels/cpu/onednn_blocked.cc):
// the memory plan gives Y the residual's buffer when the residual dies at the conv and no other
// input of the conv reads it (runtime/compiled_plan.cc, plan_in_place); otherwise the kernel
// copies R into Y first. Each case compiles at O3, checks which convs run in place and compares
// every output with eager mode over two runs (the second reuses the arena).
#include <gtest/gtest.h>

#include <algorithm>

#include "graph_test_util.h"
#include "ir/text_format.h"
#include "runtime/compare.h"
#include "runtime/compiled_plan.h"
#include "runtime/eager.h"
#include "runtime/session.h"

namespace opfuse {
namespace {

struct Outcome {
  std::vector<std::string> steps;
  double diff = 1e9;
};

Outcome compile_and_compare(const std::string& text) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  if (!g.is_ok()) return {};
  const TensorMap inputs = testing_graphs::random_inputs(*g, 5);
  auto want = run_eager(*g, inputs);
  EXPECT_TRUE(want.is_ok()) << want.status().message();
  SessionOptions options;
  options.level = OptLevel::kO3;
  auto session = Session::create(std::move(*g), options);
  EXPECT_TRUE(session.is_ok()) << session.status().message();
  auto plan = session->plan_for(inputs);
  EXPECT_TRUE(plan.is_ok()) << plan.status().message();
  if (!plan.is_ok() || !want.is_ok()) return {};
  Outcome out;
  out.steps = (*plan)->describe_steps();
  for (int run = 0; run < 2; ++run) {
    auto got = session->run(inputs);
    EXPECT_TRUE(got.is_ok()) << got.status().message();
    if (got.is_ok()) out.diff = std::max(run == 0 ? 0.0 : out.diff, max_relative_difference(*got, *want));
  }
  return out;
}

// The step of the node named `name` (its describe() holds 'name').
std::string step_of(const Outcome& o, const std::string& name) {
  for (const std::string& s : o.steps) {
    if (s.find("'" + name + "'") != std::string::npos) return s;
  }
  return "";
}

bool in_place_over_residual(const std::string& step) {
  return step.find("(in place over input 3)") != std::string::npos;
}

// A bottleneck: %a is read by conv1 and, last, as conv3's residual.
const char* kBottleneck = R"(graph @main opset 13 (%x: f32[1,32,8,8]) {
  %w0: f32[32,32,1,1] = const splat 0.03
  %w1: f32[16,32,1,1] = const splat 0.05
  %w2: f32[16,16,3,3] = const splat 0.02
  %w3: f32[32,16,1,1] = const splat 0.04
  %w4: f32[8,32,1,1] = const splat 0.06
  %a0: f32[1,32,8,8] = Conv(%x, %w0) {kernel_shape = [1, 1]} #conv0
  %a: f32[1,32,8,8] = Relu(%a0) #relu0
  %b0: f32[1,16,8,8] = Conv(%a, %w1) {kernel_shape = [1, 1]} #conv1
  %b: f32[1,16,8,8] = Relu(%b0) #relu1
  %c0: f32[1,16,8,8] = Conv(%b, %w2) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #conv2
  %c: f32[1,16,8,8] = Relu(%c0) #relu2
  %d: f32[1,32,8,8] = Conv(%c, %w3) {kernel_shape = [1, 1]} #conv3
  %s: f32[1,32,8,8] = Add(%d, %a) #add
  %r: f32[1,32,8,8] = Relu(%s) #relu3
  %y: f32[1,8,8,8] = Conv(%r, %w4) {kernel_shape = [1, 1]} #head
  return %y
})";

TEST(ResidualInPlaceTest, ConvAccumulatesIntoTheDyingResidual) {
  const Outcome o = compile_and_compare(kBottleneck);
  const std::string conv3 = step_of(o, "conv3");
  EXPECT_NE(conv3.find("BlockedConv"), std::string::npos) << conv3;
  EXPECT_TRUE(in_place_over_residual(conv3)) << conv3;
  EXPECT_LE(o.diff, 1e-5);
}

// The residual is read again after the conv (here by a second head), so it must survive: Y gets
// a buffer of its own and R is copied into it before the sum.
const char* kResidualReadLater = R"(graph @main opset 13 (%x: f32[1,32,8,8]) {
  %w0: f32[32,32,1,1] = const splat 0.03
  %w1: f32[32,32,3,3] = const splat 0.01
  %w2: f32[8,32,1,1] = const splat 0.06
  %a0: f32[1,32,8,8] = Conv(%x, %w0) {kernel_shape = [1, 1]} #conv0
  %a: f32[1,32,8,8] = Relu(%a0) #relu0
  %b0: f32[1,32,8,8] = Conv(%a, %w1) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #conv1
  %s: f32[1,32,8,8] = Add(%b0, %a) #add
  %r: f32[1,32,8,8] = Relu(%s) #relu1
  %y: f32[1,8,8,8] = Conv(%r, %w2) {kernel_shape = [1, 1]} #head
  %z: f32[1,8,8,8] = Conv(%a, %w2) {kernel_shape = [1, 1]} #late
  return %y, %z
})";

TEST(ResidualInPlaceTest, ResidualReadLaterIsCopiedNotOverwritten) {
  const Outcome o = compile_and_compare(kResidualReadLater);
  const std::string conv1 = step_of(o, "conv1");
  EXPECT_NE(conv1.find("BlockedConv"), std::string::npos) << conv1;
  EXPECT_FALSE(in_place_over_residual(conv1)) << conv1;
  EXPECT_LE(o.diff, 1e-5);
}

// y = relu(conv(a) + a): the residual is also the conv's input X, which the conv reads until
// its last output, so Y must not take that buffer.
const char* kResidualIsInput = R"(graph @main opset 13 (%x: f32[1,32,8,8]) {
  %w0: f32[32,32,1,1] = const splat 0.03
  %w1: f32[32,32,3,3] = const splat 0.01
  %w2: f32[8,32,1,1] = const splat 0.06
  %a0: f32[1,32,8,8] = Conv(%x, %w0) {kernel_shape = [1, 1]} #conv0
  %a: f32[1,32,8,8] = Relu(%a0) #relu0
  %b0: f32[1,32,8,8] = Conv(%a, %w1) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #conv1
  %s: f32[1,32,8,8] = Add(%b0, %a) #add
  %r: f32[1,32,8,8] = Relu(%s) #relu1
  %y: f32[1,8,8,8] = Conv(%r, %w2) {kernel_shape = [1, 1]} #head
  return %y
})";

TEST(ResidualInPlaceTest, ResidualThatIsAlsoTheConvInputIsNotOverwritten) {
  const Outcome o = compile_and_compare(kResidualIsInput);
  const std::string conv1 = step_of(o, "conv1");
  EXPECT_NE(conv1.find("BlockedConv"), std::string::npos) << conv1;
  EXPECT_FALSE(in_place_over_residual(conv1)) << conv1;
  EXPECT_LE(o.diff, 1e-5);
}

}  // namespace
}  // namespace opfuse
