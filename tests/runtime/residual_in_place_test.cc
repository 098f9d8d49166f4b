// The residual add of a conv epilogue as oneDNN's sum post-op (kernels/cpu/onednn_blocked.cc):
// the memory plan gives Y the residual's buffer when the residual dies at the conv and no other
// input of the conv reads it (runtime/compiled_plan.cc, plan_in_place); otherwise the kernel
// copies R into Y first. Each case compiles at O3, checks whether the residual conv runs in
// place and compares every output with eager mode over two runs (the second reuses the arena).
#include <gtest/gtest.h>

#include "graph_test_util.h"
#include "pipelines/pipeline.h"

namespace opfuse {
namespace {

// The step of the node named `name`.
std::string step_of(const testing_graphs::CompiledRun& run, const std::string& name) {
  for (const std::string& s : run.steps) {
    if (s.find("'" + name + "'") != std::string::npos) return s;
  }
  return "";
}

// Whether `name` runs as a BlockedConv writing over its residual (input 3).
void expect_in_place_over_residual(const testing_graphs::CompiledRun& run, const std::string& name, bool want) {
  const std::string step = step_of(run, name);
  EXPECT_NE(step.find("BlockedConv"), std::string::npos) << step;
  EXPECT_EQ(step.find("(in place over input 3)") != std::string::npos, want) << step << "\nsteps: " << ::testing::PrintToString(run.steps);
  EXPECT_LE(run.diff, 1e-5);
}

// A residual block: %a feeds conv1 and comes back as conv2's residual. With `read_later`, a
// Mul of conv2's result by %a reads %a after conv2 (it cannot run earlier), so %a must survive.
// conv2 has 2^21 multiply-adds: 1x1 convs of 2^20 or fewer may run on cpu.conv instead of oneDNN
// (kernels/cpu/direct_conv_kernel.cc), which has no sum post-op.
std::string residual_block(bool read_later) {
  return str_cat(R"(graph @main opset 13 (%x: f32[1,64,32,32]) {
  %w0: f32[64,64,1,1] = const splat 0.03
  %w1: f32[32,64,3,3] = const splat 0.01
  %w2: f32[64,32,1,1] = const splat 0.04
  %w3: f32[8,64,1,1] = const splat 0.06
  %a0: f32[1,64,32,32] = Conv(%x, %w0) {kernel_shape = [1, 1]} #conv0
  %a: f32[1,64,32,32] = Relu(%a0) #relu0
  %b0: f32[1,32,32,32] = Conv(%a, %w1) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #conv1
  %b: f32[1,32,32,32] = Relu(%b0) #relu1
  %c: f32[1,64,32,32] = Conv(%b, %w2) {kernel_shape = [1, 1]} #conv2
  %s: f32[1,64,32,32] = Add(%c, %a) #add
  %r: f32[1,64,32,32] = Relu(%s) #relu2
  %y: f32[1,8,32,32] = Conv(%r, %w3) {kernel_shape = [1, 1]} #head
)",
                 read_later ? "  %z: f32[1,64,32,32] = Mul(%r, %a) #late\n  return %y, %z\n}"
                            : "  return %y\n}");
}

TEST(ResidualInPlaceTest, ConvAccumulatesIntoTheDyingResidual) {
  expect_in_place_over_residual(testing_graphs::compile_and_compare(residual_block(false), OptLevel::kO3),
                                "conv2", true);
}

TEST(ResidualInPlaceTest, ResidualReadLaterIsCopiedNotOverwritten) {
  expect_in_place_over_residual(testing_graphs::compile_and_compare(residual_block(true), OptLevel::kO3),
                                "conv2", false);
}

// y = relu(conv(a) + a): the residual is also the conv's input X, which the conv reads until
// its last output, so Y must not take that buffer.
TEST(ResidualInPlaceTest, ResidualThatIsAlsoTheConvInputIsNotOverwritten) {
  const char* text = R"(graph @main opset 13 (%x: f32[1,32,8,8]) {
  %w0: f32[32,32,1,1] = const splat 0.03
  %w1: f32[32,32,3,3] = const splat 0.01
  %a0: f32[1,32,8,8] = Conv(%x, %w0) {kernel_shape = [1, 1]} #conv0
  %a: f32[1,32,8,8] = Relu(%a0) #relu0
  %b0: f32[1,32,8,8] = Conv(%a, %w1) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #conv1
  %s: f32[1,32,8,8] = Add(%b0, %a) #add
  %y: f32[1,32,8,8] = Relu(%s) #relu1
  return %y
})";
  expect_in_place_over_residual(testing_graphs::compile_and_compare(text, OptLevel::kO3), "conv1", false);
}

}  // namespace
}  // namespace opfuse
