// Which opset a model imports, and which opset each node's op record is checked against.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <string>

#include "core/status.h"

namespace opfuse::onnx_import {

// The default-domain opsets the op records implement.
constexpr int64_t kMinOnnxOpset = 11;
constexpr int64_t kMaxOnnxOpset = 17;
// The newest default-domain opset a model may import: nodes of opsets 18-21 are read as opset
// 17 (most changes there add types), their changed forms rewritten (canonicalize.cc).
constexpr int64_t kMaxImportedOpset = 21;

// "" for the default domain whichever way it is spelled ("" or "ai.onnx").
std::string canonical_domain(const std::string& domain);

// Domain -> version from opset_import. The default domain must be in [1, kMaxImportedOpset];
// whether its ops can be read is decided per op (record_opset).
Result<std::map<std::string, int64_t>> read_opset_imports(const onnx::ModelProto& model);

// The opset whose op record a default-domain `op_type` node of a model importing `opset` is
// read against: `opset` itself within [kMinOnnxOpset, kMaxOnnxOpset]; kMinOnnxOpset for an
// older model and kMaxOnnxOpset for a newer one when the op means the same there (its schema is
// unchanged, or changed only by accepting more) or canonicalize.cc rewrites the node's form.
// Otherwise an error naming the op and the opsets.
Result<int64_t> record_opset(const std::string& op_type, int64_t opset);

}  // namespace opfuse::onnx_import
