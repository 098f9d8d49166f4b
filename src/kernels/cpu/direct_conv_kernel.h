// "cpu.conv" (kernels/cpu/direct_conv_kernel.cc): opfuse::BlockedConv computed directly on the
// blocked layout whose block is one vector (nChw8c on AVX2, nChw16c on AVX-512), with the weights
// packed once, the bias added in registers and the epilogue run over each output row while it is
// in L1.
//
// Why: on AVX2 oneDNN 2.6's direct 3x3 kernel (`jit:avx2`) ran ResNet-50's 3x3 convs at
// 1.12-1.42x ONNX Runtime's time per conv on a Zen 3, while its 1x1 kernel was faster than ORT's
// except on small products (about 2^19 multiply-adds: 1x1 convs on 16x16 and 8x8 maps), which it
// runs on one thread of two.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/target.h"
#include "kernels/kernel.h"

namespace opfuse {

namespace hwy_cpu {
// One run over an output row: every tile of the row times one panel of output blocks, over a
// run of input blocks. cpu.winograd runs its products through the same loop (a "row" of
// transformed tiles, one tap).
struct ConvRow {
  const float* x;             // the input pixel 0 of the row reads at tap 0, first input block of the run
  size_t pixel_stride;        // floats between consecutive output pixels' inputs (b x the stride)
  const size_t* taps;         // each tap's offset from an output pixel's input, in floats
  size_t num_taps;
  size_t groups;              // input blocks in the run
  size_t group_stride;        // floats between them
  const float* w;             // the panel's packed weights for the run: [groups][taps][b][blocks x b]
  size_t blocks;              // output blocks in the panel: 4, or 2
  float* y;                   // pixel 0 of the row in the panel's first output block
  size_t y_group;             // floats between the panel's output blocks
  bool accumulate;            // start from Y (the earlier runs) instead of zero
  const float* bias;          // blocks x b floats, on the last run only (else null)
  const int64_t* tiles;       // (first pixel, width) of each tile of the row
  size_t num_tiles;
};

// Every tile of the row, on the dispatched target (each tile at most conv_tile_pixels wide).
void conv_row_run(const ConvRow& row);
// The widest tile (in pixels) of a panel of `blocks` output blocks.
size_t conv_tile_pixels(size_t blocks);
}  // namespace hwy_cpu

// A BlockedConv of one group whose window is larger than 1x1, or a small unstrided unpadded 1x1
// on two threads or more (larger products are left to the 1x1 kernels), with X and Y on the
// vector's block, an even number of output blocks, constant weights and bias, no input scale,
// and an epilogue with a vector form.
KernelImpl direct_conv_kernel();

// Whether the table prefers it to oneDNN's blocked conv on this target (see the .cc).
bool direct_conv_wins(const Target& target);

// cpu.conv's loop over whole output rows, for a kernel that takes the same convs and hands some
// rows back to it (cpu.winograd, on tiles whose inputs are not all finite).
class DirectConvRows {
 public:
  virtual ~DirectConvRows() = default;
  // Output rows [oy0, oy1) of one image, every panel, bias and epilogue included, on the calling
  // thread. `src`: the image bordered with the conv's padding (X itself when it has none), in a
  // buffer of src_h x src_w pixels per input block (it may be larger than the padded image).
  virtual void run_rows(const float* src, int64_t src_h, int64_t src_w, float* y, const float* residual,
                        int64_t oy0, int64_t oy1) const = 0;
};

// nullptr when cpu.conv does not take the node.
std::unique_ptr<DirectConvRows> direct_conv_rows(const KernelCompileContext& ctx);

}  // namespace opfuse
