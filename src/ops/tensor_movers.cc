// Ops that rearrange or replicate elements: Transpose, Expand, Tile, Pad.
#include <algorithm>
#include <cstring>
#include <functional>

#include "ops/tensor_helpers.h"

namespace opfuse {
namespace {

using ErrorFn = std::function<Status(std::string)>;

// ---- Transpose -----------------------------------------------------------------------------

// The permutation: the `perm` attribute, or the dims reversed.
Result<std::vector<int64_t>> transpose_perm(const AttrReader& attrs, int64_t rank, const ErrorFn& error) {
  std::vector<int64_t> perm;
  if (attrs.has("perm")) {
    perm = attrs.get_ints("perm");
    if (static_cast<int64_t>(perm.size()) != rank) {
      return error(str_cat("perm ", ints_to_string(perm), " has ", perm.size(),
                           " entries for an input of rank ", rank));
    }
    std::vector<bool> seen(rank, false);
    for (int64_t& p : perm) {
      if (p < -rank || p >= rank) return error(str_cat("perm ", ints_to_string(perm), " is not a permutation"));
      if (p < 0) p += rank;  // tolerated, as onnxruntime does
      if (seen[p]) return error(str_cat("perm ", ints_to_string(attrs.get_ints("perm")), " repeats axis ", p));
      seen[p] = true;
    }
  } else {
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  return perm;
}

Status infer_transpose(InferContext& ctx) {
  const auto& in = ctx.input_shape(0);
  std::optional<Shape> out;
  if (in) {
    OPFUSE_ASSIGN_OR_RETURN(auto perm, transpose_perm(ctx.attrs(), in->size(),
                                                      [&](std::string m) { return ctx.error(m); }));
    out = Shape();
    for (int64_t p : perm) out->push_back((*in)[p]);
  } else if (ctx.attrs().has("perm")) {
    out = unknown_shape(ctx.attrs().get_ints("perm").size());
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
  return Status::ok();
}

Status run_transpose(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  OPFUSE_ASSIGN_OR_RETURN(auto perm, transpose_perm(ctx.attrs(), x.rank(),
                                                    [&](std::string m) { return ctx.error(m); }));
  const std::vector<int64_t> in_strides = row_strides(x.dims());
  std::vector<int64_t> out_dims, strides;
  for (int64_t p : perm) {
    out_dims.push_back(x.dim(p));
    strides.push_back(in_strides[p]);
  }
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out_dims));
  strided_copy(x.raw_data(), dtype_size(x.dtype()), out_dims, strides, 0, y->raw_data());
  return Status::ok();
}

// ---- Expand --------------------------------------------------------------------------------

Status infer_expand(InferContext& ctx) {
  OPFUSE_TRY(check_integer_input(ctx, 1, "shape"));
  const auto& in = ctx.input_shape(0);
  OPFUSE_ASSIGN_OR_RETURN(std::optional<Shape> target, shape_from_input(ctx, 1));
  std::optional<Shape> out;
  if (in && target) {
    OPFUSE_ASSIGN_OR_RETURN(out, broadcast_shapes({*in, *target}, ctx.node().describe()));
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
  return Status::ok();
}

// Strides that read `dims` as if broadcast to `out_dims` (0 where a dim is stretched).
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& dims,
                                       const std::vector<int64_t>& out_dims) {
  const std::vector<int64_t> in_strides = row_strides(dims);
  std::vector<int64_t> strides(out_dims.size(), 0);
  const size_t offset = out_dims.size() - dims.size();
  for (size_t i = 0; i < dims.size(); ++i) strides[offset + i] = dims[i] == 1 ? 0 : in_strides[i];
  return strides;
}

Status run_expand(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  OPFUSE_ASSIGN_OR_RETURN(auto shape, int_input(ctx, 1, "shape"));
  for (int64_t d : shape) {
    if (d < 0) return ctx.error(str_cat("negative dim in shape ", ints_to_string(shape)));
  }
  OPFUSE_ASSIGN_OR_RETURN(auto out_dims, broadcast_dims({x.dims(), shape}, ctx.node().describe()));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out_dims));
  strided_copy(x.raw_data(), dtype_size(x.dtype()), out_dims, broadcast_strides(x.dims(), out_dims),
               0, y->raw_data());
  return Status::ok();
}

// ---- Tile ----------------------------------------------------------------------------------

Status check_repeats(const std::vector<int64_t>& repeats, int64_t rank, const ErrorFn& error) {
  if (static_cast<int64_t>(repeats.size()) != rank) {
    return error(str_cat("repeats ", ints_to_string(repeats), " must have one entry per input dim (rank ",
                         rank, ")"));
  }
  for (int64_t r : repeats) {
    if (r < 0) return error(str_cat("repeats ", ints_to_string(repeats), " has a negative entry"));
  }
  return Status::ok();
}

Status infer_tile(InferContext& ctx) {
  OPFUSE_TRY(check_integer_input(ctx, 1, "repeats"));
  const auto& in = ctx.input_shape(0);
  std::optional<Shape> out;
  if (in) {
    out = unknown_shape(in->size());
    if (auto repeats = constant_ints(ctx, 1)) {
      OPFUSE_TRY(check_repeats(*repeats, in->size(), [&](std::string m) { return ctx.error(m); }));
      for (size_t i = 0; i < in->size(); ++i) {
        const Dim& d = (*in)[i];
        if (d.is_known()) {
          auto n = checked_mul(d.value(), (*repeats)[i]);
          if (!n) return ctx.error("the tiled shape overflows 64 bits");
          (*out)[i] = Dim(*n);
        } else if ((*repeats)[i] == 1) {
          (*out)[i] = d;
        } else if ((*repeats)[i] == 0) {
          (*out)[i] = Dim(0);
        }
      }
    }
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
  return Status::ok();
}

Status run_tile(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  OPFUSE_ASSIGN_OR_RETURN(auto repeats, int_input(ctx, 1, "repeats"));
  OPFUSE_TRY(check_repeats(repeats, x.rank(), [&](std::string m) { return ctx.error(m); }));
  std::vector<int64_t> out_dims;
  for (int64_t i = 0; i < x.rank(); ++i) {
    auto n = checked_mul(x.dim(i), repeats[i]);
    if (!n) return ctx.error("the tiled shape overflows 64 bits");
    out_dims.push_back(*n);
  }
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out_dims));
  if (y->numel() == 0) return Status::ok();
  std::vector<std::vector<int64_t>> maps(x.rank());
  for (int64_t i = 0; i < x.rank(); ++i) {
    for (int64_t o = 0; o < out_dims[i]; ++o) maps[i].push_back(o % x.dim(i));
  }
  mapped_copy(x.raw_data(), dtype_size(x.dtype()), out_dims, maps, row_strides(x.dims()), nullptr,
              y->raw_data());
  return Status::ok();
}

// ---- Pad -----------------------------------------------------------------------------------

enum class PadMode { kConstant, kReflect, kEdge };

Result<PadMode> pad_mode(const AttrReader& attrs, const ErrorFn& error) {
  const std::string mode = attrs.get_string("mode");
  if (mode == "constant") return PadMode::kConstant;
  if (mode == "reflect") return PadMode::kReflect;
  if (mode == "edge") return PadMode::kEdge;
  return error(str_cat("unsupported mode '", mode, "' (expected constant, reflect or edge)"));
}

Status check_pads(const std::vector<int64_t>& pads, size_t rank, const ErrorFn& error) {
  if (pads.size() != 2 * rank) {
    return error(str_cat("pads ", ints_to_string(pads), " must have 2 * rank = ", 2 * rank, " entries"));
  }
  return Status::ok();
}

Status infer_pad(InferContext& ctx) {
  OPFUSE_TRY(check_integer_input(ctx, 1, "pads"));
  auto error = [&](std::string m) { return ctx.error(m); };
  OPFUSE_TRY(pad_mode(ctx.attrs(), error).status());
  const auto& in = ctx.input_shape(0);
  std::optional<Shape> out;
  if (in) {
    out = unknown_shape(in->size());
    if (auto pads = constant_ints(ctx, 1)) {
      OPFUSE_TRY(check_pads(*pads, in->size(), error));
      const size_t rank = in->size();
      for (size_t i = 0; i < rank; ++i) {
        const Dim& d = (*in)[i];
        const int64_t extra = (*pads)[i] + (*pads)[i + rank];
        if (d.is_known()) {
          if (d.value() + extra < 0) {
            return error(str_cat("pads ", ints_to_string(*pads), " crop axis ", i, " of ",
                                 shape_to_string(*in), " below size 0"));
          }
          (*out)[i] = Dim(d.value() + extra);
        } else if ((*pads)[i] == 0 && (*pads)[i + rank] == 0) {
          (*out)[i] = d;
        }
      }
    }
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
  return Status::ok();
}

// Where output coordinate o of one axis reads from: negative pads crop the input to
// [lo, lo + len), then positive pads extend it by `mode`; -1 marks the constant.
Result<std::vector<int64_t>> pad_map(int64_t dim, int64_t before, int64_t after, PadMode mode,
                                     int64_t axis, const ErrorFn& error) {
  const int64_t lo = std::max<int64_t>(0, -before);
  const int64_t len = dim - lo - std::max<int64_t>(0, -after);
  const int64_t pb = std::max<int64_t>(0, before);
  const int64_t out_len = len + pb + std::max<int64_t>(0, after);
  if (len < 0 || out_len < 0) {
    return error(str_cat("pads ", before, ", ", after, " crop axis ", axis, " of size ", dim, " below size 0"));
  }
  if (mode != PadMode::kConstant && len == 0 && out_len > 0) {
    return error(str_cat("cannot pad empty axis ", axis, " in reflect or edge mode"));
  }
  std::vector<int64_t> map(out_len);
  for (int64_t o = 0; o < out_len; ++o) {
    int64_t i = o - pb;
    if (i < 0 || i >= len) {
      if (mode == PadMode::kConstant) {
        map[o] = -1;
        continue;
      }
      if (mode == PadMode::kEdge || len == 1) {
        i = std::clamp<int64_t>(i, 0, len - 1);
      } else {  // reflect without repeating the edge, folding as often as needed (numpy)
        const int64_t period = 2 * (len - 1);
        i = ((i % period) + period) % period;
        if (i >= len) i = period - i;
      }
    }
    map[o] = lo + i;
  }
  return map;
}

Status run_pad(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto error = [&](std::string m) { return ctx.error(m); };
  OPFUSE_ASSIGN_OR_RETURN(PadMode mode, pad_mode(ctx.attrs(), error));
  OPFUSE_ASSIGN_OR_RETURN(auto pads, int_input(ctx, 1, "pads"));
  OPFUSE_TRY(check_pads(pads, x.rank(), error));
  // The constant, converted to the data's dtype, as raw bytes.
  Tensor fill = Tensor::zeros(x.dtype(), {}).value();
  if (ctx.has_input(2) && mode == PadMode::kConstant) {
    const Tensor& c = ctx.input(2);
    if (c.numel() != 1) return error(str_cat("constant_value must be a scalar, got ", c.type_string()));
    if (c.dtype() != x.dtype()) {
      return error(str_cat("constant_value is ", c.type_string(), " but data is ", x.type_string()));
    }
    std::memcpy(fill.raw_data(), c.raw_data(), dtype_size(x.dtype()));
  }
  std::vector<std::vector<int64_t>> maps;
  std::vector<int64_t> out_dims;
  for (int64_t i = 0; i < x.rank(); ++i) {
    OPFUSE_ASSIGN_OR_RETURN(auto map, pad_map(x.dim(i), pads[i], pads[i + x.rank()], mode, i, error));
    out_dims.push_back(static_cast<int64_t>(map.size()));
    maps.push_back(std::move(map));
  }
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out_dims));
  mapped_copy(x.raw_data(), dtype_size(x.dtype()), out_dims, maps, row_strides(x.dims()),
              fill.raw_data(), y->raw_data());
  return Status::ok();
}

}  // namespace

std::vector<OpDef> tensor_mover_ops() {
  std::vector<OpDef> ops;
  OpDef transpose = injective_op("Transpose", 1, 1, infer_transpose, run_transpose,
                                 "permutes the dims (`perm`, default reversed)");
  transpose.attrs = {{"perm", AttrType::kInts, std::nullopt}};
  ops.push_back(std::move(transpose));
  ops.push_back(injective_op("Expand", 2, 2, infer_expand, run_expand,
                             "broadcasts the input against the `shape` input"));
  ops.push_back(injective_op("Tile", 2, 2, infer_tile, run_tile,
                             "repeats the input `repeats[i]` times along each dim"));
  OpDef pad = injective_op("Pad", 2, 3, infer_pad, run_pad,
                           "pads (or crops, with negative pads) by constant, reflect or edge");
  pad.attrs = {{"mode", AttrType::kString, AttrValue(std::string("constant"))}};
  ops.push_back(std::move(pad));
  return ops;
}

}  // namespace opfuse
