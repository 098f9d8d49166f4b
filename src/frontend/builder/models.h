// Whole models built in code with fixed-seed random weights (no files, no network): what
// `opfuse demo`, the examples and the tests run.
#pragma once

#include <cstdint>
#include <vector>

#include "frontend/builder/model_builder.h"

namespace opfuse {

struct ResNetOptions {
  int64_t image_size = 224;
  int64_t batch = 1;
  int64_t num_classes = 1000;
  std::vector<int64_t> blocks = {3, 4, 6, 3};  // ResNet-50; {3, 4, 23, 3} is ResNet-101
  uint64_t seed = 42;
};
// ResNet v1.5 with bottleneck blocks: input "image" f32[batch, 3, size, size], output "logits".
Result<Graph> build_resnet(const ResNetOptions& options = {});

// The ResNet trunk (stem and four stages) on an NCHW image. output_stride 32 is the classifier;
// 16 or 8 replace the last strides by dilation (DeepLabV3's dilated backbone).
Var resnet_trunk(ModelBuilder& b, Var image, const std::vector<int64_t>& blocks, int64_t output_stride);

// MobileNetV2's feature extractor (without the last 1x1 conv), dilated to output_stride 16 or 8.
Var mobilenet_v2_trunk(ModelBuilder& b, Var image, int64_t output_stride);

enum class SegmentationBackbone { kMobileNetV2, kResNet50 };

struct DeepLabOptions {
  int64_t image_size = 256;
  int64_t batch = 1;
  int64_t num_classes = 21;
  SegmentationBackbone backbone = SegmentationBackbone::kMobileNetV2;
  int64_t output_stride = 16;
  int64_t aspp_channels = 256;
  std::vector<int64_t> atrous_rates = {6, 12, 18};
  uint64_t seed = 42;
};
// DeepLabV3: dilated backbone, ASPP (1x1, three atrous 3x3, image pooling), projection, a 3x3
// head, class logits, bilinear upsampling to the input size. Input "image", output "logits"
// f32[batch, classes, size, size].
Result<Graph> build_deeplabv3(const DeepLabOptions& options = {});

}  // namespace opfuse
