// In-place Split (runtime/compiled_plan.cc, plan_concat_and_split_in_place): when a Split's
// outputs are contiguous slabs of its input, their readers read the input's buffer and the Split
// runs no kernel. Each case compiles a small graph, counts the Split steps left and compares every
// output with eager mode.
#include <gtest/gtest.h>

#include <algorithm>

#include "graph_test_util.h"
#include "pipelines/pipeline.h"

namespace opfuse {
namespace {

struct Outcome {
  int split_steps = -1;
  double diff = 1e9;
};

Outcome compile_and_compare(const std::string& text, OptLevel level = OptLevel::kO1) {
  const testing_graphs::CompiledRun run = testing_graphs::compile_and_compare(text, level);
  const auto splits = std::count_if(run.steps.begin(), run.steps.end(), [](const std::string& s) {
    return s.rfind("Split ", 0) == 0;
  });
  return {run.steps.empty() ? -1 : static_cast<int>(splits), run.diff};
}

// ShuffleNet's channel split: both halves are read in place; the input is also read whole after
// the halves (its buffer must outlive every slab and reader).
TEST(SplitInPlaceTest, ChannelHalvesAreSlabsOfTheInput) {
  const Outcome o = compile_and_compare(R"(graph @main opset 13 (%x: f32[1,32,4,4]) {
  %r: f32[1,32,4,4] = Relu(%x) #relu
  %sizes: i64[2] = const [16, 16]
  %a: f32[1,16,4,4], %b: f32[1,16,4,4] = Split(%r, %sizes) {axis = 1} #split
  %na: f32[1,16,4,4] = Neg(%a) #neg_a
  %sb: f32[1,16,4,4] = Sigmoid(%b) #sig_b
  %t: f32[1,16,4,4] = Add(%na, %sb) #add
  %e: f32[1,32,4,4] = Exp(%r) #exp_whole
  return %t, %e
})");
  EXPECT_EQ(o.split_steps, 0);
  EXPECT_LE(o.diff, 1e-6);
}

// Kept: a half that is a graph output, a split after a non-1 dim, and a slab that would start
// off a 64-byte boundary (5 floats).
TEST(SplitInPlaceTest, GraphOutputsInnerAxesAndMisalignedSlabsKeepTheirCopy) {
  const char* cases[] = {R"(graph @main opset 13 (%x: f32[1,32,4,4]) {
  %r: f32[1,32,4,4] = Relu(%x)
  %a: f32[1,16,4,4], %b: f32[1,16,4,4] = Split(%r) {axis = 1}
  %nb: f32[1,16,4,4] = Neg(%b)
  return %a, %nb
})", R"(graph @main opset 13 (%x: f32[2,8,4]) {
  %r: f32[2,8,4] = Relu(%x)
  %a: f32[2,4,4], %b: f32[2,4,4] = Split(%r) {axis = 1}
  %na: f32[2,4,4] = Neg(%a)
  %nb: f32[2,4,4] = Neg(%b)
  return %na, %nb
})", R"(graph @main opset 13 (%x: f32[1,3,5]) {
  %r: f32[1,3,5] = Relu(%x)
  %sizes: i64[2] = const [1, 2]
  %a: f32[1,1,5], %b: f32[1,2,5] = Split(%r, %sizes) {axis = 1}
  %na: f32[1,1,5] = Neg(%a)
  %nb: f32[1,2,5] = Neg(%b)
  return %na, %nb
})"};
  for (const char* text : cases) {
    SCOPED_TRACE(text);
    const Outcome o = compile_and_compare(text);
    EXPECT_EQ(o.split_steps, 1);
    EXPECT_LE(o.diff, 1e-6);
  }
}

}  // namespace
}  // namespace opfuse
