// ONNX AttributeProto -> opfuse AttrValue, and the check of a node's attributes against its
// OpDef's schema (unknown names and wrong types are user errors, not silently ignored).
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "core/status.h"
#include "frontend/onnx/tensor_proto.h"
#include "ir/attribute.h"
#include "ops/op_def.h"

namespace opfuse::onnx_import {

// Converts one attribute. GRAPH/GRAPHS (If, Loop, Scan bodies), SPARSE_TENSOR, TENSORS and
// TYPE_PROTO attributes are unsupported. `who` names the node in errors.
// Tensor attributes are charged to `budget` when one is given (tensor_proto.h).
Result<AttrValue> attr_from_proto(const onnx::AttributeProto& proto, const std::string& base_dir,
                                  const std::string& who, TensorBudget* budget = nullptr);

// Every attribute must be declared by the op with the same type, and required ones present.
Status check_attributes(const OpDef& def, const Attributes& attrs, const std::string& who);

}  // namespace opfuse::onnx_import
