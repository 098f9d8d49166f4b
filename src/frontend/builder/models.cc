#include "frontend/builder/models.h"

#include "frontend/builder/blocks.h"

namespace opfuse {
namespace {

Status check_image_options(int64_t size, int64_t batch, int64_t classes, int64_t min_size) {
  if (size < min_size || size > 4096) {
    return Status::user_error(str_cat("image size must be between ", min_size, " and 4096, got ", size));
  }
  if (batch < 1 || batch > 1024) return Status::user_error(str_cat("batch must be 1..1024, got ", batch));
  if (classes < 1) return Status::user_error(str_cat("need at least one class, got ", classes));
  return Status::ok();
}

}  // namespace

Var resnet_trunk(ModelBuilder& b, Var image, const std::vector<int64_t>& blocks, int64_t output_stride) {
  if (blocks.size() != 4) {
    return b.fail(Status::user_error(str_cat("ResNet needs 4 stages, got ", blocks.size())));
  }
  if (output_stride != 8 && output_stride != 16 && output_stride != 32) {
    return b.fail(Status::user_error(str_cat("output stride must be 8, 16 or 32, got ", output_stride)));
  }
  Var h = conv2d_bn_act(b, "stem", image, 64, 7, {.stride = 2, .bias = false});
  h = b.max_pool(h, {.kernel = 3, .stride = 2, .pad = 1});
  const int64_t widths[4] = {64, 128, 256, 512};
  int64_t stride_so_far = 4, dilation = 1;
  for (size_t stage = 0; stage < 4; ++stage) {
    int64_t stride = stage == 0 ? 1 : 2;
    // Past the output stride, keep the resolution and widen the receptive field instead.
    if (stride == 2 && stride_so_far * 2 > output_stride) {
      stride = 1;
      dilation *= 2;
    } else {
      stride_so_far *= stride;
    }
    for (int64_t i = 0; i < blocks[stage]; ++i) {
      h = bottleneck_block(b, str_cat("layer", stage + 1, ".", i), h, widths[stage],
                           i == 0 ? stride : 1, dilation);
    }
  }
  return h;
}

Var mobilenet_v2_trunk(ModelBuilder& b, Var image, int64_t output_stride) {
  if (output_stride != 8 && output_stride != 16 && output_stride != 32) {
    return b.fail(Status::user_error(str_cat("output stride must be 8, 16 or 32, got ", output_stride)));
  }
  Var h = conv2d_bn_act(b, "stem", image, 32, 3, {.stride = 2, .bias = false}, Activation::kRelu6);
  // (expansion t, channels c, repeats n, stride s), as in the MobileNetV2 paper.
  struct Stage { int64_t t, c, n, s; };
  const Stage stages[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                          {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int64_t stride_so_far = 2, dilation = 1, block = 0;
  for (const Stage& st : stages) {
    int64_t stride = st.s;
    int64_t first_dilation = dilation;
    if (stride == 2 && stride_so_far * 2 > output_stride) {
      stride = 1;
      dilation *= 2;
    } else {
      stride_so_far *= stride;
    }
    for (int64_t i = 0; i < st.n; ++i) {
      h = inverted_residual_block(b, str_cat("features.", ++block), h, st.c, st.t,
                                  i == 0 ? stride : 1, i == 0 ? first_dilation : dilation);
    }
  }
  return h;
}

Result<Graph> build_resnet(const ResNetOptions& o) {
  OPFUSE_TRY(check_image_options(o.image_size, o.batch, o.num_classes, 32));
  ModelBuilder b(str_cat("resnet", 2 + 3 * (o.blocks.size() == 4 ? o.blocks[0] + o.blocks[1] + o.blocks[2] + o.blocks[3] : 0)), o.seed);
  Var image = b.input("image", {o.batch, 3, o.image_size, o.image_size});
  Var h = resnet_trunk(b, image, o.blocks, 32);
  h = b.flatten(b.global_average_pool(h), 1);
  {
    ModelBuilder::Scope s(b, "head");
    h = b.linear(h, o.num_classes);
  }
  b.output(h, "logits");
  return b.finish();
}

Result<Graph> build_deeplabv3(const DeepLabOptions& o) {
  OPFUSE_TRY(check_image_options(o.image_size, o.batch, o.num_classes, 32));
  if (o.atrous_rates.size() != 3) return Status::user_error("DeepLabV3's ASPP takes three atrous rates");
  const bool resnet = o.backbone == SegmentationBackbone::kResNet50;
  ModelBuilder b(resnet ? "deeplabv3_resnet50" : "deeplabv3_mobilenet_v2", o.seed);
  Var image = b.input("image", {o.batch, 3, o.image_size, o.image_size});
  Var features;
  {
    ModelBuilder::Scope s(b, "backbone");
    features = resnet ? resnet_trunk(b, image, {3, 4, 6, 3}, o.output_stride)
                      : mobilenet_v2_trunk(b, image, o.output_stride);
  }
  const int64_t fh = features.dim(2), fw = features.dim(3);
  const int64_t c = o.aspp_channels;
  Var head;
  {
    ModelBuilder::Scope s(b, "aspp");
    std::vector<Var> branches = {conv2d_bn_act(b, "conv1x1", features, c, 1, {.bias = false})};
    for (size_t i = 0; i < 3; ++i) {
      const int64_t rate = o.atrous_rates[i];
      branches.push_back(conv2d_bn_act(b, str_cat("atrous", rate), features, c, 3,
                                       {.dilation = rate, .bias = false}));
    }
    {
      // Image pooling: global context, broadcast back by bilinear resize of a 1x1 map.
      ModelBuilder::Scope p(b, "pooling");
      Var pooled = b.global_average_pool(features);
      pooled = conv2d_bn_act(b, "conv", pooled, c, 1, {.bias = false});
      branches.push_back(b.resize_bilinear(pooled, fh, fw));
    }
    head = conv2d_bn_act(b, "project", b.concat(branches, 1), c, 1, {.bias = false});
  }
  {
    ModelBuilder::Scope s(b, "classifier");
    head = conv2d_bn_act(b, "conv", head, c, 3, {.bias = false});
    head = b.conv2d(head, o.num_classes, 1);
  }
  b.output(b.resize_bilinear(head, o.image_size, o.image_size), "logits");
  return b.finish();
}

}  // namespace opfuse
