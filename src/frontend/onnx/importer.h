// The ONNX frontend: reads an ONNX model (protobuf) into an opfuse Graph.
//
// What the importer guarantees about the Graph it returns:
//  - every node's op is registered and its OpDef covers the model's opset; attributes match
//    the op's schema; older-opset forms are rewritten into the opset-13+ forms op records
//    implement (canonicalize.cc);
//  - initializers, graph inputs that are also initializers, and Constant nodes are constant
//    values; graph inputs carry their declared dtype and (possibly symbolic) shape;
//  - nodes are topologically sorted and shapes have been inferred.
// Every failure is a user error naming the file and the culprit (node, tensor, attribute, opset).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "ir/graph.h"

namespace opfuse {

struct OnnxLoadOptions {
  // Run infer_shapes after the import (on by default; off leaves only declared shapes).
  bool infer_shapes = true;
  // Caps on the model's tensors (initializers, Constant nodes, tensor attributes), in bytes;
  // 0 means no cap beyond the process-wide allocation cap (core/tensor.h). Each tensor's declared
  // size is checked against them before it is allocated, so a hostile model fails with an error
  // naming the tensor instead of exhausting memory.
  uint64_t max_weight_bytes = 0;  // all tensors of the model together
  uint64_t max_tensor_bytes = 0;  // any one tensor
};

// Loads a model file. External data files are looked up next to it.
Result<Graph> load_onnx_file(const std::string& path, const OnnxLoadOptions& options = {});

// Loads a serialized model from memory. `base_dir` is where external data files are looked up
// (empty: the model may not use external data). `source_name` names the model in messages.
Result<Graph> load_onnx_bytes(std::string_view bytes, const std::string& base_dir,
                              const OnnxLoadOptions& options = {},
                              const std::string& source_name = "<memory>");

}  // namespace opfuse
