// In-place Concat (runtime/compiled_plan.cc, plan_concat_and_split_in_place): when a Concat's
// inputs are contiguous slabs of its output, their producers write into the Concat's buffer and
// the Concat runs no kernel. Each case compiles a small graph, counts the Concat steps left and
// compares every output with eager mode, at O1 (plain layout) and O3 (blocked channels).
#include <gtest/gtest.h>

#include <algorithm>

#include "graph_test_util.h"
#include "pipelines/pipeline.h"

namespace opfuse {
namespace {

struct Outcome {
  int concat_steps = -1;
  double diff = 1e9;
};

Outcome compile_and_compare(const std::string& text, OptLevel level) {
  const testing_graphs::CompiledRun run = testing_graphs::compile_and_compare(text, level);
  const auto concats = std::count_if(run.steps.begin(), run.steps.end(), [](const std::string& s) {
    return s.rfind("Concat ", 0) == 0;
  });
  return {run.steps.empty() ? -1 : static_cast<int>(concats), run.diff};
}

// YOLO's C3 shape: one branch convolves the other, and both are concatenated, then mixed.
const char* kBranches = R"(graph @main opset 13 (%x: f32[1,16,8,8]) {
  %w1: f32[16,16,1,1] = const splat 0.0625
  %w2: f32[16,16,3,3] = const splat 0.01
  %w3: f32[32,32,1,1] = const splat 0.03125
  %a: f32[1,16,8,8] = Conv(%x, %w1) {kernel_shape = [1, 1]} #conv_a
  %ra: f32[1,16,8,8] = Relu(%a) #relu_a
  %b: f32[1,16,8,8] = Conv(%ra, %w2) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #conv_b
  %sb: f32[1,16,8,8] = Sigmoid(%b) #sig_b
  %c: f32[1,32,8,8] = Concat(%sb, %ra) {axis = 1} #cat
  %y: f32[1,32,8,8] = Conv(%c, %w3) {kernel_shape = [1, 1]} #mix
  return %y
})";

TEST(ConcatInPlaceTest, BranchesWriteIntoTheConcatsBuffer) {
  for (OptLevel level : {OptLevel::kO1, OptLevel::kO3}) {
    SCOPED_TRACE(opt_level_name(level));
    const Outcome o = compile_and_compare(kBranches, level);
    EXPECT_EQ(o.concat_steps, 0);
    EXPECT_LE(o.diff, 1e-5);
  }
}

// A Concat of a Concat (DeepLabV3's ASPP feeds one): both fold, the inner one's slabs shifted by
// the outer one's offset; a slab is also read on its own after the Concats.
const char* kNested = R"(graph @main opset 13 (%x: f32[1,16,4,4]) {
  %a: f32[1,16,4,4] = Relu(%x) #a
  %b: f32[1,16,4,4] = Sigmoid(%x) #b
  %d: f32[1,16,4,4] = Tanh(%x) #d
  %inner: f32[1,32,4,4] = Concat(%a, %b) {axis = 1} #inner
  %outer: f32[1,48,4,4] = Concat(%d, %inner) {axis = 1} #outer
  %y: f32[1,48,4,4] = Neg(%outer) #neg
  %e: f32[1,16,4,4] = Exp(%b) #exp_b
  return %y, %e
})";

TEST(ConcatInPlaceTest, NestedConcatsBothFold) {
  const Outcome o = compile_and_compare(kNested, OptLevel::kO1);
  EXPECT_EQ(o.concat_steps, 0);
  EXPECT_LE(o.diff, 1e-6);
}

// Along the batch axis nothing comes before the axis, so batch slabs are contiguous too.
TEST(ConcatInPlaceTest, BatchAxisFolds) {
  const Outcome o = compile_and_compare(R"(graph @main opset 13 (%x: f32[2,4,4]) {
  %a: f32[2,4,4] = Relu(%x) #a
  %b: f32[2,4,4] = Exp(%x) #b
  %c: f32[4,4,4] = Concat(%a, %b) {axis = 0} #cat
  %y: f32[4,4,4] = Neg(%c) #neg
  return %y
})", OptLevel::kO1);
  EXPECT_EQ(o.concat_steps, 0);
  EXPECT_LE(o.diff, 1e-6);
}

// A Concat that is a graph output: the producers write into the returned tensor (a fresh one
// each run), one of them through a Reshape view; a slab is read again after the Concat.
TEST(ConcatInPlaceTest, GraphOutputConcatFoldsIntoTheReturnedTensor) {
  const Outcome o = compile_and_compare(R"(graph @main opset 13 (%x: f32[1,16,4,4]) {
  %shape: i64[3] = const [1, 16, 16]
  %a: f32[1,16,4,4] = Relu(%x) #a
  %b: f32[1,16,4,4] = Exp(%x) #b
  %ar: f32[1,16,16] = Reshape(%a, %shape) #view_a
  %br: f32[1,16,16] = Reshape(%b, %shape) #view_b
  %c: f32[1,32,16] = Concat(%ar, %br) {axis = 1} #cat
  %e: f32[1,16,4,4] = Neg(%b) #neg_b
  return %c, %e
})", OptLevel::kO1);
  EXPECT_EQ(o.concat_steps, 0);
  EXPECT_LE(o.diff, 1e-6);
}

// Where the inputs are not whole buffers of their own, or not contiguous in the output, the
// Concat keeps its kernel.
TEST(ConcatInPlaceTest, KeepsItsKernelWhenInputsCannotBeSlabs) {
  const char* cases[] = {
      // a graph input cannot be written by a producer
      R"(graph @main opset 13 (%x: f32[1,16,4,4]) {
  %a: f32[1,16,4,4] = Relu(%x) #a
  %c: f32[1,32,4,4] = Concat(%x, %a) {axis = 1} #cat
  %y: f32[1,32,4,4] = Neg(%c) #neg
  return %y
})",
      // the same value twice would need two places at once
      R"(graph @main opset 13 (%x: f32[1,16,4,4]) {
  %a: f32[1,16,4,4] = Relu(%x) #a
  %c: f32[1,32,4,4] = Concat(%a, %a) {axis = 1} #cat
  %y: f32[1,32,4,4] = Neg(%c) #neg
  return %y
})",
      // batch 2 on the channel axis: each input is two separate pieces of the output
      R"(graph @main opset 13 (%x: f32[2,16,4,4]) {
  %a: f32[2,16,4,4] = Relu(%x) #a
  %b: f32[2,16,4,4] = Exp(%x) #b
  %c: f32[2,32,4,4] = Concat(%a, %b) {axis = 1} #cat
  %y: f32[2,32,4,4] = Neg(%c) #neg
  return %y
})",
      // an input that is a graph output has its own returned tensor
      R"(graph @main opset 13 (%x: f32[1,16,4,4]) {
  %a: f32[1,16,4,4] = Relu(%x) #a
  %b: f32[1,16,4,4] = Exp(%x) #b
  %c: f32[1,32,4,4] = Concat(%a, %b) {axis = 1} #cat
  %y: f32[1,32,4,4] = Neg(%c) #neg
  return %y, %a
})",
      // the second slab would start 12 bytes in: not aligned like a buffer of its own
      R"(graph @main opset 13 (%x: f32[1,3,1,1]) {
  %a: f32[1,3,1,1] = Relu(%x) #a
  %b: f32[1,3,1,1] = Exp(%x) #b
  %c: f32[1,6,1,1] = Concat(%a, %b) {axis = 1} #cat
  %y: f32[1,6,1,1] = Neg(%c) #neg
  return %y
})",
  };
  for (const char* text : cases) {
    SCOPED_TRACE(text);
    const Outcome o = compile_and_compare(text, OptLevel::kO1);
    EXPECT_EQ(o.concat_steps, 1);
    EXPECT_LE(o.diff, 1e-6);
  }
}

}  // namespace
}  // namespace opfuse
