// Composite operators: an op defined as a subgraph of other ops. Users call it like any op
// (builder, ONNX node in its domain); eager mode runs its body node by node (the oracle), and
// graph mode inlines the body before optimising (pass `expand_composites`, first in O1+), so
// the fuser sees the primitives and fuses them with the neighbours across the op's boundary.
//
//   CompositeOpDef my_op{.name = "MyOp", .domain = "com.example", .min_inputs = 2, .max_inputs = 2};
//   my_op.body = [](ModelBuilder& b, const std::vector<Var>& in, const AttrReader&) {
//     return std::vector<Var>{(in[0] - in[1]) * in[0]};
//   };
//   OPFUSE_TRY(register_composite_op(std::move(my_op)));
//
// ONNX model-local functions (ModelProto.functions) are the file form of the same idea; the
// importer inlines those itself (frontend/onnx/functions.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "frontend/builder/model_builder.h"
#include "ops/op_def.h"

namespace opfuse {

// Builds the body on `b` from the call's inputs (an omitted optional input is an invalid Var)
// and attributes (with the op's defaults); returns one Var per output.
using CompositeBody =
    std::function<std::vector<Var>(ModelBuilder& b, const std::vector<Var>& inputs, const AttrReader& attrs)>;

struct CompositeOpDef {
  std::string name;
  std::string domain;  // not "" (ai.onnx) or "opfuse"
  int min_inputs = 1;
  int max_inputs = 1;
  int num_outputs = 1;
  std::vector<AttrSpec> attrs;
  CompositeBody body;
  std::string summary;
};

// Registers the op (an opaque OpDef whose inference and reference kernel instantiate the body).
// Errors: no name or body, a reserved domain, a name already taken.
Status register_composite_op(CompositeOpDef def);
bool is_composite_op(const std::string& domain, const std::string& op_type);

// Replaces `node` by its body in `graph`. Body nodes are named "<node>/<op>"; the node's output
// values keep their names (a graph output stays a graph output under its name).
Status expand_composite(Graph& graph, Node* node);

}  // namespace opfuse
