// Builds an opfuse Graph from a parsed ONNX ModelProto (importer.cc does the file handling).
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "core/status.h"
#include "frontend/onnx/importer.h"
#include "ir/graph.h"

namespace opfuse::onnx_import {

// Errors name the culprit but not the model file; the caller adds that as context. Each
// top-level initializer's raw data is released from `model` once it is a Tensor of the graph, so
// a model's weights are not held twice while it loads (the model is not meant for use after).
Result<Graph> build_graph(onnx::ModelProto& model, const std::string& base_dir,
                          const OnnxLoadOptions& options);

}  // namespace opfuse::onnx_import
