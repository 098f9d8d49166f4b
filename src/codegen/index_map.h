// Index maps of fused regions: how an iteration coordinate reaches an element of a region input
// through the injective ops (and broadcasts) between them. A map is a chain of transforms, each
// taking coordinates of an op's output to coordinates of its input; the lowering composes them
// from the region's sink down to each load.
//
// Most chains stay affine (broadcast, transpose, slice and reshapes that only split or merge
// dims): those compose into one stride per iteration dim. Pad, Concat and Gather (and reshapes
// that would carry between dims) are evaluated element by element into a table at compile time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace opfuse::codegen {

struct Transform {
  enum class Kind : uint8_t { kBroadcast, kTranspose, kSlice, kReshape, kPad, kConcat, kGather, kAffine };
  Kind kind;
  std::vector<int64_t> in_dims;   // dims of the op's input (kConcat: of source 0; see sizes)
  std::vector<int64_t> out_dims;  // dims of the op's output
  // kTranspose: perm; kSlice: starts; kPad: begins; kGather: indices; kAffine: A row-major
  // (in rank x iteration rank), only as the first transform of a chain (it reads iteration
  // coordinates: how a reduction's operand and a per-row output are reached).
  std::vector<int64_t> a;
  std::vector<int64_t> b;  // kSlice: steps; kConcat: per-source extents on the axis; kGather: index dims; kAffine: offsets
  int64_t axis = 0;               // kConcat, kGather
  // A canonical text for memoising (kind, dims and parameters).
  std::string key() const;
};

// Transforms in order from the iteration space outward (front() applies first).
using IndexChain = std::vector<Transform>;

// Coordinates in the iteration space -> the affine image in some value's coordinates:
// v[k] = b[k] + sum_j A[k][j] * c[j].
struct AffineMap {
  std::vector<std::vector<int64_t>> A;
  std::vector<int64_t> b;
  static AffineMap identity(size_t rank);
  size_t rank() const { return b.size(); }
};

// Composes the chain into an affine map from iteration coordinates (of `iter_dims`), or nullopt
// when some transform is not affine there.
std::optional<AffineMap> compose_affine(const IndexChain& chain, const std::vector<int64_t>& iter_dims);

// Where one iteration coordinate lands: the source (for Concat) and the element's coordinates, or
// `pad` when it falls in a Pad's border.
struct Resolved {
  int source = 0;
  bool pad = false;
  std::vector<int64_t> coords;
};
Resolved resolve(const IndexChain& chain, std::vector<int64_t> coords);

// Row-major strides of dims.
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims);

}  // namespace opfuse::codegen
