#include "report/graph_view.h"

#include <algorithm>
#include <map>
#include <set>

#include "ops/registry.h"

namespace opfuse {
namespace {

// "/layer1/layer1.0/conv1/Conv" -> "layer1/layer1.0/conv1": the module path; the op type is
// shown on its own line anyway. A name that is only the op type ("/Flatten", "Unsqueeze_1")
// shows as nothing.
std::string display_name(const std::string& name, const std::string& op_type) {
  std::string s = name;
  if (!s.empty() && s.front() == '/') s.erase(0, 1);
  const size_t slash = s.rfind('/');
  const std::string last = slash == std::string::npos ? s : s.substr(slash + 1);
  // "Relu", "Relu_2", "Conv" (a FusedConv keeps its Conv's name): op-type names.
  size_t end = last.size();
  while (end > 0 && last[end - 1] >= '0' && last[end - 1] <= '9') --end;
  const std::string base = end > 0 && end < last.size() && last[end - 1] == '_' ? last.substr(0, end - 1) : last;
  const bool op_named = base == op_type || OpRegistry::global().find("", base) != nullptr;
  if (!op_named) return s;
  return slash == std::string::npos ? std::string() : s.substr(0, slash);
}

// The outermost numbered module of a node name: "/layer3/layer3.2/conv1/Conv" -> "/layer3/layer3.2".
std::string block_of(const std::string& name) {
  size_t start = 0;
  while (start < name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string::npos) return {};  // the last component is the node itself
    const std::string part = name.substr(start, end - start);
    const size_t dot = part.rfind('.');
    if (dot != std::string::npos && dot + 1 < part.size() && dot > 0 &&
        std::all_of(part.begin() + static_cast<long>(dot) + 1, part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return name.substr(0, end);
    }
    start = end + 1;
  }
  return {};
}

std::string family_of(const std::string& block) {
  size_t end = block.size();
  while (end > 0 && block[end - 1] >= '0' && block[end - 1] <= '9') --end;
  return block.substr(0, end);
}

std::string shape_label(const Value* v) {
  if (v == nullptr || !v->shape) return {};
  std::string s = shape_to_string(*v->shape);  // "[1,16,8,8]"
  return s;
}

std::string join_ops(const std::vector<std::string>& ops) {
  std::string out;
  for (const std::string& op : ops) {
    std::string shown = op.rfind("opfuse::", 0) == 0 ? op.substr(8) : op;
    if (shown == "BatchNormalization") shown = "BN";
    out += (out.empty() ? "" : " + ") + shown;
  }
  return out;
}

struct Builder {
  GraphView view;
  std::map<const Value*, int> producer;  // value -> view node producing it

  int add(ViewNode n) {
    view.nodes.push_back(std::move(n));
    return static_cast<int>(view.nodes.size()) - 1;
  }

  // A graph input or output box: its name, dtype and shape.
  ViewNode boundary_node(const char* id_prefix, const char* title, const Value& v, ViewNode::Style style) const {
    ViewNode n;
    n.id = str_cat(id_prefix, view.nodes.size());
    n.title = title;
    n.name = v.name();
    n.detail = str_cat(dtype_name(v.dtype), shape_label(&v));
    n.style = style;
    return n;
  }

  void build(const Graph& g, const std::map<std::string, int>& cluster_of,
             const std::map<std::string, std::string>& refused,
             const std::map<std::string, std::string>& fused_detail, const FusionReport& report) {
    std::map<std::string, std::string> excluded(report.excluded.begin(), report.excluded.end());
    for (const Value* in : g.inputs()) producer[in] = add(boundary_node("in", "input", *in, ViewNode::Style::kInput));
    for (const Node* node : g.nodes()) {
      ViewNode n;
      n.id = str_cat("n", view.nodes.size());
      n.title = node->domain().empty() ? node->op_type() : node->op_type();
      n.name = display_name(node->name(), node->op_type());
      n.tooltip = node->name();
      n.block = block_of(node->name());
      if (const Value* out = node->output(0)) n.detail = shape_label(out);
      if (auto it = cluster_of.find(node->name()); it != cluster_of.end()) n.cluster = it->second;
      if (auto it = fused_detail.find(node->name()); it != fused_detail.end()) {
        n.style = ViewNode::Style::kFused;
        n.detail = it->second + (n.detail.empty() ? "" : "\n" + n.detail);
      }
      if (auto it = excluded.find(node->name()); it != excluded.end()) {
        n.excluded = true;
        n.detail += "\n" + it->second;
      }
      if (auto it = refused.find(node->name()); it != refused.end()) {
        n.refused = true;
        n.detail += "\nrefused: " + it->second;
        n.tooltip += "\nrefused: " + it->second;
      }
      const int index = add(std::move(n));
      for (const Value* in : node->inputs()) {
        if (in == nullptr) continue;
        auto it = producer.find(in);
        if (it != producer.end()) view.edges.push_back({it->second, index, shape_label(in)});
      }
      for (const Value* out : node->outputs()) {
        if (out) producer[out] = index;
      }
    }
    for (const Value* out : g.outputs()) {
      const int index = add(boundary_node("out", "output", *out, ViewNode::Style::kOutput));
      if (auto it = producer.find(out); it != producer.end()) view.edges.push_back({it->second, index, {}});
    }
  }
};

// Refused candidates by node name: the reasons, deduplicated. Applied later (a refusal in one
// fixpoint round, fused in another) counts as fused, not refused.
std::map<std::string, std::string> refused_nodes(const FusionReport& report) {
  std::set<std::string> fused;
  for (const auto& k : report.kernels) fused.insert(k.members.begin(), k.members.end());
  std::map<std::string, std::set<std::string>> reasons;
  for (const auto& r : report.refused) {
    for (const std::string& m : r.members) {
      if (!fused.count(m)) reasons[m].insert(r.rule + ": " + r.reason);
    }
  }
  std::map<std::string, std::string> out;
  for (const auto& [name, set] : reasons) {
    std::string s;
    for (const std::string& r : set) s += (s.empty() ? "" : "; ") + r;
    out[name] = s;
  }
  return out;
}

}  // namespace

GraphView view_before(const FusionAnalysis& analysis, const FusionReport& report) {
  Builder b;
  b.view.title = "before (O0)";
  std::map<std::string, int> cluster_of;
  for (const auto& k : report.kernels) {
    if (k.members.size() < 2) continue;
    const int index = static_cast<int>(b.view.clusters.size());
    std::string label = str_cat(k.kind.rfind("opfuse::", 0) == 0 ? k.kind.substr(8) : k.kind, ": ",
                                join_ops(k.member_ops));
    std::string rules;
    for (const std::string& r : k.rules) rules += (rules.empty() ? "" : ", ") + r;
    b.view.clusters.push_back(str_cat(label, "\n[", rules, "] saves ~", format_bytes(k.bytes_saved)));
    for (const std::string& m : k.members) cluster_of[m] = index;
  }
  b.build(analysis.before, cluster_of, refused_nodes(report), {}, report);
  return b.view;
}

GraphView view_after(const FusionAnalysis& analysis, const FusionReport& report) {
  Builder b;
  b.view.title = str_cat("after (", report.level, ")");
  std::map<std::string, std::string> fused;
  for (const auto& k : report.kernels) {
    if (!k.node.empty()) fused[k.node] = "= " + join_ops(k.member_ops);
  }
  auto refused = refused_nodes(report);
  for (const auto& [name, _] : fused) refused.erase(name);
  b.build(analysis.after, {}, refused, fused, report);
  return b.view;
}

size_t collapse_repeated_blocks(GraphView& view) {
  // Blocks in order of first appearance, with their nodes and op signature.
  std::vector<std::string> order;
  std::map<std::string, std::vector<int>> members;
  for (int i = 0; i < static_cast<int>(view.nodes.size()); ++i) {
    const std::string& block = view.nodes[i].block;
    if (block.empty()) continue;
    if (!members.count(block)) order.push_back(block);
    members[block].push_back(i);
  }
  auto signature = [&](const std::string& block) {
    std::string s;
    for (int i : members[block]) s += view.nodes[i].title + "|" + view.nodes[i].detail + ";";
    return s;
  };
  std::vector<int> replacement(view.nodes.size(), -1);  // hidden node -> box index (new numbering later)
  std::vector<ViewNode> boxes;
  std::vector<int> box_at;  // the first hidden node of each box: where the box is placed
  size_t hidden = 0;
  for (size_t i = 1; i < order.size();) {
    const std::string& first = order[i - 1];
    size_t j = i;
    while (j < order.size() && family_of(order[j]) == family_of(first) && signature(order[j]) == signature(first)) ++j;
    const size_t repeats = j - i;
    if (repeats == 0 || members[first].size() < 3) {
      ++i;
      continue;
    }
    ViewNode box;
    box.id = str_cat("collapsed", boxes.size());
    box.style = ViewNode::Style::kCollapsed;
    auto short_block = [](const std::string& b) { return b.substr(b.rfind('/') + 1); };
    box.title = str_cat(repeats, " x the block above");
    box.name = repeats == 1 ? short_block(order[i]) : str_cat(short_block(order[i]), " .. ", short_block(order[j - 1]));
    box.detail = str_cat("each like ", short_block(first), ": ", members[first].size(), " nodes (collapsed)");
    box.tooltip = box.detail;
    const int box_index = static_cast<int>(boxes.size());
    boxes.push_back(std::move(box));
    box_at.push_back(members[order[i]].front());
    for (size_t b = i; b < j; ++b) {
      for (int n : members[order[b]]) {
        replacement[n] = box_index;
        ++hidden;
      }
    }
    i = j + 1;
  }
  if (boxes.empty()) return 0;
  // Renumber: visible nodes in order, each box where its first hidden node was.
  std::vector<ViewNode> nodes;
  std::vector<int> new_index(view.nodes.size(), -1);
  std::vector<int> box_index(boxes.size(), -1);
  for (int i = 0; i < static_cast<int>(view.nodes.size()); ++i) {
    if (replacement[i] < 0) {
      new_index[i] = static_cast<int>(nodes.size());
      nodes.push_back(view.nodes[i]);
      continue;
    }
    const int b = replacement[i];
    if (box_at[b] == i) {
      box_index[b] = static_cast<int>(nodes.size());
      nodes.push_back(boxes[b]);
    }
  }
  for (int i = 0; i < static_cast<int>(view.nodes.size()); ++i) {
    if (replacement[i] >= 0) new_index[i] = box_index[replacement[i]];
  }
  std::set<std::pair<int, int>> seen;
  std::vector<ViewEdge> edges;
  for (const ViewEdge& e : view.edges) {
    const int from = new_index[e.from], to = new_index[e.to];
    if (from == to || !seen.insert({from, to}).second) continue;
    edges.push_back({from, to, e.label});
  }
  view.nodes = std::move(nodes);
  view.edges = std::move(edges);
  return hidden;
}

std::vector<GraphView> paginate(const GraphView& view, size_t max_nodes) {
  max_nodes = std::max<size_t>(max_nodes, 1);
  const size_t pages = std::max<size_t>(1, (view.nodes.size() + max_nodes - 1) / max_nodes);
  if (pages == 1) return {view};
  std::vector<GraphView> out(pages);
  std::vector<int> local(view.nodes.size());
  for (size_t p = 0; p < pages; ++p) {
    out[p].title = str_cat(view.title, ", page ", p + 1, " of ", pages);
    out[p].clusters = view.clusters;
  }
  for (size_t i = 0; i < view.nodes.size(); ++i) {
    GraphView& page = out[i / max_nodes];
    local[i] = static_cast<int>(page.nodes.size());
    page.nodes.push_back(view.nodes[i]);
  }
  // Stubs: one per (page, node elsewhere), named after the page the node is on.
  std::vector<std::map<size_t, int>> stubs(pages);
  auto stub = [&](size_t page, size_t other) {
    auto [it, inserted] = stubs[page].try_emplace(other, 0);
    if (inserted) {
      const ViewNode& n = view.nodes[other];
      ViewNode s;
      s.id = str_cat("stub", other);
      s.style = ViewNode::Style::kCollapsed;
      s.title = str_cat(other / max_nodes < page ? "from" : "to", " page ", other / max_nodes + 1);
      s.name = str_cat(n.title, " ", n.name);
      it->second = static_cast<int>(out[page].nodes.size());
      out[page].nodes.push_back(std::move(s));
    }
    return it->second;
  };
  for (const ViewEdge& e : view.edges) {
    const size_t pf = static_cast<size_t>(e.from) / max_nodes, pt = static_cast<size_t>(e.to) / max_nodes;
    if (pf == pt) {
      out[pf].edges.push_back({local[e.from], local[e.to], e.label});
    } else {
      out[pt].edges.push_back({stub(pt, e.from), local[e.to], e.label});
      out[pf].edges.push_back({local[e.from], stub(pf, e.to), e.label});
    }
  }
  return out;
}

}  // namespace opfuse
