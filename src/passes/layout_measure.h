// The costs the O3 layout pass chooses by (passes/layout.cc): a conv as the BlockedConv kernel
// graph mode would run, in each candidate layout, and a reorder between layouts. By default
// they are estimated from the shapes (deterministic compiles); FusionConfig::measure_layouts
// times the real kernels instead (nondeterministic: the choice follows the timings).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace opfuse {

class LayoutTimer {
 public:
  virtual ~LayoutTimer() = default;
  // Milliseconds per run of `conv` (a Conv or opfuse::FusedConv with static shapes and constant
  // weights) as a BlockedConv with `block` (16: nChw16c, 0: nhwc); `x_plain`: X read as plain
  // nchw. Negative when that layout has no fast kernel (oneDNN's reference loops).
  virtual double conv_ms(const Node& conv, int64_t block, bool x_plain) = 0;
  // Milliseconds of one reorder of an f32 activation of logical dims [N, C, H, W] between
  // nChw16c and nhwc.
  virtual double reorder_ms(const std::vector<int64_t>& dims) = 0;
};

// Estimates from the shapes alone, the same on every compile. A conv costs its FLOPs at one
// rate, except that a dense conv with a window larger than 1x1 costs kBlockedWindowFactor more
// on nChw16c (oneDNN 2.6's jit kernels) than on nhwc (its brgconv kernels): ResNet-50's 3x3
// convs ran 13-28% faster on nhwc on both machines this project was measured on (an Intel Xeon
// and an AMD EPYC; docs/benchmarks.md). 1x1 and depthwise convs had no consistent winner, so
// they cost the same in both layouts and the reorders around them decide. A dilated dense conv
// has only reference loops on nChw16c, where the kernel reorders to oneDNN's layout and back.
// A reorder costs a fixed overhead plus its bytes read and written at a copy bandwidth.
class EstimatingLayoutTimer : public LayoutTimer {
 public:
  double conv_ms(const Node& conv, int64_t block, bool x_plain) override;
  double reorder_ms(const std::vector<int64_t>& dims) override;
};

// Times oneDNN kernels on zero-filled tensors: one warm-up run, then the median of a few runs
// within a small budget; results cached per signature for the timer's lifetime (one pass run),
// so a model's repeated blocks are measured once.
class MeasuringLayoutTimer : public LayoutTimer {
 public:
  double conv_ms(const Node& conv, int64_t block, bool x_plain) override;
  double reorder_ms(const std::vector<int64_t>& dims) override;

 private:
  std::map<std::string, double> cache_;
};

// The timer the layout pass uses instead of measuring, while alive (tests inject timings).
class ScopedLayoutTimer {
 public:
  explicit ScopedLayoutTimer(LayoutTimer* timer);
  ~ScopedLayoutTimer();
  ScopedLayoutTimer(const ScopedLayoutTimer&) = delete;
  ScopedLayoutTimer& operator=(const ScopedLayoutTimer&) = delete;

 private:
  LayoutTimer* previous_;
};

// The injected timer, or nullptr.
LayoutTimer* injected_layout_timer();

}  // namespace opfuse
