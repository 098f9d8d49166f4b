// Older-opset node forms -> the opset-13+ forms the op records implement. Each conversion is a
// table entry in canonicalize.cc; the importer routes every ONNX node through here.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "ir/attribute.h"
#include "ir/graph.h"

namespace opfuse::onnx_import {

// A node as read from ONNX, not yet in the graph.
struct NodeDraft {
  std::string op_type;
  std::string domain;  // canonical: "" for ai.onnx
  std::string name;    // never empty (generated "<op_type>_<index>" when ONNX left it empty)
  int64_t opset = 0;   // the opset of `domain` the node's semantics follow
  std::vector<Value*> inputs;         // nullptr: omitted optional input
  std::vector<std::string> outputs;   // value names; never empty
  Attributes attrs;
};

struct CanonicalizeContext {
  Graph& graph;
  // A value name that collides with nothing in the model or the graph.
  std::function<std::string(const std::string& base)> fresh_name;
  // Checks a draft against its op record and adds it to the graph.
  std::function<Result<Node*>(NodeDraft)> add_node;
};

// Rewrites `node` into opset-13+ form and adds the resulting node(s) through ctx.add_node.
Status add_canonical_node(NodeDraft node, CanonicalizeContext& ctx);

}  // namespace opfuse::onnx_import
