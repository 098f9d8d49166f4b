#include "core/shape.h"

#include <algorithm>
#include <limits>

namespace opfuse {

std::string Dim::to_string() const {
  if (is_known()) return std::to_string(value_);
  if (is_symbolic()) return symbol_;
  return "?";
}

Shape make_shape(const std::vector<int64_t>& dims) { return Shape(dims.begin(), dims.end()); }

bool is_static(const Shape& shape) {
  return std::all_of(shape.begin(), shape.end(), [](const Dim& d) { return d.is_known(); });
}

std::optional<std::vector<int64_t>> static_dims(const Shape& shape) {
  std::vector<int64_t> dims;
  dims.reserve(shape.size());
  for (const Dim& d : shape) {
    if (!d.is_known()) return std::nullopt;
    dims.push_back(d.value());
  }
  return dims;
}

std::string shape_to_string(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ",";
    out += shape[i].to_string();
  }
  return out + "]";
}

std::string dims_to_string(const std::vector<int64_t>& dims) {
  return shape_to_string(make_shape(dims));
}

Result<int64_t> checked_numel(const std::vector<int64_t>& dims, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return Status::user_error(str_cat(what, ": negative dim in ", dims_to_string(dims)));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      return Status::user_error(str_cat(what, ": element count of ", dims_to_string(dims),
                                        " overflows 64 bits"));
    }
    n *= d;
  }
  return n;
}

Result<std::vector<int64_t>> broadcast_dims(const std::vector<std::vector<int64_t>>& inputs,
                                            const std::string& what) {
  size_t rank = 0;
  for (const auto& d : inputs) rank = std::max(rank, d.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto& dims : inputs) {
    const size_t offset = rank - dims.size();
    for (size_t i = 0; i < dims.size(); ++i) {
      int64_t& o = out[offset + i];
      const int64_t d = dims[i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string shapes;
      for (const auto& s : inputs) shapes += (shapes.empty() ? "" : " and ") + dims_to_string(s);
      return Status::user_error(str_cat(what, ": shapes ", shapes, " do not broadcast"));
    }
  }
  return out;
}

Result<Shape> broadcast_shapes(const std::vector<Shape>& inputs, const std::string& what) {
  size_t rank = 0;
  for (const auto& s : inputs) rank = std::max(rank, s.size());
  Shape out(rank, Dim(1));
  for (const auto& shape : inputs) {
    const size_t offset = rank - shape.size();
    for (size_t i = 0; i < shape.size(); ++i) {
      Dim& o = out[offset + i];
      const Dim& d = shape[i];
      if (d == o || d == Dim(1)) continue;
      if (o == Dim(1)) {
        o = d;
        continue;
      }
      if (d.is_known() && o.is_known()) {
        std::string shapes;
        for (const auto& s : inputs) shapes += (shapes.empty() ? "" : " and ") + shape_to_string(s);
        return Status::user_error(str_cat(what, ": shapes ", shapes, " do not broadcast"));
      }
      // At least one side is symbolic or unknown: a known non-1 dim wins, else unknown.
      if (d.is_known()) {
        o = d;
      } else if (!o.is_known()) {
        o = Dim::unknown();
      }
    }
  }
  return out;
}

std::optional<std::vector<int64_t>> normalize_permutation(std::vector<int64_t> perm, int64_t rank) {
  if (static_cast<int64_t>(perm.size()) != rank) return std::nullopt;
  std::vector<bool> seen(rank, false);
  for (int64_t& p : perm) {
    if (p < -rank || p >= rank) return std::nullopt;
    if (p < 0) p += rank;
    if (seen[p]) return std::nullopt;
    seen[p] = true;
  }
  return perm;
}

Result<int64_t> normalize_axis(int64_t axis, int64_t rank, const std::string& what) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1)) {
    return Status::user_error(
        str_cat(what, ": axis ", axis, " is out of range for rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

}  // namespace opfuse
