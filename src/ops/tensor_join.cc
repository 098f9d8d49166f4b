// Ops that join tensors or cut one into pieces along an axis: Concat, Split.
#include <cstring>
#include <functional>
#include <limits>

#include "ops/tensor_helpers.h"

namespace opfuse {
namespace {

// ---- Concat --------------------------------------------------------------------------------

Status infer_concat(InferContext& ctx) {
  if (!ctx.attrs().has("axis")) return ctx.error("attribute 'axis' is required");
  DType dtype = DType::kUndefined;
  std::optional<Shape> out;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.error(str_cat("input ", i, " is missing"));
    const DType t = ctx.input_dtype(i);
    if (t != DType::kUndefined) {
      if (dtype != DType::kUndefined && t != dtype) {
        return ctx.error(str_cat("input ", i, " is ", dtype_name(t), " but input 0 is ", dtype_name(dtype)));
      }
      dtype = t;
    }
  }
  // The rank comes from any input with a known shape; non-axis dims must agree.
  std::optional<int64_t> axis;
  bool axis_sum_known = true;
  int64_t axis_sum = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const auto& s = ctx.input_shape(i);
    if (!s) {
      axis_sum_known = false;
      continue;
    }
    if (!out) {
      if (s->empty()) return ctx.error("cannot concatenate scalars");
      OPFUSE_ASSIGN_OR_RETURN(axis, normalize_axis(ctx.attrs().get_int("axis"), s->size(),
                                                   ctx.node().describe()));
      out = *s;
    } else if (out->size() != s->size()) {
      return ctx.error(str_cat("input ", i, " ", shape_to_string(*s), " has a different rank from ",
                               shape_to_string(*out)));
    }
    for (size_t d = 0; d < s->size(); ++d) {
      if (static_cast<int64_t>(d) == *axis) continue;
      Dim& o = (*out)[d];
      const Dim& n = (*s)[d];
      if (o.is_known() && n.is_known() && o != n) {
        return ctx.error(str_cat("input ", i, " ", shape_to_string(*s), " does not match ",
                                 shape_to_string(*out), " outside axis ", *axis));
      }
      if (!o.is_known() && (n.is_known() || (!o.is_symbolic() && n.is_symbolic()))) o = n;
    }
    const Dim& a = (*s)[*axis];
    if (a.is_known() && axis_sum_known) {
      if (__builtin_add_overflow(axis_sum, a.value(), &axis_sum)) {
        return ctx.error("the concatenated axis size overflows 64 bits");
      }
    } else {
      axis_sum_known = false;
    }
  }
  if (out) (*out)[*axis] = axis_sum_known && ctx.num_inputs() > 0 ? Dim(axis_sum) : Dim::unknown();
  ctx.set_output(0, dtype, out);
  return Status::ok();
}

Status run_concat(KernelContext& ctx) {
  if (!ctx.attrs().has("axis")) return ctx.error("attribute 'axis' is required");
  const Tensor& first = ctx.input(0);
  if (first.rank() == 0) return ctx.error("cannot concatenate scalars");
  OPFUSE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx.attrs().get_int("axis"), first.rank(),
                                                       ctx.node().describe()));
  std::vector<int64_t> out_dims = first.dims();
  out_dims[axis] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.error(str_cat("input ", i, " is missing"));
    const Tensor& t = ctx.input(i);
    bool ok = t.dtype() == first.dtype() && t.rank() == first.rank();
    for (int64_t d = 0; ok && d < t.rank(); ++d) ok = d == axis || t.dim(d) == first.dim(d);
    if (!ok) {
      return ctx.error(str_cat("input ", i, " ", t.type_string(), " does not match input 0 ",
                               first.type_string(), " outside axis ", axis));
    }
    out_dims[axis] += t.dim(axis);
  }
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, first.dtype(), out_dims));
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out_dims[d];
  int64_t inner = 1;
  for (size_t d = axis + 1; d < out_dims.size(); ++d) inner *= out_dims[d];
  const size_t elem = dtype_size(first.dtype());
  const size_t out_row = static_cast<size_t>(out_dims[axis] * inner) * elem;
  auto* dst = static_cast<uint8_t*>(y->raw_data());
  size_t column = 0;  // byte offset of this input's block within an output row
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    const size_t row = static_cast<size_t>(t.dim(axis) * inner) * elem;
    const auto* src = static_cast<const uint8_t*>(t.raw_data());
    for (int64_t o = 0; o < outer && row > 0; ++o) std::memcpy(dst + o * out_row + column, src + o * row, row);
    column += row;
  }
  return Status::ok();
}

// ---- Split ---------------------------------------------------------------------------------

// Chunk sizes: the `split` input, or equal parts (the axis must divide evenly).
Result<std::vector<int64_t>> split_sizes(const std::optional<std::vector<int64_t>>& split,
                                         int64_t dim, size_t outputs,
                                         const std::function<Status(std::string)>& error) {
  if (split) {
    if (split->size() != outputs) {
      return error(str_cat("split ", ints_to_string(*split), " has ", split->size(),
                           " entries but the node has ", outputs, " outputs"));
    }
    int64_t sum = 0;
    for (int64_t s : *split) {
      if (s < 0) return error(str_cat("split ", ints_to_string(*split), " has a negative size"));
      sum += s;
    }
    if (dim >= 0 && sum != dim) {
      return error(str_cat("split ", ints_to_string(*split), " sums to ", sum, " but the axis has size ", dim));
    }
    return *split;
  }
  if (dim < 0) return std::vector<int64_t>(outputs, -1);
  if (dim % static_cast<int64_t>(outputs) != 0) {
    return error(str_cat("axis of size ", dim, " does not split into ", outputs,
                         " equal parts; give the `split` input"));
  }
  return std::vector<int64_t>(outputs, dim / static_cast<int64_t>(outputs));
}

Status infer_split(InferContext& ctx) {
  OPFUSE_TRY(check_integer_input(ctx, 1, "split"));
  const auto& in = ctx.input_shape(0);
  for (size_t o = 0; o < ctx.num_outputs(); ++o) ctx.set_output(o, ctx.input_dtype(0), std::nullopt);
  if (!in) return Status::ok();
  OPFUSE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx.attrs().get_int("axis"), in->size(),
                                                       ctx.node().describe()));
  if (in->empty()) return ctx.error("cannot split a scalar");
  std::optional<std::vector<int64_t>> split = constant_ints(ctx, 1);
  const Dim& d = (*in)[axis];
  std::vector<int64_t> sizes(ctx.num_outputs(), -1);
  if (split || !ctx.has_input(1)) {
    OPFUSE_ASSIGN_OR_RETURN(sizes, split_sizes(split, d.is_known() ? d.value() : -1, ctx.num_outputs(),
                                               [&](std::string m) { return ctx.error(m); }));
  }
  for (size_t o = 0; o < ctx.num_outputs(); ++o) {
    Shape s = *in;
    s[axis] = sizes[o] >= 0 ? Dim(sizes[o]) : Dim::unknown();
    if (ctx.num_outputs() == 1) s[axis] = d;  // one output is the whole input
    ctx.set_output(o, ctx.input_dtype(0), s);
  }
  return Status::ok();
}

Status run_split(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() == 0) return ctx.error("cannot split a scalar");
  OPFUSE_ASSIGN_OR_RETURN(int64_t axis,
                          normalize_axis(ctx.attrs().get_int("axis"), x.rank(), ctx.node().describe()));
  std::optional<std::vector<int64_t>> split;
  if (ctx.has_input(1)) {
    OPFUSE_ASSIGN_OR_RETURN(split, int_input(ctx, 1, "split"));
  }
  OPFUSE_ASSIGN_OR_RETURN(auto sizes, split_sizes(split, x.dim(axis), ctx.num_outputs(),
                                                  [&](std::string m) { return ctx.error(m); }));
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const size_t elem = dtype_size(x.dtype());
  const size_t in_row = static_cast<size_t>(x.dim(axis) * inner) * elem;
  const auto* src = static_cast<const uint8_t*>(x.raw_data());
  size_t column = 0;
  for (size_t o = 0; o < sizes.size(); ++o) {
    std::vector<int64_t> dims = x.dims();
    dims[axis] = sizes[o];
    OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(o, x.dtype(), dims));
    const size_t row = static_cast<size_t>(sizes[o] * inner) * elem;
    auto* dst = static_cast<uint8_t*>(y->raw_data());
    for (int64_t r = 0; r < outer && row > 0; ++r) std::memcpy(dst + r * row, src + r * in_row + column, row);
    column += row;
  }
  return Status::ok();
}

}  // namespace

std::vector<OpDef> tensor_join_ops() {
  std::vector<OpDef> ops;
  OpDef concat;
  concat.name = "Concat";
  concat.min_inputs = 1;
  concat.max_inputs = std::numeric_limits<int>::max();
  concat.attrs = {{"axis", AttrType::kInt, std::nullopt, /*required=*/true}};
  concat.kind = FusionKind::kInjective;
  concat.infer = infer_concat;
  concat.reference = run_concat;
  concat.summary = "joins its inputs along `axis`";
  ops.push_back(std::move(concat));

  OpDef split;
  split.name = "Split";
  split.min_inputs = 1;
  split.max_inputs = 2;
  split.min_outputs = 1;
  split.max_outputs = std::numeric_limits<int>::max();
  split.attrs = {{"axis", AttrType::kInt, AttrValue(int64_t{0})}};
  split.kind = FusionKind::kInjective;
  split.infer = infer_split;
  split.reference = run_split;
  split.summary = "cuts its input along `axis` into parts (the `split` input, or equal parts)";
  ops.push_back(std::move(split));
  return ops;
}

}  // namespace opfuse
