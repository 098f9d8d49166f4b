// Resize attributes and input handling shared by resize.cc (record, inference) and
// resize_kernel.cc (reference kernel). Not a public header.
#pragma once

#include <optional>
#include <vector>

#include "ops/op_def.h"

namespace opfuse {

enum class ResizeMode { kNearest, kLinear, kCubic };
enum class ResizeCoordMode {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize,
};
enum class ResizeNearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct ResizeAttrs {
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoordMode coord = ResizeCoordMode::kHalfPixel;
  ResizeNearestMode nearest = ResizeNearestMode::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation_value = 0.0;
};

// Parses the string attributes; an unknown string is a user error naming it and the valid ones.
Result<ResizeAttrs> parse_resize_attrs(const Node& node, const AttrReader& attrs);

// Input indices.
inline constexpr size_t kResizeRoi = 1;
inline constexpr size_t kResizeScales = 2;
inline constexpr size_t kResizeSizes = 3;

// Output length of one axis resized by `scale`: floor(len * scale). The product is taken in
// float, as onnxruntime and the ONNX reference do (0.7f * 10 is 7, not 6.9999...); like them, the
// roi of tf_crop_and_resize does not change the output length.
int64_t resize_output_len(int64_t len, float scale);

}  // namespace opfuse
