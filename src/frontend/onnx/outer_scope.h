// Outer-scope references of ONNX subgraphs. A body (If's branches, Loop's and Scan's bodies) may
// read any value of the graphs enclosing it by name; the importer turns each such read into an
// explicit input, so the rest of opfuse sees all data flow as node inputs.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace opfuse::onnx_import {

// The names the node's subgraphs (and theirs, recursively) read but do not define, in order of
// first reading, each once. Empty for a node without subgraphs.
std::vector<std::string> outer_scope_reads(const onnx::NodeProto& node);

}  // namespace opfuse::onnx_import
