// The greedy rewrite driver and the `fuse_patterns` pass. A sweep visits the nodes in
// topological order; at each node it tries the patterns rooted at that op type (higher benefit
// first) and applies the first match that passes the standard guards and the pattern's check.
// Sweeps repeat until one changes nothing (a fixpoint), capped by a number of rewrites.
#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ops/op_def.h"
#include "passes/pass_util.h"
#include "passes/passes.h"
#include "patterns/pattern.h"

namespace opfuse::patterns {
namespace {

std::string default_description(const Match& m) {
  std::string out;
  for (auto it = m.nodes.rbegin(); it != m.nodes.rend(); ++it) {
    out += (out.empty() ? "" : ", ") + node_label(**it);
  }
  return out;
}

// Memory traffic the fusion removes: every value the match computes except the root's outputs
// was written once and read once by the next member; after the rewrite it stays in registers.
// A view (Reshape, Squeeze ...) aliases its input's buffer and moved nothing to begin with.
int64_t interior_traffic(const Match& match) {
  int64_t bytes = 0;
  for (const Node* n : match.nodes) {
    if (n == match.root || n->def().traits.output_is_view) continue;
    for (const Value* v : n->outputs()) bytes += 2 * value_bytes(v);
  }
  return bytes;
}

std::vector<std::string> member_names(const Match& m) {
  std::vector<std::string> names;
  for (auto it = m.nodes.rbegin(); it != m.nodes.rend(); ++it) names.push_back((*it)->name());
  return names;
}

// A refusal waiting for the end of the run: it is dropped when another rule later fused its
// root (Sigmoid(conv) refused as "shared intermediate" and then absorbed by the SiLU rule is
// not something to report).
struct PendingRefusal {
  PassDecision decision;
  std::string root;
};

void add_refusal(std::vector<PendingRefusal>& pending, std::string_view pass, const Pattern& p,
                 const Match& m, const Reason& why) {
  const std::string what = p.describe ? p.describe(m) : default_description(m);
  for (const PendingRefusal& r : pending) {
    if (r.decision.rule == p.name && r.decision.what == what && r.decision.reason == why) return;
  }
  PassDecision d;
  d.pass = std::string(pass);
  d.what = what;
  d.reason = why;
  d.rule = p.name;
  d.members = member_names(m);
  pending.push_back({std::move(d), m.root->name()});
}

// Records the refusals whose root no applied rewrite of this run absorbed, once each (a
// fixpoint stage may run the pass again).
void record_refusals(PassContext& context, std::vector<PendingRefusal>& pending,
                     const std::set<std::string>& fused_members) {
  for (PendingRefusal& r : pending) {
    if (!fused_members.count(r.root)) context.decide(std::move(r.decision));
  }
}

}  // namespace

Result<bool> run_patterns(Graph& graph, const std::vector<const Pattern*>& patterns,
                          PassContext& context, std::string_view pass_name,
                          const DriverOptions& options) {
  // Patterns by root op type, by benefit (stable: registration order breaks ties).
  std::unordered_map<std::string, std::vector<const Pattern*>> by_root;
  for (const Pattern* p : patterns) {
    for (const std::string& type : root_op_types(p->tree)) {
      const size_t colons = type.find("::");
      by_root[colons == std::string::npos ? type : type.substr(colons + 2)].push_back(p);
    }
  }
  for (auto& [type, list] : by_root) {
    std::stable_sort(list.begin(), list.end(),
                     [](const Pattern* a, const Pattern* b) { return a->benefit > b->benefit; });
  }
  const int64_t cap = options.max_rewrites > 0 ? options.max_rewrites
                                               : 4 * static_cast<int64_t>(graph.num_nodes()) + 64;
  int64_t rewrites = 0;
  bool changed_any = false;
  std::vector<PendingRefusal> pending;
  std::set<std::string> fused_members;
  while (true) {
    bool changed = false;
    std::unordered_set<const Node*> dead;
    for (Node* node : graph.nodes()) {
      if (dead.count(node)) continue;
      auto bucket = by_root.find(node->op_type());
      if (bucket == by_root.end()) continue;
      for (const Pattern* p : bucket->second) {
        std::optional<Match> chosen, refused;
        Reason refused_why;
        for_each_match(*p, node, [&](const Match& m) {
          if (p->condition && !p->condition(m)) return false;
          Reason why = standard_guards(*p, m, context);
          if (why.empty() && p->check) why = p->check(m, context);
          if (why.empty()) {
            chosen = m;
            return true;
          }
          if (!refused) {
            refused = m;
            refused_why = why;
          }
          return false;
        });
        if (!chosen) {
          if (refused) add_refusal(pending, pass_name, *p, *refused, refused_why);
          continue;
        }
        if (rewrites >= cap) {
          record_refusals(context, pending, fused_members);
          context.decide(refusal(std::string(pass_name), p->name,
                                 str_cat("stopped after ", cap, " rewrites (iteration cap)")));
          OPFUSE_TRY(graph.topological_sort());
          return true;
        }
        PassDecision d;
        d.pass = std::string(pass_name);
        d.what = p->describe ? p->describe(*chosen) : default_description(*chosen);
        d.applied = true;
        d.rule = p->name;
        d.members = member_names(*chosen);
        d.bytes_saved = interior_traffic(*chosen);
        fused_members.insert(d.members.begin(), d.members.end());
        for (const Node* n : chosen->nodes) dead.insert(n);
        OPFUSE_ASSIGN_OR_RETURN(Node * result, p->rewrite(graph, *chosen));
        d.result = result->name();
        context.decide(std::move(d));
        ++rewrites;
        changed = true;
        break;  // the node is gone (the root is part of its match)
      }
    }
    if (!changed) break;
    changed_any = true;
    // Rewrites append their node at the end; later sweeps and passes want topological order.
    OPFUSE_TRY(graph.topological_sort());
  }
  record_refusals(context, pending, fused_members);
  return changed_any;
}

const Pattern* find_pattern(std::string_view name) {
  for (const Pattern& p : all_patterns()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

}  // namespace opfuse::patterns

namespace opfuse {

Result<bool> run_fuse_patterns_pass(Graph& graph, PassContext& context) {
  std::vector<const patterns::Pattern*> list;
  for (const patterns::Pattern& p : patterns::all_patterns()) list.push_back(&p);
  return patterns::run_patterns(graph, list, context, "fuse_patterns");
}

}  // namespace opfuse
