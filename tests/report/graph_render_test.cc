// Pictures: which nodes form clusters, which are marked refused, collapsing repeated blocks,
// pagination, and that Graphviz accepts the DOT.
#include "report/graph_render.h"

#include <gtest/gtest.h>

#include "ir/text_format.h"
#include "pipelines/pipeline.h"
#include "testing/fusion_models.h"

namespace opfuse {
namespace {

struct Rendered {
  FusionAnalysis analysis;
  FusionReport report;
};

Rendered render(const FusionConfig& fusion) {
  Graph g = parse_graph(testing_models::kBlockAndHead).value();
  PipelineOptions options;
  options.fusion = fusion;
  Rendered r{analyze_fusion(g, OptLevel::kO2, options).value(), {}};
  r.report = make_fusion_report(r.analysis);
  return r;
}

const ViewNode* find(const GraphView& v, const std::string& title) {
  for (const ViewNode& n : v.nodes) {
    if (n.title == title) return &n;
  }
  return nullptr;
}

TEST(GraphView, BeforeClustersFusedMembersAndMarksRefusals) {
  FusionConfig c;
  c.excluded_node_globs = {"/head/*"};
  Rendered r = render(c);
  const GraphView before = view_before(r.analysis, r.report);
  ASSERT_EQ(before.clusters.size(), 1u);
  EXPECT_NE(before.clusters[0].find("FusedConv: Conv + BN + Relu"), std::string::npos) << before.clusters[0];
  int in_cluster = 0, refused = 0;
  for (const ViewNode& n : before.nodes) {
    in_cluster += n.cluster == 0;
    if (n.refused) {
      ++refused;
      EXPECT_NE(n.detail.find("node excluded by glob '/head/*'"), std::string::npos);
      EXPECT_EQ(n.name.rfind("head/", 0), 0u) << n.name;
    }
  }
  EXPECT_EQ(in_cluster, 3);
  EXPECT_EQ(refused, 2);  // the head's Conv and Relu
  EXPECT_EQ(before.nodes.size(), 7u);  // input, 5 nodes, output
  EXPECT_EQ(before.edges.size(), 6u);

  const GraphView after = view_after(r.analysis, r.report);
  const ViewNode* fused = find(after, "FusedConv");
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(fused->style, ViewNode::Style::kFused);
  EXPECT_NE(fused->detail.find("= Conv + BN + Relu"), std::string::npos);
  EXPECT_TRUE(find(after, "Relu")->refused);
}

TEST(GraphView, DotHasClustersAndGraphvizRendersIt) {
  Rendered r = render({});
  const RenderedViews views = prepare_views(r.analysis, r.report);
  const auto pages = side_by_side_pages(views);
  ASSERT_EQ(pages.size(), 1u);
  EXPECT_NE(pages[0].find("subgraph cluster_b_0"), std::string::npos);
  EXPECT_NE(pages[0].find("subgraph cluster_b_1"), std::string::npos);
  EXPECT_NE(pages[0].find("label=\"after (O2)\""), std::string::npos);
  auto svg = run_graphviz(pages[0], "svg");
  ASSERT_TRUE(svg.is_ok()) << svg.status().message();
  EXPECT_NE(svg->find("<svg"), std::string::npos);
  EXPECT_NE(svg->find("FusedConv"), std::string::npos);
  auto html = render_html(views, r.report, "block.onnx");
  ASSERT_TRUE(html.is_ok());
  EXPECT_NE(html->find("<h2>Fusion report</h2>"), std::string::npos);
  EXPECT_EQ(html->find("<?xml"), std::string::npos);  // inline SVG, no XML prologue
  EXPECT_EQ(std::count(html->begin(), html->end(), '\n') > 10, true);
}

// A chain of numbered blocks "/layers.K/{a,b,c}" of identical ops.
GraphView chain_of_blocks(int blocks) {
  GraphView v;
  for (int b = 0; b < blocks; ++b) {
    for (const char* op : {"MatMul", "Add", "Relu"}) {
      ViewNode n;
      n.id = str_cat("n", v.nodes.size());
      n.title = op;
      n.block = str_cat("/layers.", b);
      v.nodes.push_back(n);
      if (v.nodes.size() > 1) v.edges.push_back({static_cast<int>(v.nodes.size()) - 2, static_cast<int>(v.nodes.size()) - 1, ""});
    }
  }
  return v;
}

TEST(GraphView, CollapsesRepeatedBlocksKeepingTheFirst) {
  GraphView v = chain_of_blocks(5);
  EXPECT_EQ(collapse_repeated_blocks(v), 12u);  // layers.1 .. layers.4
  ASSERT_EQ(v.nodes.size(), 4u);                // layers.0 expanded + one box
  EXPECT_EQ(v.nodes[3].style, ViewNode::Style::kCollapsed);
  EXPECT_EQ(v.nodes[3].title, "4 x the block above");
  EXPECT_EQ(v.nodes[3].name, "layers.1 .. layers.4");
  ASSERT_EQ(v.edges.size(), 3u);  // 0->1, 1->2, 2->box
  EXPECT_EQ(v.edges[2].from, 2);
  EXPECT_EQ(v.edges[2].to, 3);
}

TEST(GraphView, DifferentBlocksStay) {
  GraphView v = chain_of_blocks(2);
  v.nodes[4].title = "Sigmoid";  // layers.1 differs
  EXPECT_EQ(collapse_repeated_blocks(v), 0u);
  EXPECT_EQ(v.nodes.size(), 6u);
}

TEST(GraphView, PaginatesWithStubs) {
  GraphView v = chain_of_blocks(2);  // 6 nodes in a chain
  const auto pages = paginate(v, 4);
  ASSERT_EQ(pages.size(), 2u);
  EXPECT_EQ(pages[0].nodes.size(), 5u);  // 4 + stub "to page 2"
  EXPECT_EQ(pages[0].nodes[4].title, "to page 2");
  EXPECT_EQ(pages[1].nodes.size(), 3u);  // 2 + stub "from page 1"
  EXPECT_EQ(pages[1].nodes[2].title, "from page 1");
  EXPECT_EQ(pages[0].edges.size() + pages[1].edges.size(), 6u);  // 5 edges, the cut one drawn twice
}

}  // namespace
}  // namespace opfuse
