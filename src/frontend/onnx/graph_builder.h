// Builds an opfuse Graph from a parsed ONNX ModelProto (importer.cc does the file handling).
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <unordered_map>

#include "core/file_io.h"
#include "core/status.h"
#include "frontend/onnx/constant_index.h"
#include "frontend/onnx/importer.h"
#include "ir/graph.h"

namespace opfuse::onnx_import {

// Top-level initializers whose raw_data the importer cut out of the file's bytes before protobuf
// parsed them (constant_index.h): their bytes in the mapped file, copied from there straight
// into tensors, and the file's pages dropped behind them.
struct CutRawData {
  const MappedFile* file = nullptr;
  std::unordered_map<std::string, MessageSpan> bytes;  // by initializer name
};

// Errors name the culprit but not the model file; the caller adds that as context. Each
// top-level initializer's raw data is released from `model` once it is a Tensor of the graph, so
// a model's weights are not held twice while it loads (the model is not meant for use after).
Result<Graph> build_graph(onnx::ModelProto& model, const std::string& base_dir,
                          const OnnxLoadOptions& options, const CutRawData* cut = nullptr);

}  // namespace opfuse::onnx_import
