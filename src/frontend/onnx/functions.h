// ONNX model-local functions (ModelProto.functions, IR version 8+): composite ops defined in
// the file. The importer inlines every call before building the graph, so each call becomes
// the function's primitive nodes and the fuser sees across the call boundary.
#pragma once

#include <onnx/onnx_pb.h>

#include "core/status.h"

namespace opfuse::onnx_import {

// Replaces every node that calls a model-local function (matching domain and name) by the
// function body: formal inputs/outputs renamed to the call's actual values, internal values
// and nodes prefixed with the call's name, attribute references (ref_attr_name) resolved from
// the call's attributes (else the body op's default), nested calls expanded (up to 16 deep), and
// the functions' opset imports merged into the model's. Errors name the function and the call.
Status inline_local_functions(onnx::ModelProto& model);

}  // namespace opfuse::onnx_import
