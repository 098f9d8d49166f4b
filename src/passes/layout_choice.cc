// Exact minimisation of the layout labelling (layout_choice.h) by one s-t minimum cut.
//
// Why a cut: labels are binary, per-node costs are arbitrary, and a group's cost ("pay r once
// unless every member agrees") is a submodular higher-order term (a P^n Potts term), so the
// whole objective is representable as a cut (Kolmogorov & Zabih 2004; Kohli, Kumar & Torr 2007
// for the group term) and a max-flow finds the global optimum. A greedy walk along the graph
// cannot: switching one conv that is faster in nhwc pays two reorders (in and out) that only a
// run of switched neighbours amortises, and ResNet's residual tensors are read by two convs far
// apart in the chain. The graphs are small (a few hundred nodes), so plain Dinic suffices.
//
// Construction (source side = label 0, sink side = label 1; a cut edge u->v has u on the source
// side and v on the sink side):
//   node i:  s -> i with capacity cost[i][1] (cut when i takes label 1), i -> t with cost[i][0];
//   group g of cost r, two auxiliary nodes:
//     u: s -> u (r), u -> i (inf) for each member: any member on the sink side drags u there,
//        so r is paid when some member has label 1;
//     w: w -> t (r), i -> w (inf): r is paid when some member has label 0.
//   A group thus costs r when its members agree and 2r when they disagree: the constant r per
//   group does not move the minimum, the extra r is the reorder.
#include "passes/layout_choice.h"

#include <algorithm>
#include <limits>
#include <queue>

namespace opfuse {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kEps = 1e-12;

class MaxFlow {
 public:
  explicit MaxFlow(int n) : adj_(static_cast<size_t>(n)), level_(adj_.size()), next_(adj_.size()) {}

  void add_edge(int u, int v, double cap) {
    if (cap <= 0) return;
    adj_[u].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({v, cap});
    adj_[v].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({u, 0});
  }

  void run(int s, int t) {
    while (bfs(s, t)) {
      std::fill(next_.begin(), next_.end(), 0);
      while (dfs(s, t, kInf) > kEps) {
      }
    }
  }

  // Nodes that can still reach t through edges with residual capacity: the sink side of the
  // minimum cut with the largest source side (so ties keep label 0).
  std::vector<bool> reaches_sink(int t) const {
    std::vector<bool> seen(adj_.size(), false);
    std::queue<int> q;
    q.push(t);
    seen[t] = true;
    while (!q.empty()) {
      const int v = q.front();
      q.pop();
      for (int id : adj_[v]) {
        // The reverse of edge `id` goes u -> v with residual capacity edges_[id ^ 1].cap.
        const int u = edges_[id].to;
        if (!seen[u] && edges_[id ^ 1].cap > kEps) {
          seen[u] = true;
          q.push(u);
        }
      }
    }
    return seen;
  }

 private:
  struct Edge {
    int to;
    double cap;
  };

  bool bfs(int s, int t) {
    std::fill(level_.begin(), level_.end(), -1);
    std::queue<int> q;
    q.push(s);
    level_[s] = 0;
    while (!q.empty()) {
      const int v = q.front();
      q.pop();
      for (int id : adj_[v]) {
        if (edges_[id].cap > kEps && level_[edges_[id].to] < 0) {
          level_[edges_[id].to] = level_[v] + 1;
          q.push(edges_[id].to);
        }
      }
    }
    return level_[t] >= 0;
  }

  double dfs(int v, int t, double pushed) {
    if (v == t) return pushed;
    for (size_t& i = next_[v]; i < adj_[v].size(); ++i) {
      const int id = adj_[v][i];
      Edge& e = edges_[id];
      if (e.cap <= kEps || level_[e.to] != level_[v] + 1) continue;
      const double got = dfs(e.to, t, std::min(pushed, e.cap));
      if (got > kEps) {
        e.cap -= got;
        edges_[id ^ 1].cap += got;
        return got;
      }
    }
    return 0;
  }

  std::vector<std::vector<int>> adj_;
  std::vector<Edge> edges_;
  std::vector<int> level_;
  std::vector<size_t> next_;
};

}  // namespace

std::vector<int> solve_layouts(const LayoutProblem& problem) {
  const int n = static_cast<int>(problem.cost.size());
  const int s = n, t = n + 1;
  MaxFlow flow(n + 2 + 2 * static_cast<int>(problem.groups.size()));
  for (int i = 0; i < n; ++i) {
    // Only the difference matters; keep capacities non-negative.
    const double base = std::min(problem.cost[i][0], problem.cost[i][1]);
    flow.add_edge(s, i, problem.cost[i][1] - base);
    flow.add_edge(i, t, problem.cost[i][0] - base);
  }
  int aux = n + 2;
  for (const auto& g : problem.groups) {
    const int u = aux++, w = aux++;
    if (g.cost <= 0 || g.members.size() < 2) continue;
    flow.add_edge(s, u, g.cost);
    flow.add_edge(w, t, g.cost);
    for (int m : g.members) {
      flow.add_edge(u, m, kInf);
      flow.add_edge(m, w, kInf);
    }
  }
  flow.run(s, t);
  const std::vector<bool> sink = flow.reaches_sink(t);
  std::vector<int> labels(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) labels[i] = sink[i] ? 1 : 0;
  return labels;
}

double total_cost(const LayoutProblem& problem, const std::vector<int>& labels) {
  double total = 0;
  for (size_t i = 0; i < problem.cost.size(); ++i) total += problem.cost[i][labels[i]];
  for (const auto& g : problem.groups) {
    bool mixed = false;
    for (int m : g.members) mixed |= labels[m] != labels[g.members.front()];
    if (mixed) total += g.cost;
  }
  return total;
}

}  // namespace opfuse
