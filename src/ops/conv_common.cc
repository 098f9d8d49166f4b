#include "ops/conv_common.h"

namespace opfuse {

std::vector<AttrSpec> conv_attr_specs() {
  return {
      {"auto_pad", AttrType::kString, AttrValue(std::string("NOTSET"))},
      {"dilations", AttrType::kInts, std::nullopt},
      {"group", AttrType::kInt, AttrValue(int64_t{1})},
      {"kernel_shape", AttrType::kInts, std::nullopt},
      {"pads", AttrType::kInts, std::nullopt},
      {"strides", AttrType::kInts, std::nullopt},
  };
}

Result<TransposeAttrs> read_transpose_attrs(const AttrReader& attrs, size_t spatial,
                                            const std::string& who) {
  TransposeAttrs t;
  t.output_padding = attrs.get_ints("output_padding");
  if (!t.output_padding.empty() && t.output_padding.size() != spatial) {
    return Status::user_error(str_cat(who, ": output_padding ", dims_to_string(t.output_padding),
                                      " needs one value per spatial dim (", spatial, ")"));
  }
  for (int64_t p : t.output_padding) {
    if (p < 0) return Status::user_error(str_cat(who, ": output_padding must not be negative"));
  }
  t.output_shape = attrs.get_ints("output_shape");
  // Some exporters write the full [N, C, spatial...] shape; the spatial tail is what counts.
  if (t.output_shape.size() == spatial + 2) {
    t.output_shape.erase(t.output_shape.begin(), t.output_shape.begin() + 2);
  }
  if (!t.output_shape.empty() && t.output_shape.size() != spatial) {
    return Status::user_error(str_cat(who, ": output_shape ", dims_to_string(t.output_shape),
                                      " needs one value per spatial dim (", spatial, ")"));
  }
  for (int64_t d : t.output_shape) {
    if (d < 1) return Status::user_error(str_cat(who, ": output_shape values must be positive"));
  }
  return t;
}

Result<ConvSetup> conv_setup(const Node& node, const Tensor& x, const Tensor& w, const Tensor* b,
                             bool transpose) {
  const std::string who = node.describe();
  const AttrReader attrs(node);
  ConvSetup s;
  const int64_t rank = x.rank();
  if (rank < 3 || rank > 5) {
    return Status::user_error(str_cat(who, ": input X is ", x.type_string(),
                                      "; expected [N, C, spatial...] with 1 to 3 spatial dims"));
  }
  if (w.rank() != rank) {
    return Status::user_error(str_cat(who, ": weight W is ", w.type_string(),
                                      " but input X is ", x.type_string(), "; ranks must match"));
  }
  s.group = attrs.get_int("group");
  if (s.group < 1) return Status::user_error(str_cat(who, ": group must be at least 1"));
  const int64_t c = x.dim(1);
  int64_t m = 0;
  bool channels_ok;
  if (transpose) {
    channels_ok = w.dim(0) == c && c % s.group == 0;
    m = w.dim(1) * s.group;
  } else {
    channels_ok = w.dim(1) * s.group == c && w.dim(0) % s.group == 0;
    m = w.dim(0);
  }
  if (!channels_ok) {
    return Status::user_error(str_cat(who, ": input X ", x.type_string(), " and weight W ",
                                      w.type_string(), " do not agree on channels for group ",
                                      s.group));
  }
  if (b && (b->rank() != 1 || b->dim(0) != m)) {
    return Status::user_error(
        str_cat(who, ": bias B is ", b->type_string(), "; expected [", m, "]"));
  }
  const size_t spatial = static_cast<size_t>(rank - 2);
  const std::vector<int64_t> weight_kernel(w.dims().begin() + 2, w.dims().end());
  OPFUSE_ASSIGN_OR_RETURN(WindowAttrs wa,
                          read_window_attrs(attrs, spatial, weight_kernel, true, who));
  TransposeAttrs ta;
  if (transpose) {
    OPFUSE_ASSIGN_OR_RETURN(ta, read_transpose_attrs(attrs, spatial, who));
  }
  s.out_dims = {x.dim(0), m};
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t in = x.dim(2 + static_cast<int64_t>(i));
    WindowDim d;
    if (transpose) {
      OPFUSE_ASSIGN_OR_RETURN(
          d, conv_transpose_dim(wa, i, in, ta.output_padding, ta.output_shape, who));
    } else {
      OPFUSE_ASSIGN_OR_RETURN(d, window_dim(wa, i, in, false, who));
    }
    set_geometry_axis(s.geo, spatial, i, in, wa, d);
    s.out_dims.push_back(d.out);
  }
  return s;
}

Result<std::optional<ConvInferInfo>> check_conv_shapes(const InferContext& ctx, bool transpose,
                                                       size_t x, size_t w) {
  const std::string who = ctx.node().describe();
  ConvInferInfo info;
  info.group = ctx.attrs().get_int("group");
  if (info.group < 1) return ctx.error(str_cat("group must be at least 1, got ", info.group));
  const auto& xs = ctx.input_shape(x);
  const auto& ws = ctx.input_shape(w);
  if (!xs) return std::optional<ConvInferInfo>();  // rank unknown: nothing more to say
  const size_t rank = xs->size();
  if (rank < 3 || rank > 5) {
    return ctx.error(str_cat("input X has shape ", shape_to_string(*xs),
                             "; expected [N, C, spatial...] with 1 to 3 spatial dims"));
  }
  info.spatial = rank - 2;
  info.weight_kernel.assign(info.spatial, -1);
  if (ws) {
    if (ws->size() != rank) {
      return ctx.error(str_cat("weight W has shape ", shape_to_string(*ws), " (rank ", ws->size(),
                               ") but input X has rank ", rank, " ", shape_to_string(*xs)));
    }
    info.weight_kernel = dims_or_unknown(Shape(ws->begin() + 2, ws->end()));
    const Dim& c = (*xs)[1];
    // Conv: W is [M, C/g, k...]; ConvTranspose: W is [C, M/g, k...].
    const Dim& wc = transpose ? (*ws)[0] : (*ws)[1];
    if (c.is_known() && wc.is_known()) {
      const int64_t expected = transpose ? wc.value() : wc.value() * info.group;
      if (c.value() != expected) {
        return ctx.error(str_cat("input X ", shape_to_string(*xs), " has ", c.value(),
                                 " channels but weight W ", shape_to_string(*ws), " with group ",
                                 info.group, " expects ", expected));
      }
    }
    if (transpose && c.is_known() && c.value() % info.group != 0) {
      return ctx.error(str_cat("input X has ", c.value(), " channels, not divisible by group ",
                               info.group));
    }
    if (!transpose && (*ws)[0].is_known() && (*ws)[0].value() % info.group != 0) {
      return ctx.error(str_cat("weight W ", shape_to_string(*ws), " has ", (*ws)[0].value(),
                               " output channels, not divisible by group ", info.group));
    }
  }
  return std::optional<ConvInferInfo>(std::move(info));
}

Status check_bias(const InferContext& ctx, const Dim& out_channels, size_t b) {
  if (!ctx.has_input(b) || !ctx.input_shape(b)) return Status::ok();
  const Shape& bs = *ctx.input_shape(b);
  if (bs.size() != 1 || (bs[0].is_known() && out_channels.is_known() && bs[0] != out_channels)) {
    return ctx.error(str_cat("bias B has shape ", shape_to_string(bs), "; expected [",
                             out_channels.to_string(), "]"));
  }
  return Status::ok();
}

int64_t conv_family_flops(const Value* driving, const Value* weights) {
  const auto d = static_value_dims(driving);
  const auto w = static_value_dims(weights);
  if (!d || !w || w->empty() || (*w)[0] == 0) return -1;
  return 2 * numel_of(*d) * (numel_of(*w) / (*w)[0]);
}

}  // namespace opfuse
