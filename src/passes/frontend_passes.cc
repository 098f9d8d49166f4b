// The passes that wrap what lower layers provide: shape inference (ops/infer_shapes.h) and the
// inlining of composite ops (frontend/builder/composite.h).
#include "frontend/builder/composite.h"
#include "ops/infer_shapes.h"
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace opfuse {

// It reports "unchanged": it refines types but never changes the graph's structure, so it does
// not keep a fixpoint loop going.
Result<bool> run_infer_shapes_pass(Graph& graph, PassContext&) {
  OPFUSE_TRY(infer_shapes(graph));
  return false;
}

// Expands every composite node, including composites used inside bodies, up to a nesting depth
// of 16: deeper means a body that calls itself.
Result<bool> run_expand_composites_pass(Graph& graph, PassContext& context) {
  constexpr int kMaxNesting = 16;
  bool changed = false;
  for (int depth = 0;; ++depth) {
    std::vector<Node*> todo;
    for (Node* n : graph.nodes()) {
      if (is_composite_op(n->domain(), n->op_type())) todo.push_back(n);
    }
    if (todo.empty()) break;
    if (depth == kMaxNesting) {
      return Status::user_error(str_cat(todo[0]->describe(), ": composite ops nest more than ",
                                        kMaxNesting, " deep (does a body call itself?)"));
    }
    for (Node* n : todo) {
      const std::string what = node_label(*n);
      OPFUSE_TRY(expand_composite(graph, n));
      context.decide(application("expand_composites", what));
      changed = true;
    }
    OPFUSE_TRY(graph.topological_sort());
  }
  return changed;
}

}  // namespace opfuse
