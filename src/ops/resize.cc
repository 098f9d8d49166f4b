// Resize (opset 11-17: inputs X, roi, scales, sizes): the record, attribute parsing and shape
// inference. The kernel is in resize_kernel.cc.
#include <cmath>

#include "ops/op_list.h"
#include "ops/resize_internal.h"

namespace opfuse {

namespace {

template <typename E>
struct Named {
  const char* name;
  E value;
};

template <typename E, size_t N>
Result<E> parse_enum(const Node& node, const char* attr, const std::string& text,
                     const Named<E> (&table)[N]) {
  std::string valid;
  for (const Named<E>& entry : table) {
    if (text == entry.name) return entry.value;
    valid += (valid.empty() ? "" : ", ") + std::string(entry.name);
  }
  return Status::user_error(
      str_cat(node.describe(), ": unknown ", attr, " '", text, "'; valid: ", valid));
}

constexpr Named<ResizeMode> kModes[] = {
    {"nearest", ResizeMode::kNearest}, {"linear", ResizeMode::kLinear}, {"cubic", ResizeMode::kCubic}};
constexpr Named<ResizeCoordMode> kCoordModes[] = {
    {"half_pixel", ResizeCoordMode::kHalfPixel},
    {"pytorch_half_pixel", ResizeCoordMode::kPytorchHalfPixel},
    {"align_corners", ResizeCoordMode::kAlignCorners},
    {"asymmetric", ResizeCoordMode::kAsymmetric},
    {"tf_half_pixel_for_nn", ResizeCoordMode::kTfHalfPixelForNn},
    {"tf_crop_and_resize", ResizeCoordMode::kTfCropAndResize},
};
constexpr Named<ResizeNearestMode> kNearestModes[] = {
    {"round_prefer_floor", ResizeNearestMode::kRoundPreferFloor},
    {"round_prefer_ceil", ResizeNearestMode::kRoundPreferCeil},
    {"floor", ResizeNearestMode::kFloor},
    {"ceil", ResizeNearestMode::kCeil},
};

}  // namespace

Result<ResizeAttrs> parse_resize_attrs(const Node& node, const AttrReader& attrs) {
  ResizeAttrs out;
  OPFUSE_ASSIGN_OR_RETURN(out.mode, parse_enum(node, "mode", attrs.get_string("mode"), kModes));
  OPFUSE_ASSIGN_OR_RETURN(out.coord, parse_enum(node, "coordinate_transformation_mode",
                                                attrs.get_string("coordinate_transformation_mode"),
                                                kCoordModes));
  OPFUSE_ASSIGN_OR_RETURN(out.nearest, parse_enum(node, "nearest_mode",
                                                  attrs.get_string("nearest_mode"), kNearestModes));
  out.cubic_a = attrs.get_float("cubic_coeff_a");
  out.exclude_outside = attrs.get_int("exclude_outside") != 0;
  out.extrapolation_value = attrs.get_float("extrapolation_value");
  return out;
}

int64_t resize_output_len(int64_t len, float scale) {
  return static_cast<int64_t>(std::floor(static_cast<float>(len) * scale));
}

namespace {

// Whether scales / sizes is given. An empty tensor (how opset-11/13 models fill the slot of the
// one they do not use) counts as absent.
bool resize_input_given(const InferContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return false;
  if (const Tensor* c = ctx.input_constant(i)) return c->numel() > 0;
  const std::optional<Shape>& s = ctx.input_shape(i);
  return !(s && s->size() == 1 && (*s)[0].is_known() && (*s)[0].value() == 0);
}

// The length of a 1-D input from its data or its shape, or -1 when unknown.
int64_t input_length(const InferContext& ctx, size_t i) {
  if (const Tensor* c = ctx.input_constant(i)) return c->numel();
  const std::optional<Shape>& s = ctx.input_shape(i);
  if (s && s->size() == 1 && (*s)[0].is_known()) return (*s)[0].value();
  return -1;
}

Status infer_resize(InferContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(ResizeAttrs attrs, parse_resize_attrs(ctx.node(), ctx.attrs()));
  const bool has_scales = resize_input_given(ctx, kResizeScales);
  const bool has_sizes = resize_input_given(ctx, kResizeSizes);
  if (has_scales == has_sizes) {
    return ctx.error(has_scales ? "both scales and sizes are given; give exactly one"
                                : "neither scales nor sizes is given; give exactly one");
  }
  if (attrs.coord == ResizeCoordMode::kTfCropAndResize && !ctx.has_input(kResizeRoi)) {
    return ctx.error("coordinate_transformation_mode tf_crop_and_resize needs the roi input");
  }
  const size_t which = has_scales ? kResizeScales : kResizeSizes;
  const char* what = has_scales ? "scales" : "sizes";
  const DType want = has_scales ? DType::kF32 : DType::kI64;
  if (ctx.input_dtype(which) != DType::kUndefined && ctx.input_dtype(which) != want) {
    return ctx.error(str_cat(what, " must be ", dtype_name(want), ", got ",
                             dtype_name(ctx.input_dtype(which))));
  }
  const std::optional<Shape>& in = ctx.input_shape(0);
  const int64_t len = input_length(ctx, which);
  const int64_t rank = in ? static_cast<int64_t>(in->size()) : len;
  if (in && len >= 0 && len != rank) {
    return ctx.error(str_cat(what, " has ", len, " entries but X ", shape_to_string(*in),
                             " has rank ", rank));
  }
  if (attrs.coord == ResizeCoordMode::kTfCropAndResize && rank >= 0) {
    const int64_t roi_len = input_length(ctx, kResizeRoi);
    if (roi_len >= 0 && roi_len != 2 * rank) {
      return ctx.error(str_cat("roi has ", roi_len, " entries; expected 2 x rank = ", 2 * rank));
    }
  }
  const DType dtype = ctx.input_dtype(0);
  if (rank < 0) {
    ctx.set_output(0, dtype, std::nullopt);
    return Status::ok();
  }
  Shape out(static_cast<size_t>(rank), Dim::unknown());
  if (const Tensor* c = ctx.input_constant(which)) {
    for (int64_t i = 0; i < rank; ++i) {
      if (has_sizes) {
        const int64_t s = c->get_int(i);
        if (s < 0) return ctx.error(str_cat("sizes[", i, "] is negative (", s, ")"));
        out[i] = Dim(s);
        continue;
      }
      const float scale = static_cast<float>(c->get_double(i));
      if (!(scale > 0)) return ctx.error(str_cat("scales[", i, "] = ", scale, " is not positive"));
      const Dim d = in ? (*in)[i] : Dim::unknown();
      if (d.is_known()) {
        out[i] = Dim(resize_output_len(d.value(), scale));
      } else if (scale == 1.0f) {
        out[i] = d;  // a symbolic dim that is not resized keeps its name
      }
    }
  }
  ctx.set_output(0, dtype, out);
  return Status::ok();
}

// Multiply-adds per output element: taps^k for the k resized axes (nearest copies one element).
int64_t resize_flops(const Node& node) {
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  if (!x || !y || !x->shape || !y->shape) return -1;
  auto in = static_dims(*x->shape);
  auto out = static_dims(*y->shape);
  if (!in || !out || in->size() != out->size()) return -1;
  const AttrReader attrs(node);
  const std::string mode = attrs.get_string("mode");
  const int64_t taps = mode == "cubic" ? 4 : mode == "linear" ? 2 : 1;
  int64_t per_element = 1;
  for (size_t i = 0; i < in->size(); ++i) {
    if ((*in)[i] != (*out)[i]) per_element *= taps;
  }
  return numel_of(*out) * (taps == 1 ? 1 : 2 * per_element);
}

}  // namespace

Status resize_kernel(KernelContext& ctx);  // resize_kernel.cc

std::vector<OpDef> resize_ops() {
  OpDef def;
  def.name = "Resize";
  def.min_inputs = 1;
  def.max_inputs = 4;
  // One record covers every mode, so the kind must hold for the costliest: linear and cubic
  // read several input elements per output, which is not injective.
  def.kind = FusionKind::kOpaque;
  def.attrs = {
      AttrSpec{"coordinate_transformation_mode", AttrType::kString, AttrValue(std::string("half_pixel"))},
      AttrSpec{"cubic_coeff_a", AttrType::kFloat, AttrValue(-0.75f)},
      AttrSpec{"exclude_outside", AttrType::kInt, AttrValue(int64_t{0})},
      AttrSpec{"extrapolation_value", AttrType::kFloat, AttrValue(0.0f)},
      AttrSpec{"mode", AttrType::kString, AttrValue(std::string("nearest"))},
      AttrSpec{"nearest_mode", AttrType::kString, AttrValue(std::string("round_prefer_floor"))},
  };
  def.infer = infer_resize;
  def.reference = resize_kernel;
  def.flops = resize_flops;
  def.summary = "resize by scales or to sizes (nearest, n-linear, cubic)";
  return {std::move(def)};
}

}  // namespace opfuse
