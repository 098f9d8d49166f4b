// Shapes whose dims may be known numbers, named symbols ("batch", "seq") or unknown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace opfuse {

class Dim {
 public:
  Dim() = default;  // unknown
  Dim(int64_t value) : value_(value) {}  // NOLINT: a number is a known dim
  static Dim symbol(std::string name) {
    Dim d;
    d.symbol_ = std::move(name);
    return d;
  }
  static Dim unknown() { return Dim(); }

  bool is_known() const { return value_ >= 0; }
  bool is_symbolic() const { return value_ < 0 && !symbol_.empty(); }
  int64_t value() const { return value_; }  // -1 unless known
  const std::string& symbol_name() const { return symbol_; }

  bool operator==(const Dim& other) const = default;
  // "3", "batch" or "?".
  std::string to_string() const;

 private:
  int64_t value_ = -1;
  std::string symbol_;
};

using Shape = std::vector<Dim>;

Shape make_shape(const std::vector<int64_t>& dims);
bool is_static(const Shape& shape);
// The dims as numbers when every one is known.
std::optional<std::vector<int64_t>> static_dims(const Shape& shape);
// "[1,3,batch,?]".
std::string shape_to_string(const Shape& shape);
std::string dims_to_string(const std::vector<int64_t>& dims);

// Product of dims with overflow checking; an error names `what`.
Result<int64_t> checked_numel(const std::vector<int64_t>& dims, const std::string& what);
inline int64_t numel_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Numpy/ONNX multidirectional broadcasting of concrete dims; errors name `what`.
Result<std::vector<int64_t>> broadcast_dims(const std::vector<std::vector<int64_t>>& inputs,
                                            const std::string& what);
// The same on symbolic shapes: equal symbols broadcast to themselves, 1 broadcasts to anything,
// an unknown dim against a non-1 known dim yields the known dim.
Result<Shape> broadcast_shapes(const std::vector<Shape>& inputs, const std::string& what);

// A Transpose permutation with negative entries made non-negative, or nullopt when it is not a
// permutation of [0, rank).
std::optional<std::vector<int64_t>> normalize_permutation(std::vector<int64_t> perm, int64_t rank);

// Normalises a possibly negative axis into [0, rank); error names `what` when out of range.
Result<int64_t> normalize_axis(int64_t axis, int64_t rank, const std::string& what);

}  // namespace opfuse
