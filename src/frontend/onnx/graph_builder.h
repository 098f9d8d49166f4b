// Builds an opfuse Graph from a parsed ONNX ModelProto (importer.cc does the file handling).
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <string_view>
#include <unordered_map>

#include "core/file_io.h"
#include "core/status.h"
#include "frontend/onnx/constant_index.h"
#include "frontend/onnx/importer.h"
#include "ir/graph.h"

namespace opfuse::onnx_import {

// Top-level initializers whose raw_data the importer cut out of the model's bytes before
// protobuf parsed them (constant_index.h): where their bytes are, to be copied from there
// straight into tensors.
struct CutRawData {
  std::string_view model;              // the serialized model
  const MappedFile* file = nullptr;    // its mapping, if it is a file's: pages dropped behind
  std::unordered_map<std::string, MessageSpan> bytes;  // by initializer name, within `model`
};

// Errors name the culprit but not the model file; the caller adds that as context. Each
// top-level initializer's raw data is released from `model` once it is a Tensor of the graph, so
// a model's weights are not held twice while it loads (the model is not meant for use after).
Result<Graph> build_graph(onnx::ModelProto& model, const std::string& base_dir,
                          const OnnxLoadOptions& options, const CutRawData* cut = nullptr);

}  // namespace opfuse::onnx_import
