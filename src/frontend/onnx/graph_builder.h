// Builds an opfuse Graph from a parsed ONNX ModelProto (importer.cc does the file handling).
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "core/status.h"
#include "frontend/onnx/importer.h"
#include "ir/graph.h"

namespace opfuse::onnx_import {

// Errors name the culprit but not the model file; the caller adds that as context.
Result<Graph> build_graph(const onnx::ModelProto& model, const std::string& base_dir,
                          const OnnxLoadOptions& options);

}  // namespace opfuse::onnx_import
