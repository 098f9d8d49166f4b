// A residual Add feeding a LayerNormalization (a transformer block's "x + sublayer(x)" then
// LayerNorm, as opset-17 exports write it) becomes one opfuse::SkipLayerNormalization, whose
// kernel adds and normalises each row while it is in cache.
//
//   before                                   after
//     x    h                                   x    h
//     └─► Add ─► s ─► LayerNormalization      └─► opfuse::SkipLayerNormalization(x, h, Scale, B)
//              (Scale, B) ─► y                      {axis, epsilon} ─► y
//
// Algebra: SkipLayerNormalization(x, h, S, B) = LayerNormalization(x + h, S, B) by definition.
// Conditions: the Add's operands both have its output's shape (no broadcasting: the kernel
// reads R row for row like X), f32; the sum is read only by the LayerNorm (standard guard);
// the LayerNorm's Mean / InvStdDev outputs are unused. Exports that spell LayerNorm out in
// primitives (ReduceMean, Sub, Pow ...) are region fusion's, which puts the Add in the same
// generated kernel.
#include "ops/fused.h"
#include "passes/pass_util.h"
#include "patterns/families.h"

namespace opfuse::patterns {
namespace {

bool fits(const Match& m) {
  const Node& ln = *m.root;
  for (size_t i = 1; i < ln.outputs().size(); ++i) {
    if (ln.output(i) != nullptr && (!ln.output(i)->uses().empty() || ln.output(i)->is_graph_output())) {
      return false;
    }
  }
  return true;
}

Reason check_skip_layer_norm(const Match& m, const PassContext&) {
  const Value* sum = m.node("add")->output(0);
  if (Reason why = is_f32(sum); !why.empty()) return why;
  if (!same_type(m.value("x"), sum).empty() || !same_type(m.value("r"), sum).empty()) {
    return "the Add broadcasts (an operand differs from its result's shape)";
  }
  return {};
}

Result<Node*> rewrite_skip_layer_norm(Graph& graph, const Match& m) {
  const Node& ln = *m.root;
  std::vector<Value*> inputs = {m.value("x"), m.value("r"), ln.input(1)};
  if (ln.has_input(2)) inputs.push_back(ln.input(2));
  return replace_match(graph, m, "SkipLayerNormalization", std::string(kFusedDomain), std::move(inputs), ln.attrs,
                       ln.name());
}

}  // namespace

std::vector<Pattern> skip_layer_norm_patterns() {
  Pattern p;
  p.name = "skip_layernorm";
  p.family = "skip_layer_norm";
  p.tree = op_head("LayerNormalization", {op("Add", {any("x"), any("r")}).as("add")});
  p.condition = fits;
  p.check = check_skip_layer_norm;
  p.rewrite = rewrite_skip_layer_norm;
  p.describe = [](const Match& m) {
    return str_cat(node_label(*m.node("add")), " into ", node_label(*m.root), " as its residual");
  };
  return {p};
}

}  // namespace opfuse::patterns
