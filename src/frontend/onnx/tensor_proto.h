// ONNX TensorProto / TypeProto -> opfuse Tensor, DType and Shape. Shared by the importer
// (initializers, Constant nodes, TENSOR attributes) and the conformance runner (input_N.pb).
#pragma once

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/shape.h"
#include "core/status.h"
#include "core/tensor.h"

namespace opfuse::onnx_import {

// ONNX's spelling of an element type ("FLOAT", "BFLOAT16", or the number if unknown).
std::string onnx_dtype_name(int32_t elem_type);
// The DType of an ONNX element type; unsupported types (string, bfloat16, complex, ...) are a
// user error "<what> has dtype X, which is not supported".
Result<DType> dtype_from_onnx(int32_t elem_type, const std::string& what);

// Byte caps for the tensors of one model (OnnxLoadOptions::max_weight_bytes/max_tensor_bytes):
// charged with a tensor's declared size, after that size has been checked against the bytes
// present and before anything is allocated. 0 means no cap.
struct TensorBudget {
  uint64_t max_tensor_bytes = 0;
  uint64_t max_total_bytes = 0;
  uint64_t used_bytes = 0;
  Status charge(uint64_t bytes, const std::string& what);
};

// Converts a TensorProto. `what` names it in errors ("initializer 'w'"). Sizes are checked
// against the dims before anything is allocated, so a hostile header cannot trigger a huge
// allocation. External data is read relative to `base_dir`; an empty base_dir means the model
// has no directory and external data is refused. `budget`, when given, is charged first.
// `raw_data`, when given, is the raw_data field the caller cut out of the message (bytes read in
// place from a mapped file rather than copied into the proto first).
Result<Tensor> tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir,
                                 const std::string& what, TensorBudget* budget = nullptr,
                                 std::optional<std::string_view> raw_data = std::nullopt);

// Reads a serialized TensorProto file (the conformance tests' input_N.pb / output_N.pb).
Result<Tensor> read_tensor_file(const std::string& path);

// The declared dtype and shape of a graph input/output. A value without a type yields
// kUndefined and no shape; non-tensor types (sequence, map, optional) are a user error.
struct DeclaredType {
  DType dtype = DType::kUndefined;
  std::optional<Shape> shape;  // nullopt: rank unknown
};
Result<DeclaredType> declared_type(const onnx::ValueInfoProto& info, const std::string& what);

}  // namespace opfuse::onnx_import
