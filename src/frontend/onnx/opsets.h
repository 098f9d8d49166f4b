// Which opset a model imports, and which opset each node's op record is checked against.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <string>

#include "core/status.h"

namespace opfuse::onnx_import {

// The default-domain opsets opfuse implements natively.
constexpr int64_t kMinOnnxOpset = 11;
constexpr int64_t kMaxOnnxOpset = 17;

// "" for the default domain whichever way it is spelled ("" or "ai.onnx").
std::string canonical_domain(const std::string& domain);

// Domain -> version from opset_import. The default domain must be in [1, kMaxOnnxOpset];
// a version below kMinOnnxOpset is accepted here and checked per op (legacy_op_ok).
Result<std::map<std::string, int64_t>> read_opset_imports(const onnx::ModelProto& model);

// For a default-domain op in a model older than opset 11: the version from which the op's
// ONNX schema is unchanged up to opset 11, or 0 if it changed (or does not exist at 11).
// An op unchanged since the model's opset means exactly what it means at opset 11, so the
// model can be imported as if it were opset 11.
int64_t onnx_op_unchanged_since(const std::string& op_type);

}  // namespace opfuse::onnx_import
