// Scaling packed weights per input channel (kernels/cpu/onednn_common.h, WeightScale): the run
// time half of the input-scale fusion (patterns/input_scale.cc), in Highway so it runs at the
// machine's vector width (the rest of the oneDNN glue is compiled for baseline x86-64).
#pragma once

#include <cstdint>
#include <span>

namespace opfuse {

// A stretch of packed weights whose elements belong to one input channel (blocked layouts: the
// output-channel block is innermost) or to consecutive ones (plain oihw 1x1: a row of input
// channels).
struct ChannelSegment {
  int32_t channel;  // the first element's input channel; -1: the layout's zero padding
  int32_t step;     // 0: one channel throughout; 1: channel, channel + 1, ...
  int64_t length;
};

namespace hwy_cpu {

// dst = src * s[channel of each element] (0 for padding), segment after segment, on this
// thread (the caller splits large weights between threads: onednn_common.cc, scale_weights).
void scale_channel_segments(std::span<const ChannelSegment> segments, const float* s, const float* src,
                            float* dst);

}  // namespace hwy_cpu
}  // namespace opfuse
