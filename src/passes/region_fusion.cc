// Region fusion: the generic fuser. Clusters of elementwise, broadcast, injective and reduction
// ops become one opfuse::FusedRegion each, compiled into one generated kernel (codegen/).
//
//   before                                      after
//     x --> ReduceMean --> Sub --> Pow --> ...      x  gamma  beta
//     |                    ^                        |    |     |
//     +--------------------+                        FusedRegion {body = the 9 ops} --> y
//     ... --> Div --> Mul(gamma) --> Add(beta) --> y
//
// Algebra: FusedRegion{body}(inputs) = body(inputs): the body is the member subgraph itself.
//
// Algorithm (in the spirit of TVM's fuse_ops):
//  1. Kinds. Each node gets its OpDef's FusionKind on the lattice elementwise < broadcast <
//     injective < reduction < anchor < opaque, refined here: only f32 values of static shape,
//     only reductions along their input's last axis (the row the generated kernel keeps in
//     cache), only injective ops whose parameters are constants; nodes the FusionConfig excludes
//     and everything else are barriers (opaque).
//  2. Post-dominators. In reverse topological order, a node's immediate post-dominator is the
//     lowest common ancestor, in the post-dominator tree, of its consumers; a graph output (or a
//     dead value) post-dominates to the virtual exit, so nothing is ever fused across it.
//  3. Grouping (union-find). In topological order, a fusible node n is merged with its immediate
//     post-dominator p and every node on every path n -> p when all of those are fusible; since
//     p post-dominates all of them, no path leaves the merged set and comes back, and an
//     explicit reachability check still guards against cycles through earlier merges. A
//     candidate must also: stay within FusionConfig::max_region_nodes; lower to a FusedProgram
//     (one reduction row, outputs of the iteration space's shape ...); not evaluate an
//     expensive producer (exp, erf, tanh ...) more than kMaxExpensiveDuplicates extra times per
//     element; keep its index tables within the region table budget. Refusals are recorded with the
//     reason.
//  4. Cost model. For each final group of two or more nodes: bytes moved before (every member
//     reads its inputs and writes its outputs; view ops move nothing) and after (the region
//     reads its inputs once and writes the values used outside). It is fused when traffic drops
//     by at least FusionConfig::region_min_traffic_saving (30% by default); every decision is
//     recorded with members and bytes saved, or the refusal with the numbers.
#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>

#include "codegen/lower_region.h"
#include "ops/fused.h"
#include "ops/fused_region.h"
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace opfuse {
namespace {

constexpr std::string_view kRule = "region_fusion";
constexpr int kMaxExpensiveDuplicates = 1;
// Without a region table budget, index tables (Pad/Concat/Gather, 8 bytes per element) are capped here.
constexpr int64_t kDefaultTableCap = int64_t{64} << 20;
// Integer constants up to this many elements (op parameters) are copied into the body.
constexpr int64_t kEmbedConstantMax = 64;

bool is_f32_static(const Value* v) {
  return v != nullptr && v->dtype == DType::kF32 && known_dims(v).has_value();
}

bool is_view(const Node& n) { return n.def().traits.output_is_view; }

// The reduced axis of a Reduce node when it is one (non-trivial) axis, else -1.
int64_t single_reduce_axis(const Node& n) {
  const auto dims = known_dims(n.input(0));
  if (!dims) return -1;
  std::vector<int64_t> axes;
  if (n.def().max_inputs >= 2) {
    const Tensor* t = n.input(1) ? constant_data(n.input(1)) : nullptr;
    if (t == nullptr) return -1;
    axes = t->to_int_vector();
  } else {
    AttrReader attrs(n);
    if (!attrs.has("axes")) return -1;
    axes = attrs.get_ints("axes");
  }
  const int64_t rank = static_cast<int64_t>(dims->size());
  int64_t found = -1;
  for (int64_t a : axes) {
    const int64_t na = a < 0 ? a + rank : a;
    if (na < 0 || na >= rank) return -1;
    if ((*dims)[na] == 1) continue;
    if (found >= 0 && found != na) return -1;
    found = na;
  }
  return found;
}

bool params_constant(const Node& n, size_t from) {
  for (size_t i = from; i < n.inputs().size(); ++i) {
    if (n.input(i) != nullptr && constant_data(n.input(i)) == nullptr) return false;
  }
  return true;
}

// The node's kind for region fusion (kOpaque: a barrier).
FusionKind classify(const Node& n) {
  const OpDef& def = n.def();
  // Custom ops (their own domain) fuse when they declare a scalar expression; opfuse's own fused
  // ops never do.
  const bool elementwise = def.scalar != nullptr && def.reference == nullptr;
  if (!n.domain().empty() && (!elementwise || n.domain() == kFusedDomain)) return FusionKind::kOpaque;
  if (def.kind >= FusionKind::kAnchor || def.traits.has_side_effects) return FusionKind::kOpaque;
  for (const Value* o : n.outputs()) {
    if (!is_f32_static(o)) return FusionKind::kOpaque;
  }
  const std::string& op = n.op_type();
  if (elementwise) {
    for (const Value* in : n.inputs()) {
      if (in != nullptr && !is_f32_static(in)) return FusionKind::kOpaque;
    }
    return def.kind;
  }
  if (!is_f32_static(n.input(0))) return FusionKind::kOpaque;
  if (def.kind == FusionKind::kReduction) {
    if (op != "ReduceSum" && op != "ReduceMean" && op != "ReduceMax" && op != "ReduceMin") return FusionKind::kOpaque;
    const int64_t axis = single_reduce_axis(n);
    const auto dims = known_dims(n.input(0));
    return axis >= 0 && axis == static_cast<int64_t>(dims->size()) - 1 ? FusionKind::kReduction : FusionKind::kOpaque;
  }
  static const std::set<std::string> kInjective = {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity",
                                                   "Expand", "Transpose", "Slice", "Pad", "Gather"};
  if (kInjective.count(op)) return params_constant(n, 1) ? FusionKind::kInjective : FusionKind::kOpaque;
  if (op == "Concat") {
    for (const Value* in : n.inputs()) {
      if (!is_f32_static(in)) return FusionKind::kOpaque;
    }
    return FusionKind::kInjective;
  }
  return FusionKind::kOpaque;
}

// A region's member subgraph as a Graph, and the outer values that are its inputs and outputs.
struct Body {
  Graph graph;
  std::vector<Value*> inputs;
  std::vector<Value*> outputs;
};

Result<Body> build_body(const Graph& outer, const std::vector<Node*>& members) {
  Body b;
  b.graph.opset_imports = outer.opset_imports;
  std::set<const Node*> in_region(members.begin(), members.end());
  std::unordered_map<const Value*, Value*> mapped;
  auto map_input = [&](Value* v) -> Value* {
    if (v == nullptr) return nullptr;
    if (auto it = mapped.find(v); it != mapped.end()) return it->second;
    const Tensor* c = constant_data(v);
    Value* inner;
    // f32 scalars become program constants and small integer tensors are op parameters (shapes,
    // axes, pads); other constants (weights, tables) are loaded as region inputs.
    const bool embed = c != nullptr && (c->dtype() == DType::kF32 ? c->numel() == 1 : c->numel() <= kEmbedConstantMax);
    if (embed) {
      inner = b.graph.add_constant(v->name(), *c);
    } else {
      inner = b.graph.add_input(v->name(), v->dtype, *v->shape);
      b.inputs.push_back(v);
    }
    mapped[v] = inner;
    return inner;
  };
  for (Node* n : members) {
    std::vector<Value*> ins;
    for (Value* v : n->inputs()) ins.push_back(map_input(v));
    std::vector<std::string> names;
    for (Value* o : n->outputs()) names.push_back(o->name());
    OPFUSE_ASSIGN_OR_RETURN(Node * copy, b.graph.add_node(n->op_type(), ins, names, n->attrs, n->name(), n->domain()));
    for (size_t i = 0; i < n->outputs().size(); ++i) {
      copy->output(i)->dtype = n->output(i)->dtype;
      copy->output(i)->shape = n->output(i)->shape;
      mapped[n->output(i)] = copy->output(i);
    }
  }
  for (Node* n : members) {
    for (Value* o : n->outputs()) {
      bool outside = o->is_graph_output();
      for (const Use& u : o->uses()) outside |= !in_region.count(u.node);
      if (outside) {
        b.graph.add_output(mapped[o]);
        b.outputs.push_back(o);
      }
    }
  }
  return b;
}

struct Cost {
  int64_t before = 0, after = 0;
  double saving() const { return before > 0 ? static_cast<double>(before - after) / static_cast<double>(before) : 0.0; }
};

Cost traffic(const std::vector<Node*>& members, const Body& body) {
  Cost c;
  for (const Node* n : members) {
    if (is_view(*n)) continue;
    for (const Value* v : n->inputs()) {
      if (v != nullptr && !(n->def().kind == FusionKind::kInjective && v != n->input(0) && n->op_type() != "Concat")) {
        c.before += value_bytes(v);
      }
    }
    for (const Value* v : n->outputs()) c.before += value_bytes(v);
  }
  for (const Value* v : body.inputs) c.after += value_bytes(v);
  for (const Value* v : body.outputs) c.after += value_bytes(v);
  return c;
}

std::vector<std::string> names_of(const std::vector<Node*>& nodes) {
  std::vector<std::string> out;
  for (const Node* n : nodes) out.push_back(n->name());
  return out;
}

std::string describe_members(const std::vector<Node*>& nodes) {
  std::string s = str_cat("region of ", nodes.size(), " nodes (");
  for (size_t i = 0; i < nodes.size() && i < 4; ++i) s += (i ? ", " : "") + node_label(*nodes[i]);
  if (nodes.size() > 4) s += ", ...";
  return s + ")";
}

class RegionFuser {
 public:
  RegionFuser(Graph& graph, PassContext& ctx) : graph_(graph), ctx_(ctx), nodes_(graph.nodes()) {
    const size_t count = nodes_.size();
    for (size_t i = 0; i < count; ++i) index_[nodes_[i]] = static_cast<int>(i);
    consumers_.resize(count);
    to_exit_.assign(count, false);
    for (size_t i = 0; i < count; ++i) {
      std::set<int> cs;
      for (const Value* o : nodes_[i]->outputs()) {
        if (o->is_graph_output() || o->uses().empty()) to_exit_[i] = true;
        for (const Use& u : o->uses()) cs.insert(index_[u.node]);
      }
      consumers_[i].assign(cs.begin(), cs.end());
    }
    parent_.resize(count);
    std::iota(parent_.begin(), parent_.end(), 0);
    group_.resize(count);
    for (size_t i = 0; i < count; ++i) group_[i] = {static_cast<int>(i)};
    seen_.assign(count, 0);
    std::map<std::vector<int64_t>, int> shape_ids;
    plain_shape_.resize(count);
    for (size_t i = 0; i < count; ++i) plain_shape_[i] = plain_elementwise_shape(*nodes_[i], shape_ids);
    kinds_.resize(count);
    for (size_t i = 0; i < count; ++i) {
      kinds_[i] = classify(*nodes_[i]);
      if (kinds_[i] <= FusionKind::kReduction && !ctx_.fusion.node_fusible(*nodes_[i])) {
        ctx_.decide(refusal(std::string(kRule), node_label(*nodes_[i]), ctx_.fusion.node_refusal(*nodes_[i]),
                            {nodes_[i]->name()}));
        kinds_[i] = FusionKind::kOpaque;
      }
    }
  }

  Result<bool> run() {
    post_dominators();
    for (size_t i = 0; i < nodes_.size(); ++i) OPFUSE_TRY(try_merge(static_cast<int>(i)));
    std::map<int, std::vector<Node*>> groups;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (kinds_[i] <= FusionKind::kReduction) groups[find(static_cast<int>(i))].push_back(nodes_[i]);
    }
    bool changed = false;
    for (auto& [root, members] : groups) {
      if (members.size() < 2) continue;
      OPFUSE_ASSIGN_OR_RETURN(bool fused, materialise(members));
      changed |= fused;
    }
    if (changed) OPFUSE_TRY(graph_.topological_sort());
    return changed;
  }

 private:
  int find(int x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }

  void post_dominators() {
    const int count = static_cast<int>(nodes_.size());
    ipdom_.assign(count, -1);
    depth_.assign(count, 0);
    auto depth = [&](int x) { return x < 0 ? 0 : depth_[x]; };
    auto lca = [&](int a, int b) {
      while (a != b) {
        if (a < 0 || b < 0) return -1;
        if (depth(a) >= depth(b)) {
          a = ipdom_[a];
        } else {
          b = ipdom_[b];
        }
      }
      return a;
    };
    for (int i = count; i-- > 0;) {
      int p = -1;
      if (!to_exit_[i] && !consumers_[i].empty()) {
        p = consumers_[i][0];
        for (size_t k = 1; k < consumers_[i].size(); ++k) p = lca(p, consumers_[i][k]);
      }
      ipdom_[i] = p;
      depth_[i] = depth(p) + 1;
    }
  }

  const std::vector<int>& group_of(int x) { return group_[find(x)]; }

  // Joins the groups of `members` into p's.
  void join(const std::set<int>& members, int p) {
    const int root = find(p);
    for (int m : members) {
      const int r = find(m);
      if (r == root) continue;
      group_[root].insert(group_[root].end(), group_[r].begin(), group_[r].end());
      group_[r].clear();
      parent_[r] = root;
    }
  }

  // Whether some member reaches another member through a non-member.
  bool has_cycle(const std::set<int>& members) {
    const int last = *members.rbegin();
    // Marks nodes seen by this call; the visits stop after the last member, so clearing only
    // what was marked keeps a call proportional to the region's neighbourhood, not the graph.
    std::vector<int> marked;
    struct Unmark {
      std::vector<char>& seen;
      std::vector<int>& marked;
      ~Unmark() {
        for (int x : marked) seen[x] = 0;
      }
    } unmark{seen_, marked};
    std::vector<int> stack;
    for (int m : members) {
      for (int c : consumers_[m]) {
        if (!members.count(c)) stack.push_back(c);
      }
    }
    while (!stack.empty()) {
      const int x = stack.back();
      stack.pop_back();
      if (x > last || seen_[x]) continue;
      seen_[x] = 1;
      marked.push_back(x);
      if (members.count(x)) return true;
      for (int c : consumers_[x]) stack.push_back(c);
    }
    return false;
  }

  Status try_merge(int n) {
    if (kinds_[n] > FusionKind::kReduction) return Status::ok();
    const int p = ipdom_[n];
    if (p < 0 || kinds_[p] > FusionKind::kReduction || find(n) == find(p)) return Status::ok();
    // Every node on a path n -> p.
    std::set<int> path;
    std::vector<int> stack(consumers_[n].begin(), consumers_[n].end());
    while (!stack.empty()) {
      const int x = stack.back();
      stack.pop_back();
      if (x == p || path.count(x)) continue;
      if (kinds_[x] > FusionKind::kReduction) return Status::ok();  // through a barrier
      path.insert(x);
      for (int c : consumers_[x]) stack.push_back(c);
    }
    std::set<int> candidate;
    for (int x : {n, p}) {
      for (int m : group_of(x)) candidate.insert(m);
    }
    for (int x : path) {
      for (int m : group_of(x)) candidate.insert(m);
    }
    std::vector<Node*> members;
    for (int m : candidate) members.push_back(nodes_[m]);
    std::string reason;
    if (static_cast<int>(candidate.size()) > ctx_.fusion.max_region_nodes) {
      reason = str_cat("the region would have ", candidate.size(), " nodes, more than max_region_nodes = ",
                       ctx_.fusion.max_region_nodes);
    } else if (has_cycle(candidate)) {
      reason = "fusing would create a cycle";
    } else if (!all_plain(candidate)) {
      reason = check_lowering(members);
    }
    if (!reason.empty()) {
      PassDecision d{std::string(kRule), str_cat(node_label(*nodes_[n]), " into ", node_label(*nodes_[p])),
                     false, reason, std::string(kRule), names_of(members), {}, 0};
      ctx_.decide(std::move(d));
      return Status::ok();
    }
    join(candidate, p);
    return Status::ok();
  }

  // An id of the node's output shape when it is a plain elementwise op: a scalar expression over
  // f32 values all of that one static shape, or f32 scalar constants (which become program
  // constants); else -1. A region of such nodes of one shape lowers with identity index maps
  // only: it cannot fail, needs no tables and recomputes nothing.
  static int plain_elementwise_shape(const Node& n, std::map<std::vector<int64_t>, int>& shape_ids) {
    const OpDef& def = n.def();
    if (!n.domain().empty() || def.scalar == nullptr || def.reference != nullptr || n.outputs().size() != 1) return -1;
    const Value* out = n.output(0);
    const auto dims = out->dtype == DType::kF32 && out->shape ? static_dims(*out->shape) : std::nullopt;
    if (!dims) return -1;
    for (const Value* v : n.inputs()) {
      if (v == nullptr) continue;
      const Tensor* c = constant_data(v);
      if (c != nullptr && c->dtype() == DType::kF32 && c->numel() == 1) continue;
      if (v->dtype != DType::kF32 || !v->shape || static_dims(*v->shape) != dims) return -1;
    }
    return shape_ids.emplace(*dims, static_cast<int>(shape_ids.size())).first->second;
  }

  // Whether every member is plain elementwise over one shape: then check_lowering would pass,
  // and the trial lowering (the bulk of region fusion's time on long chains) is skipped.
  bool all_plain(const std::set<int>& candidate) const {
    const int shape = plain_shape_[*candidate.begin()];
    return shape >= 0 && std::all_of(candidate.begin(), candidate.end(), [&](int m) { return plain_shape_[m] == shape; });
  }

  // Empty when the candidate lowers to a FusedProgram within the duplication and memory bounds.
  std::string check_lowering(const std::vector<Node*>& members) {
    auto body = build_body(graph_, members);
    if (!body.is_ok()) return body.status().message();
    std::vector<const Tensor*> constants;
    for (const Value* v : body->inputs) constants.push_back(constant_data(v));
    codegen::LowerOptions options;
    options.build_tables = false;
    codegen::LowerStats stats;
    auto program = codegen::lower_region(body->graph, constants, options, &stats);
    if (!program.is_ok()) return program.status().message();
    if (stats.duplicated_expensive > kMaxExpensiveDuplicates) {
      return str_cat("an expensive producer (exp/erf/tanh ...) would be recomputed ", stats.duplicated_expensive,
                     " extra times per element (bound ", kMaxExpensiveDuplicates, ")");
    }
    const int64_t budget = ctx_.fusion.region_table_budget_bytes > 0 ? ctx_.fusion.region_table_budget_bytes : kDefaultTableCap;
    if (stats.table_bytes > budget) {
      return str_cat("index tables need ", stats.table_bytes, " bytes, over the region table budget ", budget);
    }
    return {};
  }

  Result<bool> materialise(const std::vector<Node*>& members) {
    OPFUSE_ASSIGN_OR_RETURN(Body body, build_body(graph_, members));
    const Cost cost = traffic(members, body);
    PassDecision d{std::string(kRule), describe_members(members), false, {}, std::string(kRule),
                   names_of(members), {}, cost.before - cost.after};
    if (cost.saving() < ctx_.fusion.region_min_traffic_saving) {
      d.reason = str_cat("saves ", static_cast<int>(cost.saving() * 100), "% of memory traffic (", cost.before,
                         " -> ", cost.after, " bytes), below the threshold ",
                         static_cast<int>(ctx_.fusion.region_min_traffic_saving * 100), "%");
      d.bytes_saved = 0;
      ctx_.decide(std::move(d));
      return false;
    }
    Attributes attrs;
    attrs["body"] = print_region_body(body.graph);
    attrs["members"] = names_of(members);
    const std::string node_name = members.back()->name();
    // The original output values are deleted before the final node is built: keep their types.
    std::vector<std::string> out_names;
    std::vector<DType> out_dtypes;
    std::vector<std::optional<Shape>> out_shapes;
    for (const Value* o : body.outputs) {
      out_names.push_back(o->name());
      out_dtypes.push_back(o->dtype);
      out_shapes.push_back(o->shape);
    }
    auto build = [&](const std::string& suffix) -> Result<Node*> {
      std::vector<std::string> names;
      for (const std::string& s : out_names) names.push_back(s + suffix);
      OPFUSE_ASSIGN_OR_RETURN(Node * n, graph_.add_node(std::string(kFusedRegionOp), body.inputs, names, attrs,
                                                        node_name + suffix, std::string(kFusedDomain)));
      for (size_t i = 0; i < out_names.size(); ++i) {
        n->output(i)->dtype = out_dtypes[i];
        n->output(i)->shape = out_shapes[i];
      }
      return n;
    };
    OPFUSE_ASSIGN_OR_RETURN(Node * temp, build("_fusing"));
    for (size_t i = 0; i < body.outputs.size(); ++i) graph_.replace_all_uses(body.outputs[i], temp->output(i));
    for (auto it = members.rbegin(); it != members.rend(); ++it) OPFUSE_TRY(graph_.remove_node(*it));
    graph_.remove_dead_values();
    OPFUSE_ASSIGN_OR_RETURN(Node * fused, build(""));
    for (size_t i = 0; i < out_names.size(); ++i) graph_.replace_all_uses(temp->output(i), fused->output(i));
    OPFUSE_TRY(graph_.remove_node(temp));
    graph_.remove_dead_values();
    d.applied = true;
    d.result = fused->name();
    ctx_.decide(std::move(d));
    return true;
  }

  Graph& graph_;
  PassContext& ctx_;
  std::vector<Node*> nodes_;
  std::unordered_map<const Node*, int> index_;
  std::vector<std::vector<int>> consumers_;
  std::vector<bool> to_exit_;
  std::vector<FusionKind> kinds_;
  std::vector<int> plain_shape_;  // plain_elementwise_shape per node
  std::vector<int> parent_, ipdom_, depth_;
  std::vector<std::vector<int>> group_;  // by union-find root: the nodes of its group
  std::vector<char> seen_;                // has_cycle's marks, all 0 between calls
};

}  // namespace

Result<bool> run_region_fusion_pass(Graph& graph, PassContext& context) {
  if (!context.fusion.rule_enabled(kRule)) return false;
  return RegionFuser(graph, context).run();
}

}  // namespace opfuse
