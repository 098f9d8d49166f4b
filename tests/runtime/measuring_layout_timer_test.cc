// MeasuringLayoutTimer (runtime/measuring_layout_timer.cc): it times the kernel graph mode would
// run for a conv in each layout, whichever that is. Below AVX-512 a dilated 3x3 conv on the
// vector's block runs on cpu.conv (oneDNN 2.6 has only reference loops for it there), so the
// blocked layout is measured rather than reported as having no fast kernel.
#include <gtest/gtest.h>

#include "core/target.h"
#include "ir/text_format.h"
#include "runtime/measuring_layout_timer.h"

namespace opfuse {
namespace {

TEST(MeasuringLayoutTimerTest, TimesOurOwnKernelsToo) {
  auto g = parse_graph(R"(graph @main opset 13 (%x: f32[1,16,30,40]) {
  %w: f32[16,16,3,3] = const splat 0.01
  %d: f32[1,16,30,40] = Conv(%x, %w) {kernel_shape = [3, 3], pads = [5, 5, 5, 5], dilations = [5, 5]} #dilated
  return %d
})");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const Node* dilated = g->find_node("dilated");
  ASSERT_NE(dilated, nullptr);
  MeasuringLayoutTimer timer;
  EXPECT_GT(timer.conv_ms(*dilated, 0, false), 0.0);  // oneDNN on nhwc
  if (active_target().isa >= IsaTier::kAvx2 && active_target().isa < IsaTier::kAvx512Core) {
    EXPECT_GT(timer.conv_ms(*dilated, active_target().channel_block(), false), 0.0);  // cpu.conv
  }
  EXPECT_FALSE(timer.timings().empty());
}

}  // namespace
}  // namespace opfuse
