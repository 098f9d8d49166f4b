// ONNX external data: a tensor whose bytes live in a side file next to the model
// (TensorProto.data_location == EXTERNAL, external_data {location, offset, length}).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

#include "core/status.h"

namespace opfuse::onnx_import {

// Where a tensor's bytes are: a validated file path and a byte range that lies inside the file.
struct ExternalDataRef {
  std::string path;      // base_dir joined with the (relative, ".."-free) location
  std::string location;  // as written in the model, for messages
  uint64_t offset = 0;
  uint64_t length = 0;
};

// Validates the location (relative, no ".." component), that the file exists and that
// offset/length lie inside it. Nothing is read yet, so the caller can check the length against
// the tensor's dims before allocating.
Result<ExternalDataRef> resolve_external_data(const onnx::TensorProto& proto,
                                              const std::string& base_dir,
                                              const std::string& what);

// Reads ref.length bytes into `dst`.
Status read_external_data(const ExternalDataRef& ref, void* dst, const std::string& what);

}  // namespace opfuse::onnx_import
