// Dead code elimination: a node without side effects whose outputs are neither used nor graph
// outputs computes nothing anyone reads, so it goes; then constants nothing reads go too.
#include "ops/op_def.h"
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace opfuse {
namespace {

bool is_dead(const Node& node) {
  if (!is_pure(node)) return false;
  for (const Value* out : node.outputs()) {
    if (!out->uses().empty() || out->is_graph_output()) return false;
  }
  return true;
}

}  // namespace

Result<bool> run_dce_pass(Graph& graph, PassContext&) {
  bool changed = false;
  // Reverse topological order: removing a consumer first lets its producers die in this sweep.
  std::vector<Node*> nodes = graph.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    if (!is_dead(**it)) continue;
    OPFUSE_TRY(graph.remove_node(*it));
    changed = true;
  }
  const size_t values_before = graph.values().size();
  graph.remove_dead_values();
  return changed || graph.values().size() != values_before;
}

}  // namespace opfuse
