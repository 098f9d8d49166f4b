// Typed helpers of ModelBuilder: each is one or a few registry ops with weights created on the
// fly from the input's inferred shape.
#include <cmath>

#include "frontend/builder/model_builder.h"

namespace opfuse {
namespace {

std::vector<int64_t> twice(int64_t v) { return {v, v}; }
std::vector<int64_t> four(int64_t v) { return {v, v, v, v}; }

}  // namespace

Var ModelBuilder::clip(Var x, double lo, double hi) {
  const DType t = x.dtype() == DType::kUndefined ? DType::kF32 : x.dtype();
  return op("Clip", {x, scalar(lo, t), scalar(hi, t)});
}

Var ModelBuilder::gelu(Var x) {
  return (x * 0.5) * (op("Erf", {x * (1.0 / std::sqrt(2.0))}) + 1.0);
}

Var ModelBuilder::pow(Var x, double exponent) {
  return op("Pow", {x, scalar(exponent, x.dtype() == DType::kUndefined ? DType::kF32 : x.dtype())});
}

Var ModelBuilder::conv(Var x, Var w, Var bias, const ConvOptions& o) {
  if (!ok()) return {};
  const int64_t k = w.dim(2);
  const int64_t pad = o.pad >= 0 ? o.pad : (k > 0 ? o.dilation * (k - 1) / 2 : 0);
  Attributes attrs = {{"strides", twice(o.stride)},
                      {"pads", four(pad)},
                      {"dilations", twice(o.dilation)},
                      {"group", o.group}};
  std::vector<Var> inputs = {x, w};
  if (bias.valid()) inputs.push_back(bias);
  return op("Conv", inputs, std::move(attrs), "conv");
}

Var ModelBuilder::conv2d(Var x, int64_t out_channels, int64_t kernel, const ConvOptions& o) {
  if (!ok()) return {};
  const int64_t in_channels = x.dim(1);
  if (x.rank() != 4 || in_channels <= 0) {
    return fail(Status::user_error(str_cat(scoped("conv2d"), ": input '", x.name(), "' ",
                                           x.value() ? x.value()->type_string() : "?",
                                           " is not NCHW with a known channel count")));
  }
  if (o.group <= 0 || in_channels % o.group != 0 || out_channels % o.group != 0) {
    return fail(Status::user_error(str_cat(scoped("conv2d"), ": group ", o.group, " must divide ",
                                           in_channels, " input and ", out_channels, " output channels")));
  }
  Var w = weight("conv.weight", {out_channels, in_channels / o.group, kernel, kernel});
  Var b = o.bias ? weight("conv.bias", {out_channels}, Init::uniform(-0.05, 0.05)) : Var();
  return conv(x, w, b, o);
}

Var ModelBuilder::batch_norm(Var x, double epsilon) {
  if (!ok()) return {};
  const int64_t c = x.dim(1);
  if (c <= 0) {
    return fail(Status::user_error(str_cat(scoped("batch_norm"), ": input '", x.name(),
                                           "' has no known channel dim")));
  }
  Var gamma = weight("bn.scale", {c}, Init::uniform(0.7, 1.3));
  Var beta = weight("bn.bias", {c}, Init::uniform(-0.1, 0.1));
  Var mean = weight("bn.mean", {c}, Init::uniform(-0.1, 0.1));
  Var var = weight("bn.var", {c}, Init::uniform(0.5, 1.5));
  return op("BatchNormalization", {x, gamma, beta, mean, var},
            {{"epsilon", static_cast<float>(epsilon)}}, "bn");
}

Var ModelBuilder::layer_norm(Var x, int64_t axis, double epsilon) {
  if (!ok()) return {};
  const int64_t r = x.rank();
  if (r <= 0) return fail(Status::user_error(str_cat(scoped("layer_norm"), ": input rank unknown")));
  const int64_t a = axis < 0 ? axis + r : axis;
  std::vector<int64_t> dims;
  for (int64_t i = a; i < r; ++i) {
    if (x.dim(i) <= 0) {
      return fail(Status::user_error(str_cat(scoped("layer_norm"), ": normalised dim ", i,
                                             " of '", x.name(), "' is not known")));
    }
    dims.push_back(x.dim(i));
  }
  Var scale = weight("ln.scale", dims, Init::uniform(0.8, 1.2));
  Var bias = weight("ln.bias", dims, Init::uniform(-0.1, 0.1));
  return op("LayerNormalization", {x, scale, bias},
            {{"axis", axis}, {"epsilon", static_cast<float>(epsilon)}}, "ln");
}

Var ModelBuilder::linear(Var x, int64_t out_features, bool bias) {
  if (!ok()) return {};
  const int64_t in = x.dim(-1);
  if (in <= 0) {
    return fail(Status::user_error(str_cat(scoped("linear"), ": the last dim of '", x.name(),
                                           "' is not known")));
  }
  if (x.rank() == 2) {
    Var w = weight("fc.weight", {out_features, in});
    std::vector<Var> inputs = {x, w};
    if (bias) inputs.push_back(weight("fc.bias", {out_features}, Init::uniform(-0.05, 0.05)));
    return op("Gemm", inputs, {{"transB", int64_t{1}}}, "fc");
  }
  // MatMul wants [in, out]: the transposed layout of Gemm's weight.
  Var w = weight("fc.weight", {in, out_features}, Init::xavier_uniform());
  Var y = op("MatMul", {x, w}, {}, "fc");
  if (!bias) return y;
  return op("Add", {y, weight("fc.bias", {out_features}, Init::uniform(-0.05, 0.05))}, {}, "fc.bias_add");
}

Var ModelBuilder::max_pool(Var x, const PoolOptions& o) {
  return op("MaxPool", {x},
            {{"kernel_shape", twice(o.kernel)},
             {"strides", twice(o.stride > 0 ? o.stride : o.kernel)},
             {"pads", four(o.pad)}});
}

Var ModelBuilder::average_pool(Var x, const PoolOptions& o) {
  return op("AveragePool", {x},
            {{"kernel_shape", twice(o.kernel)},
             {"strides", twice(o.stride > 0 ? o.stride : o.kernel)},
             {"pads", four(o.pad)}});
}

Var ModelBuilder::flatten(Var x, int64_t axis) { return op("Flatten", {x}, {{"axis", axis}}); }

Var ModelBuilder::reshape(Var x, std::vector<int64_t> dims) {
  return op("Reshape", {x, ints(std::move(dims))});
}

Var ModelBuilder::transpose(Var x, std::vector<int64_t> perm) {
  return op("Transpose", {x}, {{"perm", std::move(perm)}});
}

Var ModelBuilder::concat(const std::vector<Var>& xs, int64_t axis) {
  return op("Concat", xs, {{"axis", axis}});
}

Var ModelBuilder::softmax(Var x, int64_t axis) { return op("Softmax", {x}, {{"axis", axis}}); }

Var ModelBuilder::reduce_mean(Var x, std::vector<int64_t> axes, bool keepdims) {
  return op("ReduceMean", {x}, {{"axes", std::move(axes)}, {"keepdims", int64_t{keepdims ? 1 : 0}}});
}

Var ModelBuilder::resize_bilinear(Var x, int64_t height, int64_t width) {
  if (!ok()) return {};
  if (x.rank() != 4 || x.dim(0) <= 0 || x.dim(1) <= 0) {
    return fail(Status::user_error(str_cat(scoped("resize_bilinear"), ": input '", x.name(),
                                           "' is not NCHW with known batch and channels")));
  }
  Var sizes = ints({x.dim(0), x.dim(1), height, width});
  return op("Resize", {x, Var(), Var(), sizes},
            {{"mode", std::string("linear")},
             {"coordinate_transformation_mode", std::string("pytorch_half_pixel")}});
}

}  // namespace opfuse
