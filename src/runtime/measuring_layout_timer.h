// The layout timer that measures (passes/layout_measure.h): the O3 layout pass weighs each conv
// and reorder by timing the kernel graph mode would run for it. It lives here, above the
// kernels, and reaches the pass through PipelineOptions::layout_timer.
#pragma once

#include <map>
#include <string>

#include "passes/layout_measure.h"
#include "pipelines/pipeline.h"

namespace opfuse {

// Times oneDNN kernels on zero-filled tensors: one warm-up run, then the median of a few runs
// within a small budget; results cached per signature for the timer's lifetime, so a model's
// repeated blocks are measured once.
class MeasuringLayoutTimer : public LayoutTimer {
 public:
  double conv_ms(const Node& conv, int64_t block, bool x_plain) override;
  double reorder_ms(const std::vector<int64_t>& dims, int64_t block) override;
  // Every measurement so far, by signature (conv_timing_key, reorder_timing_key): what
  // `opfuse tune` records.
  const std::map<std::string, double>& timings() const { return cache_; }

 private:
  std::map<std::string, double> cache_;
};

// Gives `options` a MeasuringLayoutTimer when its fusion config asks to measure layouts
// (--measure-layouts) and the caller supplied no timer of its own.
void supply_layout_timer(PipelineOptions& options);

}  // namespace opfuse
