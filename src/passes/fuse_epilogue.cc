// Epilogue fusion: a Conv absorbs the elementwise ops that follow it into an opfuse::FusedConv
// whose `epilogue` lists them in order (ops/fused.h), so the anchor kernel applies them while its
// output is still in cache instead of a separate pass over memory per op.
//
//   before                                   after
//     x    W  B                                x   W  B   r
//     |    |  |                                |   |  |   |
//     Conv ----> c                             FusedConv {epilogue = ["add", "relu"]}
//                |      r                                 |
//               Add <---+                                 y
//                |
//               Relu -> y
//
// Algebra: FusedConv(x, W, B, r){[p1 .. pk]} = pk(...p1(Conv(x, W, B))...), where each p is
// elementwise (relu, clip, leaky_relu, sigmoid, hardswish, tanh, elu, gelu_erf), x*sigmoid(x)
// (Mul(c, Sigmoid(c)) with both uses of c from the conv) or "add": + r, with r of exactly the
// output's shape and dtype (no broadcasting) and at most one per anchor. Since every p reads only
// the element it writes, applying them inside the kernel computes the same values.
// Guards (each refusal recorded): the anchor's output feeds only the absorbed op (else
// "shared intermediate") and is not a graph output, f32 only, and the residual must not depend
// on the anchor. The fused node keeps the anchor's name and the absorbed op's output name.
#include <unordered_set>

#include "ops/fused.h"
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace opfuse {
namespace {

constexpr std::string_view kPass = "fuse_epilogue";

bool is_anchor(const Node& node) {
  return (node.domain().empty() && node.op_type() == "Conv") ||
         (node.domain() == kFusedDomain && node.op_type() == "FusedConv");
}

// Whether `value` is computed from `anchor`'s output (a residual that would form a cycle).
bool depends_on(const Value* value, const Node* anchor) {
  std::vector<const Node*> stack;
  std::unordered_set<const Node*> seen;
  if (value->producer()) stack.push_back(value->producer());
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (n == anchor) return true;
    if (!seen.insert(n).second) continue;
    for (const Value* in : n->inputs()) {
      if (in && in->producer()) stack.push_back(in->producer());
    }
  }
  return false;
}

// What the anchor's output feeds, when that is one post-op.
struct Match {
  std::string post_op;            // the epilogue entry
  std::vector<Node*> absorbed;    // removed; the last one's output is replaced
  Value* residual = nullptr;      // for "add"
};

using Reason = std::string;

bool same_dims(const Value* a, const Value* b) {
  const auto da = known_dims(a), db = known_dims(b);
  return da && db && *da == *db;
}

// Sigmoid(c) and Mul(c, Sigmoid(c)) as the two uses of c.
std::optional<Match> match_sigmoid_mul(const Value* c) {
  if (c->uses().size() != 2) return std::nullopt;
  Node* sig = nullptr;
  Node* mul = nullptr;
  for (const Use& u : c->uses()) {
    if (!u.node->domain().empty()) return std::nullopt;
    if (u.node->op_type() == "Sigmoid") sig = u.node;
    if (u.node->op_type() == "Mul") mul = u.node;
  }
  if (sig == nullptr || mul == nullptr) return std::nullopt;
  const Value* s = sig->output(0);
  if (s->uses().size() != 1 || s->uses()[0].node != mul || s->is_graph_output()) return std::nullopt;
  const bool operands_ok = (mul->input(0) == c && mul->input(1) == s) ||
                           (mul->input(1) == c && mul->input(0) == s);
  if (!operands_ok || !same_dims(mul->output(0), c)) return std::nullopt;
  return Match{"sigmoid_mul", {sig, mul}, nullptr};
}

// The post-op the anchor's output can absorb; nullopt with an empty reason when the consumer is
// simply not an epilogue op, or with a reason when it is but fusing is not allowed.
std::optional<Match> match(const Node& anchor, bool has_residual, Reason& why, const Node*& refused_user) {
  const Value* c = anchor.output(0);
  if (c->uses().empty()) return std::nullopt;
  if (auto m = match_sigmoid_mul(c)) {
    if (c->is_graph_output()) {
      why = "graph output";
      refused_user = m->absorbed.back();
      return std::nullopt;
    }
    return m;
  }
  // The first consumer that is an epilogue op (with several consumers, the one refused).
  Node* user = nullptr;
  for (const Use& u : c->uses()) {
    const Node* n = u.node;
    if (n->domain().empty() && (find_post_op_for_onnx(n->op_type()) || n->op_type() == "Add")) {
      user = u.node;
      break;
    }
  }
  if (user == nullptr) return std::nullopt;
  refused_user = user;
  if (c->uses().size() != 1) {
    why = "shared intermediate";
    return std::nullopt;
  }
  if (c->is_graph_output()) {
    why = "graph output";
    return std::nullopt;
  }
  if (c->dtype != DType::kF32) {
    why = "dtype is not f32";
    return std::nullopt;
  }
  if (user->op_type() == "Add") {
    Value* other = user->input(0) == c ? user->input(1) : user->input(0);
    if (user->input(0) == user->input(1)) {
      why = "Add of the anchor's output to itself";
      return std::nullopt;
    }
    if (has_residual) {
      why = "anchor already has a residual";
      return std::nullopt;
    }
    if (other->dtype != c->dtype || !same_dims(other, c) || !same_dims(user->output(0), c)) {
      why = "residual shape differs";
      return std::nullopt;
    }
    if (depends_on(other, &anchor)) {
      why = "residual is computed from the anchor";
      return std::nullopt;
    }
    return Match{"add", {user}, other};
  }
  const PostOpSpec* spec = find_post_op_for_onnx(user->op_type());
  auto params = spec->params_of(*user);
  if (!params) {
    why = str_cat(user->op_type(), " parameters are not compile-time constants the post-op supports");
    return std::nullopt;
  }
  return Match{format_post_op(spec->name, *params), {user}, nullptr};
}

Result<Node*> apply(Graph& graph, Node* anchor, Match m) {
  std::vector<Value*> inputs = anchor->inputs();
  inputs.resize(3, nullptr);
  std::vector<std::string> epilogue;
  Attributes attrs = anchor->attrs;
  if (anchor->domain() == kFusedDomain) {
    epilogue = AttrReader(*anchor).get_strings("epilogue");
    if (anchor->has_input(3)) inputs.push_back(anchor->input(3));
  }
  epilogue.push_back(m.post_op);
  if (m.residual) inputs.push_back(m.residual);
  while (!inputs.empty() && inputs.back() == nullptr) inputs.pop_back();  // no "_" for no bias
  attrs["epilogue"] = epilogue;
  Value* result = m.absorbed.back()->output(0);
  const std::string node_name = anchor->name(), value_name = result->name();
  const DType dtype = result->dtype;
  const std::optional<Shape> shape = result->shape;
  // The fused node must produce a value named like `result` (it may be a graph output, whose
  // name users see) and be named like the anchor. Names are unique, so: build it once under a
  // temporary name, drop the old nodes and values, then build it again under the freed names.
  auto build = [&](const std::string& out_name, const std::string& name) -> Result<Node*> {
    OPFUSE_ASSIGN_OR_RETURN(Node * n, graph.add_node("FusedConv", inputs, {out_name}, attrs, name,
                                                     std::string(kFusedDomain)));
    n->output(0)->dtype = dtype;
    n->output(0)->shape = shape;
    return n;
  };
  OPFUSE_ASSIGN_OR_RETURN(Node * temp, build(value_name + "_fusing", node_name + "_fusing"));
  graph.replace_all_uses(result, temp->output(0));
  for (auto it = m.absorbed.rbegin(); it != m.absorbed.rend(); ++it) OPFUSE_TRY(graph.remove_node(*it));
  OPFUSE_TRY(graph.remove_node(anchor));
  graph.remove_dead_values();
  OPFUSE_ASSIGN_OR_RETURN(Node * fused, build(value_name, node_name));
  graph.replace_all_uses(temp->output(0), fused->output(0));
  OPFUSE_TRY(graph.remove_node(temp));
  graph.remove_dead_values();
  return fused;
}

// Memory traffic the fusion saves: every intermediate that stays in registers was written once
// and read once per use.
int64_t traffic_saved(const Node& anchor, const Match& m) {
  std::vector<const Value*> internal = {anchor.output(0)};
  for (size_t i = 0; i + 1 < m.absorbed.size(); ++i) internal.push_back(m.absorbed[i]->output(0));
  int64_t bytes = 0;
  for (const Value* v : internal) bytes += value_bytes(v) * (1 + static_cast<int64_t>(v->uses().size()));
  return bytes;
}

}  // namespace

Result<bool> run_fuse_epilogue_pass(Graph& graph, PassContext& context) {
  bool changed = false;
  const std::string pass(kPass);
  if (!context.fusion.rule_enabled(pass)) return false;
  // Anchors first: absorbed nodes are deleted as we go, anchors only when they are replaced.
  std::vector<Node*> anchors;
  for (Node* node : graph.nodes()) {
    if (is_anchor(*node)) anchors.push_back(node);
  }
  for (Node* anchor : anchors) {
    while (true) {
      Reason why;
      const Node* user = nullptr;
      auto m = match(*anchor, anchor->has_input(3), why, user);
      if (!m && why.empty()) break;
      PassDecision decision{pass, {}, false, {}, pass, {}, {}, 0};
      if (!m) {
        decision.what = str_cat(node_label(*user), " into ", node_label(*anchor));
        decision.members = {user->name(), anchor->name()};
        decision.reason = why;
        record_once(context, std::move(decision));
        break;
      }
      decision.what = str_cat(node_label(*m->absorbed.back()), " into ", node_label(*anchor), " as ",
                              m->post_op);
      for (const Node* n : m->absorbed) decision.members.push_back(n->name());
      decision.members.push_back(anchor->name());
      // The user's exclusions (op types, node-name globs) hold for every node involved.
      std::string excluded = context.fusion.node_refusal(*anchor);
      for (const Node* n : m->absorbed) {
        if (excluded.empty()) excluded = context.fusion.node_refusal(*n);
      }
      if (!excluded.empty()) {
        decision.reason = excluded;
        record_once(context, std::move(decision));
        break;
      }
      decision.bytes_saved = traffic_saved(*anchor, *m);
      OPFUSE_ASSIGN_OR_RETURN(anchor, apply(graph, anchor, std::move(*m)));
      decision.applied = true;
      decision.result = anchor->name();
      record_once(context, std::move(decision));
      changed = true;
    }
  }
  // Fused nodes are appended at the end of the node list; the residual may come later too.
  if (changed) OPFUSE_TRY(graph.topological_sort());
  return changed;
}

}  // namespace opfuse
