// Axis handling and iteration layout shared by the reduction family.
#include <algorithm>

#include "ops/reduction_internal.h"

namespace opfuse {

Result<int64_t> reduction_axis(const Node& node, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return Status::user_error(str_cat(node.describe(), ": axis ", axis,
                                      " is out of range for input of rank ", rank,
                                      " (valid: ", -rank, "..", rank - 1, ")"));
  }
  return axis < 0 ? axis + rank : axis;
}

Result<std::vector<int64_t>> reduction_axes(const Node& node, const std::vector<int64_t>& axes,
                                            int64_t rank) {
  std::vector<int64_t> out;
  out.reserve(axes.size());
  for (int64_t a : axes) {
    OPFUSE_ASSIGN_OR_RETURN(int64_t n, reduction_axis(node, a, rank));
    if (std::find(out.begin(), out.end(), n) != out.end()) {
      return Status::user_error(
          str_cat(node.describe(), ": axis ", a, " is repeated in axes ", dims_to_string(axes)));
    }
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {
bool is_reduced(const std::vector<int64_t>& axes, size_t i) {
  return axes.empty() || std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end();
}
}  // namespace

Shape reduced_shape(const Shape& in, const std::vector<int64_t>& axes, bool keepdims) {
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!is_reduced(axes, i)) {
      out.push_back(in[i]);
    } else if (keepdims) {
      out.push_back(Dim(1));
    }
  }
  return out;
}

std::vector<int64_t> reduced_dims(const std::vector<int64_t>& in, const std::vector<int64_t>& axes,
                                  bool keepdims) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!is_reduced(axes, i)) {
      out.push_back(in[i]);
    } else if (keepdims) {
      out.push_back(1);
    }
  }
  return out;
}

ReduceLayout make_reduce_layout(const std::vector<int64_t>& dims, const std::vector<bool>& reduced) {
  ReduceLayout layout;
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  // Walking outer to inner, a dim joins the previous run of its kind when no dim of the other
  // kind (of size > 1) came between: row-major strides make such a run one contiguous dim.
  int last_kind = -1;  // 0 kept, 1 reduced
  for (size_t i = 0; i < dims.size(); ++i) {
    const bool red = reduced[i];
    if (red) {
      layout.count *= dims[i];
    } else {
      layout.outer *= dims[i];
    }
    if (dims[i] == 1) continue;
    auto& sizes = red ? layout.red_sizes : layout.kept_sizes;
    auto& strd = red ? layout.red_strides : layout.kept_strides;
    if (last_kind == static_cast<int>(red)) {
      sizes.back() *= dims[i];
      strd.back() = strides[i];
    } else {
      sizes.push_back(dims[i]);
      strd.push_back(strides[i]);
    }
    last_kind = red ? 1 : 0;
  }
  return layout;
}

std::optional<std::vector<int64_t>> static_input_dims(const Node& node, size_t i) {
  const Value* v = node.input(i);
  if (v == nullptr || !v->shape) return std::nullopt;
  return static_dims(*v->shape);
}

}  // namespace opfuse
