// Pictures of what fusion did (`opfuse viz`): the graph before and after a level as Graphviz
// DOT, SVG (through the `dot` program) and one self-contained HTML page with both graphs and the
// fusion report. Fused kernels are clusters labelled with their member ops (before) and
// highlighted nodes listing them (after); refused candidates have a red dashed outline and say
// why. Large graphs collapse runs of identical blocks, then paginate.
#pragma once

#include <string>
#include <vector>

#include "report/fusion_analysis.h"
#include "report/fusion_report.h"
#include "report/graph_view.h"

namespace opfuse {

struct RenderOptions {
  size_t collapse_above = 150;  // collapse repeated blocks when a graph has more nodes
  size_t page_nodes = 200;      // then split into pages of at most this many nodes
};

// The before and after views, collapsed and paginated: {before pages, after pages}.
struct RenderedViews {
  std::vector<GraphView> before, after;
  size_t hidden_before = 0, hidden_after = 0;  // nodes collapsed away
};
RenderedViews prepare_views(const FusionAnalysis& analysis, const FusionReport& report,
                            const RenderOptions& options = {});

std::string view_to_dot(const GraphView& view);
// Both graphs in one digraph, before on the left, after on the right (either may be null).
std::string side_by_side_dot(const GraphView* before, const GraphView* after);
// Page k of both graphs side by side, one digraph per page.
std::vector<std::string> side_by_side_pages(const RenderedViews& views);

// Runs Graphviz `dot -T<format>` on DOT text ("svg", "png"). User error when dot is missing.
Result<std::string> run_graphviz(const std::string& dot, const std::string& format);

// One HTML page: the report, then the before and after graphs (inline SVG, page buttons).
Result<std::string> render_html(const RenderedViews& views, const FusionReport& report,
                                const std::string& model_name);

}  // namespace opfuse
