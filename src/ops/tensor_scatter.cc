// Ops that address elements by index tuples: GatherND (reads slices at index tuples),
// ScatterND (writes slices at index tuples) and ScatterElements (writes single elements along an
// axis). Scatters copy `data` and then apply the updates in order, combining with what is there
// by `reduction`: none (overwrite; the last of duplicate indices wins), add, mul, max, min.
// Negative indices count from the end of their axis; any index outside is a user error. OneHot
// (on_value written at index positions of an off_value tensor) is here too.
#include <cstring>
#include <type_traits>

#include "ops/tensor_helpers.h"

namespace opfuse {
namespace {

enum class ScatterReduction { kNone, kAdd, kMul, kMax, kMin };

Result<ScatterReduction> scatter_reduction(const Node& node, const AttrReader& attrs) {
  const std::string r = attrs.get_string("reduction");
  if (r == "none") return ScatterReduction::kNone;
  if (r == "add") return ScatterReduction::kAdd;
  if (r == "mul") return ScatterReduction::kMul;
  if (r == "max") return ScatterReduction::kMax;
  if (r == "min") return ScatterReduction::kMin;
  return Status::user_error(str_cat(node.describe(), ": reduction '", r, "' is not one of none, add, mul, max, min"));
}

// dst = reduce(dst, src) for one element of type T; floats and f16 combine in double, integers
// in their own type (so int64 stays exact).
template <typename T>
void combine_element(void* dst_ptr, const void* src_ptr, ScatterReduction r) {
  T dst, src;
  std::memcpy(&dst, dst_ptr, sizeof(T));
  std::memcpy(&src, src_ptr, sizeof(T));
  if constexpr (std::is_arithmetic_v<T>) {
    switch (r) {
      case ScatterReduction::kNone: dst = src; break;
      case ScatterReduction::kAdd: dst = static_cast<T>(dst + src); break;
      case ScatterReduction::kMul: dst = static_cast<T>(dst * src); break;
      case ScatterReduction::kMax: dst = src > dst ? src : dst; break;
      case ScatterReduction::kMin: dst = src < dst ? src : dst; break;
    }
  } else {  // Half
    const double a = element_to_double(dst), b = element_to_double(src);
    double v = b;
    if (r == ScatterReduction::kAdd) v = a + b;
    if (r == ScatterReduction::kMul) v = a * b;
    if (r == ScatterReduction::kMax) v = b > a ? b : a;
    if (r == ScatterReduction::kMin) v = b < a ? b : a;
    dst = element_from_double<T>(v);
  }
  std::memcpy(dst_ptr, &dst, sizeof(T));
}

using CombineFn = void (*)(void*, const void*, ScatterReduction);
CombineFn combine_for(DType dtype) {
  return visit_dtype(dtype, [](auto tag) -> CombineFn { return &combine_element<decltype(tag)>; });
}

// ---- GatherND / ScatterND shared shape rules ----------------------------------------------------

// indices [..., k] address the first k dims (after batch_dims) of data; each tuple selects the
// slice data[b..., i0, .., ik-1, :].
struct TupleLayout {
  int64_t batch = 1;       // product of the batch dims
  int64_t tuples = 1;      // index tuples per batch entry
  int64_t k = 0;           // tuple length
  int64_t slice = 1;       // elements per addressed slice
  int64_t data_batch = 1;  // elements of data per batch entry
  std::vector<int64_t> tuple_strides;  // data element strides of the k addressed dims
  std::vector<int64_t> tuple_dims;
};

Result<TupleLayout> tuple_layout(const KernelContext& ctx, const Tensor& data, const Tensor& indices,
                                 int64_t batch_dims) {
  const int64_t r = data.rank(), q = indices.rank();
  if (q < 1 || r < 1) {
    return ctx.error(str_cat("data ", data.type_string(), " and indices ", indices.type_string(), " must have rank >= 1"));
  }
  const int64_t k = indices.dim(-1);
  if (batch_dims < 0 || batch_dims >= q || batch_dims >= r) {
    return ctx.error(str_cat("batch_dims ", batch_dims, " must be less than the ranks of data ", data.type_string(),
                             " and indices ", indices.type_string()));
  }
  if (k < 1 || k > r - batch_dims) {
    return ctx.error(str_cat("the last dim of indices ", indices.type_string(), " (", k, ") must be in [1, ",
                             r - batch_dims, "] for data ", data.type_string()));
  }
  TupleLayout l;
  l.k = k;
  for (int64_t i = 0; i < batch_dims; ++i) {
    if (data.dim(i) != indices.dim(i)) {
      return ctx.error(str_cat("batch dim ", i, " of data ", data.type_string(), " and indices ",
                               indices.type_string(), " differ"));
    }
    l.batch *= data.dim(i);
  }
  for (int64_t i = batch_dims; i < q - 1; ++i) l.tuples *= indices.dim(i);
  for (int64_t i = batch_dims + k; i < r; ++i) l.slice *= data.dim(i);
  const std::vector<int64_t> strides = row_strides(data.dims());
  for (int64_t i = 0; i < k; ++i) {
    l.tuple_strides.push_back(strides[batch_dims + i]);
    l.tuple_dims.push_back(data.dim(batch_dims + i));
  }
  l.data_batch = batch_dims == 0 ? data.numel() : strides[batch_dims - 1];
  return l;
}

// The data element offset (within one batch entry) of tuple `t`, or an error naming the index.
Result<int64_t> tuple_offset(const KernelContext& ctx, const TupleLayout& l, const std::vector<int64_t>& indices,
                             int64_t t) {
  int64_t offset = 0;
  for (int64_t j = 0; j < l.k; ++j) {
    int64_t i = indices[static_cast<size_t>(t * l.k + j)];
    const int64_t dim = l.tuple_dims[j];
    if (i < -dim || i >= dim) {
      return ctx.error(str_cat("index ", i, " (tuple ", t, ", position ", j, ") is out of range for a dim of size ", dim));
    }
    if (i < 0) i += dim;
    offset += i * l.tuple_strides[j];
  }
  return offset;
}

// ---- GatherND --------------------------------------------------------------------------------

Status infer_gather_nd(InferContext& ctx) {
  OPFUSE_TRY(check_integer_input(ctx, 1, "indices"));
  const auto& data = ctx.input_shape(0);
  const auto& indices = ctx.input_shape(1);
  const int64_t b = ctx.attrs().get_int("batch_dims");
  std::optional<Shape> out;
  if (data && indices) {
    const int64_t r = static_cast<int64_t>(data->size()), q = static_cast<int64_t>(indices->size());
    if (q < 1 || r < 1 || b < 0 || b >= q || b >= r) {
      return ctx.error(str_cat("data ", shape_to_string(*data), " and indices ", shape_to_string(*indices),
                               " must have rank >= 1 and more dims than batch_dims ", b));
    }
    const Dim& k = indices->back();
    if (k.is_known()) {
      if (k.value() < 1 || k.value() > r - b) {
        return ctx.error(str_cat("the last dim of indices ", shape_to_string(*indices), " must be in [1, ", r - b,
                                 "] for data ", shape_to_string(*data)));
      }
      out = Shape(indices->begin(), indices->end() - 1);
      out->insert(out->end(), data->begin() + b + k.value(), data->end());
    }
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
  return Status::ok();
}

Status run_gather_nd(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  const int64_t b = ctx.attrs().get_int("batch_dims");
  OPFUSE_ASSIGN_OR_RETURN(TupleLayout l, tuple_layout(ctx, data, idx, b));
  OPFUSE_ASSIGN_OR_RETURN(auto indices, int_input(ctx, 1, "indices"));
  std::vector<int64_t> out_dims(idx.dims().begin(), idx.dims().end() - 1);
  out_dims.insert(out_dims.end(), data.dims().begin() + b + l.k, data.dims().end());
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, data.dtype(), out_dims));
  const size_t elem = dtype_size(data.dtype());
  const auto* src = static_cast<const uint8_t*>(data.raw_data());
  auto* dst = static_cast<uint8_t*>(y->raw_data());
  for (int64_t batch = 0; batch < l.batch; ++batch) {
    for (int64_t t = 0; t < l.tuples; ++t) {
      const int64_t tuple = batch * l.tuples + t;
      OPFUSE_ASSIGN_OR_RETURN(int64_t offset, tuple_offset(ctx, l, indices, tuple));
      std::memcpy(dst + static_cast<size_t>(tuple * l.slice) * elem,
                  src + static_cast<size_t>(batch * l.data_batch + offset) * elem, static_cast<size_t>(l.slice) * elem);
    }
  }
  return Status::ok();
}

// ---- ScatterND -------------------------------------------------------------------------------

Status check_same_dtype(const InferContext& ctx, size_t updates_input) {
  const DType data = ctx.input_dtype(0), updates = ctx.input_dtype(updates_input);
  if (data != DType::kUndefined && updates != DType::kUndefined && data != updates) {
    return ctx.error(str_cat("updates have dtype ", dtype_name(updates), " but data has ", dtype_name(data)));
  }
  return Status::ok();
}

// What both scatters check first: integer indices (input 1), updates (input 2) of data's dtype,
// a known reduction.
Status check_scatter_inputs(const InferContext& ctx) {
  OPFUSE_TRY(check_integer_input(ctx, 1, "indices"));
  OPFUSE_TRY(check_same_dtype(ctx, 2));
  return scatter_reduction(ctx.node(), ctx.attrs()).status();
}

Status infer_scatter_nd(InferContext& ctx) {
  OPFUSE_TRY(check_scatter_inputs(ctx));
  const auto& data = ctx.input_shape(0);
  const auto& indices = ctx.input_shape(1);
  const auto& updates = ctx.input_shape(2);
  if (data && indices && updates && !indices->empty() && indices->back().is_known()) {
    const int64_t k = indices->back().value();
    if (k < 1 || k > static_cast<int64_t>(data->size())) {
      return ctx.error(str_cat("the last dim of indices ", shape_to_string(*indices), " must be in [1, ",
                               data->size(), "] for data ", shape_to_string(*data)));
    }
    Shape want(indices->begin(), indices->end() - 1);
    want.insert(want.end(), data->begin() + k, data->end());
    bool ok = want.size() == updates->size();
    for (size_t i = 0; ok && i < want.size(); ++i) {
      ok = !(want[i].is_known() && (*updates)[i].is_known() && want[i] != (*updates)[i]);
    }
    if (!ok) {
      return ctx.error(str_cat("updates ", shape_to_string(*updates), " must be ", shape_to_string(want),
                               " (indices ", shape_to_string(*indices), " into data ", shape_to_string(*data), ")"));
    }
  }
  ctx.set_output(0, ctx.input_dtype(0), data);
  return Status::ok();
}

Status run_scatter_nd(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  OPFUSE_ASSIGN_OR_RETURN(ScatterReduction reduction, scatter_reduction(ctx.node(), ctx.attrs()));
  OPFUSE_ASSIGN_OR_RETURN(TupleLayout l, tuple_layout(ctx, data, idx, 0));
  std::vector<int64_t> want(idx.dims().begin(), idx.dims().end() - 1);
  want.insert(want.end(), data.dims().begin() + l.k, data.dims().end());
  if (updates.dims() != want || updates.dtype() != data.dtype()) {
    return ctx.error(str_cat("updates ", updates.type_string(), " must be ", dtype_name(data.dtype()),
                             dims_to_string(want), " (indices ", idx.type_string(), " into data ", data.type_string(), ")"));
  }
  OPFUSE_ASSIGN_OR_RETURN(auto indices, int_input(ctx, 1, "indices"));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, data.dtype(), data.dims()));
  std::memcpy(y->raw_data(), data.raw_data(), data.nbytes());
  const size_t elem = dtype_size(data.dtype());
  const CombineFn combine = combine_for(data.dtype());
  const auto* src = static_cast<const uint8_t*>(updates.raw_data());
  auto* dst = static_cast<uint8_t*>(y->raw_data());
  for (int64_t t = 0; t < l.tuples; ++t) {
    OPFUSE_ASSIGN_OR_RETURN(int64_t offset, tuple_offset(ctx, l, indices, t));
    for (int64_t e = 0; e < l.slice; ++e) {
      combine(dst + static_cast<size_t>(offset + e) * elem, src + static_cast<size_t>(t * l.slice + e) * elem, reduction);
    }
  }
  return Status::ok();
}

// ---- ScatterElements -------------------------------------------------------------------------

Status infer_scatter_elements(InferContext& ctx) {
  OPFUSE_TRY(check_scatter_inputs(ctx));
  const auto& data = ctx.input_shape(0);
  const auto& indices = ctx.input_shape(1);
  const auto& updates = ctx.input_shape(2);
  if (data) {
    OPFUSE_TRY(normalize_axis(ctx.attrs().get_int("axis"), data->size(), ctx.node().describe()).status());
    if (indices && indices->size() != data->size()) {
      return ctx.error(str_cat("indices ", shape_to_string(*indices), " must have the rank of data ", shape_to_string(*data)));
    }
  }
  if (indices && updates && *indices != *updates && is_static(*indices) && is_static(*updates)) {
    return ctx.error(str_cat("updates ", shape_to_string(*updates), " must have the shape of indices ",
                             shape_to_string(*indices)));
  }
  ctx.set_output(0, ctx.input_dtype(0), data);
  return Status::ok();
}

Status run_scatter_elements(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  OPFUSE_ASSIGN_OR_RETURN(ScatterReduction reduction, scatter_reduction(ctx.node(), ctx.attrs()));
  if (data.rank() == 0 || idx.rank() != data.rank() || updates.dims() != idx.dims() || updates.dtype() != data.dtype()) {
    return ctx.error(str_cat("indices ", idx.type_string(), " must have the rank of data ", data.type_string(),
                             " (at least 1) and updates ", updates.type_string(), " its shape and data's dtype"));
  }
  OPFUSE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx.attrs().get_int("axis"), data.rank(), ctx.node().describe()));
  for (int64_t d = 0; d < data.rank(); ++d) {
    if (d != axis && idx.dim(d) > data.dim(d)) {
      return ctx.error(str_cat("indices ", idx.type_string(), " exceed data ", data.type_string(), " on axis ", d));
    }
  }
  OPFUSE_ASSIGN_OR_RETURN(auto indices, int_input(ctx, 1, "indices"));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, data.dtype(), data.dims()));
  std::memcpy(y->raw_data(), data.raw_data(), data.nbytes());
  const std::vector<int64_t> strides = row_strides(data.dims());
  const size_t elem = dtype_size(data.dtype());
  const CombineFn combine = combine_for(data.dtype());
  const auto* src = static_cast<const uint8_t*>(updates.raw_data());
  auto* dst = static_cast<uint8_t*>(y->raw_data());
  const int64_t axis_size = data.dim(axis);
  std::vector<int64_t> pos(static_cast<size_t>(idx.rank()), 0);
  for (int64_t flat = 0; flat < idx.numel(); ++flat) {
    int64_t i = indices[static_cast<size_t>(flat)];
    if (i < -axis_size || i >= axis_size) {
      return ctx.error(str_cat("index ", i, " is out of range for axis ", axis, " of size ", axis_size));
    }
    if (i < 0) i += axis_size;
    int64_t offset = 0;
    for (int64_t d = 0; d < idx.rank(); ++d) offset += (d == axis ? i : pos[d]) * strides[d];
    combine(dst + static_cast<size_t>(offset) * elem, src + static_cast<size_t>(flat) * elem, reduction);
    for (int64_t d = idx.rank() - 1; d >= 0; --d) {
      if (++pos[d] < idx.dim(d)) break;
      pos[d] = 0;
    }
  }
  return Status::ok();
}

// ---- OneHot ----------------------------------------------------------------------------------

// Depth may have any numeric dtype (a float depth is truncated, as ONNX's reference does) and
// must be positive: it becomes a dim.
Result<int64_t> one_hot_depth(const Node& node, const Tensor& depth) {
  if (depth.numel() != 1) {
    return Status::user_error(str_cat(node.describe(), ": depth ", depth.type_string(), " must hold one value"));
  }
  const double value = depth.get_double(0);
  if (!(value >= 1) || value > 9.0e15) {
    return Status::user_error(str_cat(node.describe(), ": depth ", value, " must be a positive size"));
  }
  return static_cast<int64_t>(value);
}

Status infer_one_hot(InferContext& ctx) {
  const auto& indices = ctx.input_shape(0);
  const auto& values = ctx.input_shape(2);
  if (values && (values->size() != 1 || ((*values)[0].is_known() && (*values)[0].value() != 2))) {
    return ctx.error(str_cat("values ", shape_to_string(*values), " must be [2] (off_value, on_value)"));
  }
  for (size_t i = 0; i < 2; ++i) {
    const DType t = ctx.input_dtype(i);
    if (t == DType::kBool) return ctx.error(str_cat(i == 0 ? "indices" : "depth", " has dtype bool; it must be numeric"));
  }
  std::optional<Shape> out;
  if (indices) {
    const int64_t rank = static_cast<int64_t>(indices->size()) + 1;
    OPFUSE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx.attrs().get_int("axis"), rank, ctx.node().describe()));
    Dim depth = Dim::unknown();
    if (const Tensor* d = ctx.input_constant(1)) {
      OPFUSE_ASSIGN_OR_RETURN(int64_t value, one_hot_depth(ctx.node(), *d));
      depth = Dim(value);
    }
    out = *indices;
    out->insert(out->begin() + axis, depth);
  }
  ctx.set_output(0, ctx.input_dtype(2), out);
  return Status::ok();
}

Status run_one_hot(KernelContext& ctx) {
  const Tensor& indices = ctx.input(0);
  const Tensor& values = ctx.input(2);
  OPFUSE_ASSIGN_OR_RETURN(int64_t depth, one_hot_depth(ctx.node(), ctx.input(1)));
  if (values.rank() != 1 || values.numel() != 2) {
    return ctx.error(str_cat("values ", values.type_string(), " must be [2] (off_value, on_value)"));
  }
  if (indices.dtype() == DType::kBool) return ctx.error("indices have dtype bool; they must be numeric");
  const int64_t rank = indices.rank() + 1;
  OPFUSE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx.attrs().get_int("axis"), rank, ctx.node().describe()));
  std::vector<int64_t> out_dims = indices.dims();
  out_dims.insert(out_dims.begin() + axis, depth);
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, values.dtype(), out_dims));
  // Output [outer, depth, inner] around the axis; index element (o, i) marks (o, index, i).
  int64_t inner = 1;
  for (int64_t d = axis; d < indices.rank(); ++d) inner *= indices.dim(d);
  const size_t elem = dtype_size(values.dtype());
  const auto* off = static_cast<const uint8_t*>(values.raw_data());
  const uint8_t* on = off + elem;
  auto* dst = static_cast<uint8_t*>(y->raw_data());
  for (int64_t k = 0; k < y->numel(); ++k) std::memcpy(dst + static_cast<size_t>(k) * elem, off, elem);
  for (int64_t flat = 0; flat < indices.numel(); ++flat) {
    // Indices outside [-depth, depth - 1] leave their row all off (ONNX); floats truncate.
    const double raw = indices.get_double(flat);
    if (!(raw > -static_cast<double>(depth) - 1 && raw < static_cast<double>(depth))) continue;
    int64_t index = static_cast<int64_t>(raw);
    if (index < -depth || index >= depth) continue;
    if (index < 0) index += depth;
    const int64_t o = flat / inner, i = flat % inner;
    std::memcpy(dst + static_cast<size_t>((o * depth + index) * inner + i) * elem, on, elem);
  }
  return Status::ok();
}

AttrSpec reduction_attr() { return {"reduction", AttrType::kString, AttrValue(std::string("none"))}; }

}  // namespace

std::vector<OpDef> tensor_scatter_ops() {
  std::vector<OpDef> ops;
  OpDef gather_nd = op_record("GatherND", 2, 2, FusionKind::kOpaque, infer_gather_nd, run_gather_nd,
                              "slices of data at the index tuples of the last indices dim (batch_dims)");
  gather_nd.attrs = {{"batch_dims", AttrType::kInt, AttrValue(int64_t{0})}};
  ops.push_back(std::move(gather_nd));
  // Opset 16's add/mul and 18's max/min reductions are all here, so newer models read as this record
  // (frontend/onnx/opsets.cc).
  OpDef scatter_nd = op_record("ScatterND", 3, 3, FusionKind::kOpaque, infer_scatter_nd, run_scatter_nd,
                               "data with slices at index tuples replaced or combined (reduction)");
  scatter_nd.attrs = {reduction_attr()};
  ops.push_back(std::move(scatter_nd));
  OpDef scatter_elements =
      op_record("ScatterElements", 3, 3, FusionKind::kOpaque, infer_scatter_elements, run_scatter_elements,
                "data with elements along `axis` replaced or combined (reduction) by a same-rank index tensor");
  scatter_elements.attrs = {{"axis", AttrType::kInt, AttrValue(int64_t{0})}, reduction_attr()};
  ops.push_back(std::move(scatter_elements));
  OpDef one_hot = op_record("OneHot", 3, 3, FusionKind::kOpaque, infer_one_hot, run_one_hot,
                            "on_value where the axis position equals the index, off_value elsewhere");
  one_hot.attrs = {{"axis", AttrType::kInt, AttrValue(int64_t{-1})}};
  ops.push_back(std::move(one_hot));
  return ops;
}

}  // namespace opfuse
