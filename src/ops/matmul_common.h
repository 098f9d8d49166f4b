// What MatMul (ops/matmul.cc) shares with the integer matmuls (ops/integer_matmul.cc): numpy's
// shape rule and the broadcasting of batch dims.
#pragma once

#include <optional>
#include <vector>

#include "ops/op_def.h"

namespace opfuse {

// numpy matmul's output shape for inputs `a` and `b` of the node (1-d operands, broadcast batch
// dims, symbolic dims kept); nullopt when either rank is unknown. Errors name the node and shapes.
Result<std::optional<Shape>> matmul_output_shape(const InferContext& ctx, size_t a, size_t b);

// Offsets into a row-major tensor of batch dims `dims` (each matrix `matrix_size` elements) for
// every index of the broadcast batch dims `batch`, in row-major order (dims of size 1 repeat).
std::vector<int64_t> broadcast_offsets(const std::vector<int64_t>& dims,
                                       const std::vector<int64_t>& batch, int64_t matrix_size);

}  // namespace opfuse
