// A drawable view of a graph: the nodes and edges a picture shows, which nodes belong to a fused
// kernel (drawn as a cluster), which were refused (marked), and repeated blocks collapsed so
// large models stay readable. graph_render.h turns it into DOT, SVG and HTML.
#pragma once

#include <string>
#include <vector>

#include "report/fusion_analysis.h"
#include "report/fusion_report.h"

namespace opfuse {

struct ViewNode {
  std::string id;      // unique DOT id
  std::string title;   // first label line: op type, or "input" / "output"
  std::string name;    // the node name (shortened for display by the renderer)
  std::string detail;  // shapes, fused member ops, "refused: ..."
  std::string tooltip;
  enum class Style { kOp, kFused, kInput, kOutput, kCollapsed } style = Style::kOp;
  bool refused = false;  // a refused candidate: drawn with a red dashed outline
  bool excluded = false;  // kept out of fusion by the config: drawn grey, dotted
  int cluster = -1;      // index into GraphView::clusters
  std::string block;     // the repeated block it belongs to ("/layer1/layer1.1"), if any
};

struct ViewEdge {
  int from, to;  // indices into nodes
  std::string label;  // the value's shape
};

struct GraphView {
  std::string title;
  std::vector<ViewNode> nodes;  // in execution order
  std::vector<ViewEdge> edges;
  std::vector<std::string> clusters;  // labels of fused-kernel clusters
};

// `before`: the O0 graph with each fused kernel's original members in a cluster. `after`: the
// level's graph with fused nodes highlighted. Refused candidates are marked in both.
GraphView view_before(const FusionAnalysis& analysis, const FusionReport& report);
GraphView view_after(const FusionAnalysis& analysis, const FusionReport& report);

// Replaces runs of structurally identical consecutive blocks (node names "/layer3/layer3.2/...",
// "/layers.4/...": same family, same ops in the same order) by one box each, keeping the first
// block of every run expanded. Returns how many nodes were hidden.
size_t collapse_repeated_blocks(GraphView& view);

// Splits a view into pages of at most `max_nodes` nodes in execution order; an edge from another
// page is drawn from a small stub naming that page.
std::vector<GraphView> paginate(const GraphView& view, size_t max_nodes);

}  // namespace opfuse
