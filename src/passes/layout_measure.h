// The costs the O3 layout pass chooses by (passes/layout.cc): a conv as the BlockedConv kernel
// graph mode would run, in each candidate layout, and a reorder between layouts. By default
// they are estimated from the shapes (deterministic compiles); a timer the caller supplies in
// PassContext::layout_timer decides instead: the runtime's, which times the real kernels
// (runtime/measuring_layout_timer.h, for FusionConfig::measure_layouts and `opfuse tune`), or a
// test's.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/target.h"
#include "ir/graph.h"

namespace opfuse {

class LayoutTimer {
 public:
  virtual ~LayoutTimer() = default;
  // Milliseconds per run of `conv` (a Conv or opfuse::FusedConv with static shapes and constant
  // weights) as a BlockedConv with `block` (16: nChw16c, 8: nChw8c, 0: nhwc); `x_plain`: X read
  // as plain nchw. Negative when that layout has no fast kernel (oneDNN's reference loops).
  virtual double conv_ms(const Node& conv, int64_t block, bool x_plain) = 0;
  // Milliseconds of one reorder of an f32 activation of logical dims [N, C, H, W] between
  // nChw<block>c and nhwc.
  virtual double reorder_ms(const std::vector<int64_t>& dims, int64_t block) = 0;
};

// Estimates from the shapes alone, the same on every compile of a target. A conv costs its
// FLOPs at the tier's rate, scaled per layout by factors calibrated per tier
// (layout_measure.cc, measurements in docs/benchmarks.md). On AVX-512 a dense conv with a
// window larger than 1x1 costs 1.25x more on nChw16c (oneDNN 2.6's jit kernels) than on nhwc
// (its brgconv kernels): ResNet-50's 3x3 convs ran 13-28% faster on nhwc on both machines
// measured (an Intel Xeon and an AMD EPYC); 1x1 and depthwise convs had no consistent winner,
// so they cost the same in both layouts and the reorders around them decide. On AVX2 there is
// no brgconv: both layouts run oneDNN's jit:avx2 kernels. A dilated dense conv has only
// reference loops on the blocked layout, where the kernel reorders to oneDNN's layout and back.
// A 3x3 conv of stride 1 that cpu.winograd takes blocked costs a factor of its nhwc time.
// A reorder costs a fixed overhead plus its bytes read and written at a copy bandwidth.
class EstimatingLayoutTimer : public LayoutTimer {
 public:
  explicit EstimatingLayoutTimer(const Target& target);
  double conv_ms(const Node& conv, int64_t block, bool x_plain) override;
  double reorder_ms(const std::vector<int64_t>& dims, int64_t block) override;

  // Per-tier calibration.
  struct Rates {
    double flops_per_ms;              // a conv's FLOPs per millisecond on the target's cores
    double blocked_window_factor;     // a dense kxk conv blocked, relative to nhwc
    double blocked_pointwise_factor;  // 1x1 and depthwise convs blocked, relative to nhwc
    double nhwc_dilated_factor;       // a dilated dense kxk conv on nhwc, relative to undilated
    bool blocked_dilated_reorders;    // a dilated dense kxk conv blocked reorders X and Y
    double winograd_factor;           // a 3x3 conv blocked as cpu.winograd, relative to nhwc
  };
  const Rates& rates() const { return rates_; }

 private:
  Target target_;
  Rates rates_;
};

// Whether the blocked form of `conv` (with `block`, X not plain) runs as cpu.winograd on the
// target: a 3x3 window of stride 1, no dilation or groups, output channels in pairs of blocks,
// and not declined for its filters' size (kernels/cpu/winograd_conv_kernel.cc; the test
// tests/kernels/winograd_conv_test.cc holds the two to the same shapes).
bool estimated_as_winograd(const Node& conv, int64_t block, const Target& target);

// Replays timings a MeasuringLayoutTimer (runtime) took earlier (a tuning record's),
// deterministically; a signature it lacks is estimated.
class RecordedLayoutTimer : public LayoutTimer {
 public:
  RecordedLayoutTimer(const std::map<std::string, double>& timings, const Target& target);
  double conv_ms(const Node& conv, int64_t block, bool x_plain) override;
  double reorder_ms(const std::vector<int64_t>& dims, int64_t block) override;

 private:
  const std::map<std::string, double>& timings_;
  EstimatingLayoutTimer estimate_;
};

// The signatures timings are kept by: the conv's shapes, attributes and which optional inputs it
// has (nullopt when a shape is unknown), and a reorder's dims and block.
std::optional<std::string> conv_timing_key(const Node& conv, int64_t block, bool x_plain);
std::string reorder_timing_key(const std::vector<int64_t>& dims, int64_t block);

}  // namespace opfuse
