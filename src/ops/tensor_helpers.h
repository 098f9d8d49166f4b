// Shared pieces of the tensor/shape op family (ops/tensor_*.cc): reading integer inputs, shape
// arithmetic on symbolic dims, and dtype-agnostic element movers. Most of these ops only move
// bytes, so their kernels work on element sizes rather than dtypes.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ops/op_def.h"

namespace opfuse {

// The family's records, one function per file; tensor_ops() concatenates them.
std::vector<OpDef> tensor_shape_ops();   // ops/tensor_shape.cc
std::vector<OpDef> tensor_data_ops();    // ops/tensor_data.cc
std::vector<OpDef> tensor_index_ops();   // ops/tensor_index.cc
std::vector<OpDef> tensor_join_ops();    // ops/tensor_join.cc
std::vector<OpDef> tensor_mover_ops();  // ops/tensor_movers.cc
std::vector<OpDef> tensor_diagonal_ops();  // ops/tensor_diagonal.cc: Trilu, EyeLike
std::vector<OpDef> tensor_reorder_ops();  // ops/tensor_reorder.cc: DepthToSpace, SpaceToDepth, ReverseSequence
std::vector<OpDef> tensor_scatter_ops();  // ops/tensor_scatter.cc: GatherND, ScatterND, ScatterElements, OneHot

// The record (op_record) of an op each of whose output elements is one input element (Transpose, Slice,
// Gather, the views ...): FusionKind::kInjective, which region fusion reads through index maps.
OpDef injective_op(std::string name, int min_inputs, int max_inputs, InferFn infer, KernelFn reference,
                   std::string summary);

// The values of a constant integer input during inference; nullopt when it is not a known
// constant (or not an integer tensor, which the input's dtype check reports).
std::optional<std::vector<int64_t>> constant_ints(const InferContext& ctx, size_t i);
// A user error when input i has a known dtype that is not an integer type.
Status check_integer_input(const InferContext& ctx, size_t i, const char* what);
// The number of elements of a 1-D input whose length is known (for "rank = len(shape)").
std::optional<int64_t> known_length(const InferContext& ctx, size_t i);
// "[4,-1,0]": integer lists as given (dims_to_string would print -1 as "?").
std::string ints_to_string(const std::vector<int64_t>& values);
// A shape of `rank` unknown dims.
Shape unknown_shape(size_t rank);
// The shape a 1-d integer input `i` gives (Expand's and ConstantOfShape's `shape`): its dims
// when constant (a negative one is an error naming the node), else that many unknown dims when
// its length is known, else nullopt.
Result<std::optional<Shape>> shape_from_input(const InferContext& ctx, size_t i);

// Input i as int64 values; a user error naming the node when its dtype is not an integer.
Result<std::vector<int64_t>> int_input(const KernelContext& ctx, size_t i, const char* what);

// a * b, or nullopt when it overflows int64 (dims come from untrusted models).
std::optional<int64_t> checked_mul(int64_t a, int64_t b);
// The product of shape[begin, end) as a Dim: known when every dim is known, the symbol when it
// is the only non-1 dim, else unknown.
Dim dim_product(const Shape& shape, size_t begin, size_t end);

// Row-major element strides of `dims`.
std::vector<int64_t> row_strides(const std::vector<int64_t>& dims);

// dst[o] = src[offset + sum_d o_d * strides[d]] for every index o of `out_dims`, copying
// elements of `elem_size` bytes; dst is dense. Strides may be 0 (broadcast) or negative.
void strided_copy(const void* src, size_t elem_size, const std::vector<int64_t>& out_dims,
                  const std::vector<int64_t>& src_strides, int64_t src_offset, void* dst);

// dst[o] = src[sum_d maps[d][o_d] * strides[d]], or `fill` (elem_size bytes) where some
// maps[d][o_d] is -1. maps[d] has out_dims[d] entries. Used by Pad and Tile.
void mapped_copy(const void* src, size_t elem_size, const std::vector<int64_t>& out_dims,
                 const std::vector<std::vector<int64_t>>& maps,
                 const std::vector<int64_t>& src_strides, const void* fill, void* dst);

}  // namespace opfuse
