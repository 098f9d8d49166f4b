// Older- and newer-opset node forms -> the forms the op records implement (opsets 11-17, with
// the attribute-to-input moves of opset 13). Each conversion is a table entry in
// canonicalize.cc; the importer routes every ONNX node through here.
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
  int64_t opset = 0;   // the opset of `domain` the node's form follows (the model's import)
  std::vector<Value*> inputs;        // nullptr: omitted optional input
  std::vector<std::string> outputs;  // value names; never empty
  Attributes attrs;
};

struct CanonicalizeContext {
  Graph& graph;
  // A value name that collides with nothing in the model or the graph.
  std::function<std::string(const std::string& base)> fresh_name;
  // Checks a draft against its op record and adds it to the graph.
  std::function<Result<Node*>(NodeDraft)> add_node;
};

// Rewrites `node` into the op records' form and adds the resulting node(s) through
// ctx.add_node; a form no rule converts is an error naming the node.
Status add_canonical_node(NodeDraft node, CanonicalizeContext& ctx);

// Whether a default-domain `op_type` node at `opset` (outside the records' 11-17) has a
// rewrite of its form (Slice-1's attributes, Upsample, Reduce*-18's axes input ...).
bool has_version_rewrite(const std::string& op_type, int64_t opset);

}  // namespace opfuse::onnx_import
