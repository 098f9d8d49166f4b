// Ops that select elements by position: Slice, Gather, GatherElements.
#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>

#include "ops/slice_bounds.h"
#include "ops/tensor_helpers.h"

namespace opfuse {
namespace {

using ErrorFn = std::function<Status(std::string)>;

// ---- Slice ---------------------------------------------------------------------------------

struct SliceSpec {
  std::vector<int64_t> starts, ends, axes, steps;  // axes normalised, all the same length
};

// Validates and completes the starts/ends/axes/steps inputs for a tensor of rank `rank`.
Result<SliceSpec> slice_spec(std::vector<int64_t> starts, std::vector<int64_t> ends,
                             std::optional<std::vector<int64_t>> axes,
                             std::optional<std::vector<int64_t>> steps, int64_t rank,
                             const ErrorFn& error) {
  SliceSpec spec;
  const size_t n = starts.size();
  if (ends.size() != n || (axes && axes->size() != n) || (steps && steps->size() != n)) {
    return error(str_cat("starts, ends, axes and steps must have the same length; got starts ",
                         ints_to_string(starts), ", ends ", ints_to_string(ends),
                         axes ? ", axes " + ints_to_string(*axes) : "",
                         steps ? ", steps " + ints_to_string(*steps) : ""));
  }
  if (!axes) {
    axes.emplace(n);
    for (size_t i = 0; i < n; ++i) (*axes)[i] = static_cast<int64_t>(i);
  }
  std::vector<bool> seen(rank, false);
  for (int64_t& a : *axes) {
    if (a < -rank || a >= rank) return error(str_cat("axis ", a, " is out of range for rank ", rank));
    if (a < 0) a += rank;
    if (seen[a]) return error(str_cat("axis ", a, " is sliced twice"));
    seen[a] = true;
  }
  if (!steps) steps.emplace(n, 1);
  for (int64_t s : *steps) {
    if (s == 0) return error("a slice step must not be 0");
  }
  spec.starts = std::move(starts);
  spec.ends = std::move(ends);
  spec.axes = std::move(*axes);
  spec.steps = std::move(*steps);
  return spec;
}

// Whether a slice keeps a whole axis of any size (x[:], x[::-1]), so symbolic dims survive.
bool slices_whole_axis(int64_t start, int64_t end, int64_t step) {
  constexpr int64_t kHuge = std::numeric_limits<int32_t>::max();
  if (step == 1) return start == 0 && end >= kHuge;
  if (step == -1) return (start == -1 || start >= kHuge) && end <= -kHuge;
  return false;
}

Status infer_slice(InferContext& ctx) {
  for (size_t i = 1; i < 5; ++i) OPFUSE_TRY(check_integer_input(ctx, i, "starts/ends/axes/steps"));
  const auto& in = ctx.input_shape(0);
  if (!in) {
    ctx.set_output(0, ctx.input_dtype(0), std::nullopt);
    return Status::ok();
  }
  const auto starts = constant_ints(ctx, 1);
  const auto ends = constant_ints(ctx, 2);
  const auto axes = ctx.has_input(3) ? constant_ints(ctx, 3) : std::nullopt;
  const auto steps = ctx.has_input(4) ? constant_ints(ctx, 4) : std::nullopt;
  const bool axes_known = !ctx.has_input(3) || axes;
  const bool steps_known = !ctx.has_input(4) || steps;
  Shape out = *in;
  if (starts && ends && axes_known && steps_known) {
    OPFUSE_ASSIGN_OR_RETURN(SliceSpec spec, slice_spec(*starts, *ends, axes, steps, in->size(),
                                                       [&](std::string m) { return ctx.error(m); }));
    for (size_t i = 0; i < spec.axes.size(); ++i) {
      Dim& d = out[spec.axes[i]];
      if (d.is_known()) {
        d = Dim(resolve_slice(spec.starts[i], spec.ends[i], spec.steps[i], d.value()).second);
      } else if (!slices_whole_axis(spec.starts[i], spec.ends[i], spec.steps[i])) {
        d = Dim::unknown();
      }
    }
  } else if (axes_known && ctx.has_input(3)) {
    for (int64_t a : *axes) {
      if (a >= -static_cast<int64_t>(out.size()) && a < static_cast<int64_t>(out.size())) {
        out[a < 0 ? a + out.size() : a] = Dim::unknown();
      }
    }
  } else {
    out = unknown_shape(in->size());
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
  return Status::ok();
}

Status run_slice(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  OPFUSE_ASSIGN_OR_RETURN(auto starts, int_input(ctx, 1, "starts"));
  OPFUSE_ASSIGN_OR_RETURN(auto ends, int_input(ctx, 2, "ends"));
  std::optional<std::vector<int64_t>> axes, steps;
  if (ctx.has_input(3)) {
    OPFUSE_ASSIGN_OR_RETURN(axes, int_input(ctx, 3, "axes"));
  }
  if (ctx.has_input(4)) {
    OPFUSE_ASSIGN_OR_RETURN(steps, int_input(ctx, 4, "steps"));
  }
  OPFUSE_ASSIGN_OR_RETURN(SliceSpec spec, slice_spec(starts, ends, axes, steps, x.rank(),
                                                     [&](std::string m) { return ctx.error(m); }));
  const std::vector<int64_t> in_strides = row_strides(x.dims());
  std::vector<int64_t> out_dims = x.dims();
  std::vector<int64_t> strides = in_strides;
  int64_t offset = 0;
  for (size_t i = 0; i < spec.axes.size(); ++i) {
    const int64_t a = spec.axes[i];
    auto [first, count] = resolve_slice(spec.starts[i], spec.ends[i], spec.steps[i], x.dim(a));
    out_dims[a] = count;
    if (count > 0) offset += first * in_strides[a];
    strides[a] = in_strides[a] * bounded_slice_step(spec.steps[i], x.dim(a));
  }
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out_dims));
  strided_copy(x.raw_data(), dtype_size(x.dtype()), out_dims, strides, offset, y->raw_data());
  return Status::ok();
}

// ---- Gather --------------------------------------------------------------------------------

// Checks indices against the axis size and makes negative ones positive.
Result<std::vector<int64_t>> normalize_indices(std::vector<int64_t> indices, int64_t dim,
                                               int64_t axis, const ErrorFn& error) {
  for (int64_t& i : indices) {
    if (i < -dim || i >= dim) {
      return error(str_cat("index ", i, " is out of range for axis ", axis, " of size ", dim));
    }
    if (i < 0) i += dim;
  }
  return indices;
}

Status infer_gather(InferContext& ctx) {
  OPFUSE_TRY(check_integer_input(ctx, 1, "indices"));
  const auto& data = ctx.input_shape(0);
  const auto& indices = ctx.input_shape(1);
  std::optional<Shape> out;
  if (data) {
    const int64_t rank = data->size();
    OPFUSE_ASSIGN_OR_RETURN(int64_t axis,
                            normalize_axis(ctx.attrs().get_int("axis"), rank, ctx.node().describe()));
    if (rank == 0) return ctx.error("cannot gather from a scalar");
    if (auto values = constant_ints(ctx, 1); values && (*data)[axis].is_known()) {
      OPFUSE_TRY(normalize_indices(*values, (*data)[axis].value(), axis,
                                   [&](std::string m) { return ctx.error(m); })
                     .status());
    }
    if (indices) {
      out = Shape(data->begin(), data->begin() + axis);
      out->insert(out->end(), indices->begin(), indices->end());
      out->insert(out->end(), data->begin() + axis + 1, data->end());
    }
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
  return Status::ok();
}

Status run_gather(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  if (x.rank() == 0) return ctx.error("cannot gather from a scalar");
  OPFUSE_ASSIGN_OR_RETURN(int64_t axis,
                          normalize_axis(ctx.attrs().get_int("axis"), x.rank(), ctx.node().describe()));
  OPFUSE_ASSIGN_OR_RETURN(auto raw, int_input(ctx, 1, "indices"));
  OPFUSE_ASSIGN_OR_RETURN(auto indices, normalize_indices(std::move(raw), x.dim(axis), axis,
                                                          [&](std::string m) { return ctx.error(m); }));
  std::vector<int64_t> out_dims(x.dims().begin(), x.dims().begin() + axis);
  out_dims.insert(out_dims.end(), idx.dims().begin(), idx.dims().end());
  out_dims.insert(out_dims.end(), x.dims().begin() + axis + 1, x.dims().end());
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out_dims));

  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(i);
  int64_t inner = 1;
  for (int64_t i = axis + 1; i < x.rank(); ++i) inner *= x.dim(i);
  const size_t block = static_cast<size_t>(inner) * dtype_size(x.dtype());
  const auto* src = static_cast<const uint8_t*>(x.raw_data());
  auto* dst = static_cast<uint8_t*>(y->raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    const uint8_t* base = src + static_cast<size_t>(o * x.dim(axis)) * block;
    for (int64_t i : indices) {
      std::memcpy(dst, base + static_cast<size_t>(i) * block, block);
      dst += block;
    }
  }
  return Status::ok();
}

// ---- GatherElements ------------------------------------------------------------------------

Status infer_gather_elements(InferContext& ctx) {
  OPFUSE_TRY(check_integer_input(ctx, 1, "indices"));
  const auto& data = ctx.input_shape(0);
  const auto& indices = ctx.input_shape(1);
  if (data && indices) {
    if (data->size() != indices->size()) {
      return ctx.error(str_cat("indices ", shape_to_string(*indices), " must have the rank of data ",
                               shape_to_string(*data)));
    }
    OPFUSE_TRY(normalize_axis(ctx.attrs().get_int("axis"), data->size(), ctx.node().describe()).status());
  }
  ctx.set_output(0, ctx.input_dtype(0), indices);
  return Status::ok();
}

Status run_gather_elements(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  if (x.rank() != idx.rank() || x.rank() == 0) {
    return ctx.error(str_cat("indices ", idx.type_string(), " must have the rank of data ",
                             x.type_string(), " (at least 1)"));
  }
  OPFUSE_ASSIGN_OR_RETURN(int64_t axis,
                          normalize_axis(ctx.attrs().get_int("axis"), x.rank(), ctx.node().describe()));
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d != axis && idx.dim(d) > x.dim(d)) {
      return ctx.error(str_cat("indices ", idx.type_string(), " exceed data ", x.type_string(),
                               " on axis ", d));
    }
  }
  OPFUSE_ASSIGN_OR_RETURN(auto raw, int_input(ctx, 1, "indices"));
  OPFUSE_ASSIGN_OR_RETURN(auto indices, normalize_indices(std::move(raw), x.dim(axis), axis,
                                                          [&](std::string m) { return ctx.error(m); }));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), idx.dims()));
  const std::vector<int64_t> strides = row_strides(x.dims());
  const size_t elem = dtype_size(x.dtype());
  const auto* src = static_cast<const uint8_t*>(x.raw_data());
  auto* dst = static_cast<uint8_t*>(y->raw_data());
  std::vector<int64_t> pos(x.rank(), 0);
  for (int64_t flat = 0; flat < y->numel(); ++flat) {
    int64_t offset = 0;
    for (int64_t d = 0; d < x.rank(); ++d) offset += (d == axis ? indices[flat] : pos[d]) * strides[d];
    std::memcpy(dst + flat * elem, src + offset * elem, elem);
    for (int64_t d = x.rank() - 1; d >= 0; --d) {
      if (++pos[d] < idx.dim(d)) break;
      pos[d] = 0;
    }
  }
  return Status::ok();
}

}  // namespace

std::vector<OpDef> tensor_index_ops() {
  std::vector<OpDef> ops;
  ops.push_back(injective_op("Slice", 3, 5, infer_slice, run_slice,
                             "strided sub-tensor from starts/ends/axes/steps inputs"));
  OpDef gather = injective_op("Gather", 2, 2, infer_gather, run_gather,
                              "picks slices along `axis` by an index tensor");
  gather.attrs = {{"axis", AttrType::kInt, AttrValue(int64_t{0})}};
  ops.push_back(std::move(gather));
  OpDef gather_elements = injective_op("GatherElements", 2, 2, infer_gather_elements, run_gather_elements,
                                       "picks single elements along `axis` by a same-rank index tensor");
  gather_elements.attrs = {{"axis", AttrType::kInt, AttrValue(int64_t{0})}};
  ops.push_back(std::move(gather_elements));
  return ops;
}

}  // namespace opfuse
