// ONNX Constant nodes become constant values, not nodes: the importer evaluates them here.
#pragma once

#include <string>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/attribute.h"

namespace opfuse::onnx_import {

// The tensor a Constant node produces from its (converted) attributes: exactly one of value,
// value_float, value_floats, value_int, value_ints. String and sparse constants are unsupported.
Result<Tensor> constant_node_value(const Attributes& attrs, const std::string& who);

}  // namespace opfuse::onnx_import
