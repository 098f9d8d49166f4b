// Reading ONNX test data (model.onnx, input_N.pb / output_N.pb) in tests, through the importer's
// own TensorProto and attribute conversions, so tests do not carry a second reader.
#pragma once

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>

#include "frontend/onnx/attributes.h"
#include "frontend/onnx/tensor_proto.h"

namespace opfuse::testing_onnx_files {

template <typename Proto>
bool read_proto(const std::filesystem::path& path, Proto& proto) {
  std::ifstream in(path, std::ios::binary);
  return in && proto.ParseFromIstream(&in);
}

inline Result<Tensor> tensor_from(const onnx::TensorProto& proto) {
  return onnx_import::tensor_from_proto(proto, /*base_dir=*/"", "test tensor");
}

// The node's attributes converted as the importer does; an unsupported kind is an error.
inline Result<Attributes> attributes_from(const onnx::NodeProto& node) {
  Attributes attrs;
  for (const auto& a : node.attribute()) {
    OPFUSE_ASSIGN_OR_RETURN(attrs[a.name()], onnx_import::attr_from_proto(a, "", node.op_type()));
  }
  return attrs;
}

}  // namespace opfuse::testing_onnx_files
