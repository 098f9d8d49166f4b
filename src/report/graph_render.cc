#include "report/graph_render.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace opfuse {
namespace {

std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Long module paths make wide boxes: keep the last 40 characters.
std::string clip(const std::string& s, size_t n = 40) {
  if (s.size() <= n) return s;
  std::string out = "..";
  out.append(s, s.size() - n + 2, std::string::npos);
  return out;
}

std::string node_attrs(const ViewNode& n) {
  std::string label = n.title;
  if (!n.name.empty()) label += "\n" + clip(n.name);
  if (!n.detail.empty()) label += "\n" + n.detail;
  std::string style;
  switch (n.style) {
    case ViewNode::Style::kOp: style = "shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\""; break;
    case ViewNode::Style::kFused: style = "shape=box, style=\"rounded,filled,bold\", fillcolor=\"#cfe3ff\", color=\"#1f5fbf\""; break;
    case ViewNode::Style::kInput: style = "shape=ellipse, style=filled, fillcolor=\"#e6f5e6\""; break;
    case ViewNode::Style::kOutput: style = "shape=ellipse, style=filled, fillcolor=\"#fdf0d5\""; break;
    case ViewNode::Style::kCollapsed: style = "shape=note, style=filled, fillcolor=\"#eeeeee\", fontcolor=\"#444444\""; break;
  }
  if (n.excluded && !n.refused) style += ", style=\"rounded,filled,dotted\", fillcolor=\"#e4e4e4\", penwidth=1.5";
  if (n.refused) style += ", color=\"#d62728\", penwidth=2, style=\"rounded,filled,dashed\", fillcolor=\"#fff0f0\"";
  return str_cat("label=\"", dot_escape(label), "\", tooltip=\"", dot_escape(n.tooltip.empty() ? n.name : n.tooltip),
                 "\", ", style);
}

}  // namespace

RenderedViews prepare_views(const FusionAnalysis& analysis, const FusionReport& report,
                            const RenderOptions& options) {
  RenderedViews out;
  GraphView before = view_before(analysis, report);
  GraphView after = view_after(analysis, report);
  if (before.nodes.size() > options.collapse_above) out.hidden_before = collapse_repeated_blocks(before);
  if (after.nodes.size() > options.collapse_above) out.hidden_after = collapse_repeated_blocks(after);
  out.before = paginate(before, options.page_nodes);
  out.after = paginate(after, options.page_nodes);
  return out;
}

namespace {

constexpr const char* kGraphHeader =
    "  graph [rankdir=TB, fontname=\"Helvetica\", fontsize=14, labelloc=t, nodesep=0.25, ranksep=0.3];\n"
    "  node [fontname=\"Helvetica\", fontsize=10, margin=\"0.08,0.04\"];\n"
    "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\", arrowsize=0.6];\n";

// The nodes, clusters and edges of a view; ids and cluster names get `prefix` so two views can
// share one digraph.
std::string view_body(const GraphView& view, const std::string& prefix) {
  std::string dot;
  std::vector<std::vector<size_t>> in_cluster(view.clusters.size());
  for (size_t i = 0; i < view.nodes.size(); ++i) {
    const ViewNode& n = view.nodes[i];
    if (n.cluster >= 0 && static_cast<size_t>(n.cluster) < view.clusters.size()) {
      in_cluster[n.cluster].push_back(i);
      continue;
    }
    dot += str_cat("  ", prefix, n.id, " [", node_attrs(n), "];\n");
  }
  for (size_t c = 0; c < view.clusters.size(); ++c) {
    if (in_cluster[c].empty()) continue;
    dot += str_cat("  subgraph cluster_", prefix, c, " {\n    label=\"", dot_escape(view.clusters[c]),
                   "\"; style=\"rounded,filled\"; fillcolor=\"#e8f0ff\"; color=\"#1f5fbf\"; fontsize=10; fontcolor=\"#1f3f7f\";\n");
    for (size_t i : in_cluster[c]) {
      dot += str_cat("    ", prefix, view.nodes[i].id, " [", node_attrs(view.nodes[i]), "];\n");
    }
    dot += "  }\n";
  }
  for (const ViewEdge& e : view.edges) {
    dot += str_cat("  ", prefix, view.nodes[e.from].id, " -> ", prefix, view.nodes[e.to].id);
    if (!e.label.empty()) dot += str_cat(" [label=\"", dot_escape(e.label), "\"]");
    dot += ";\n";
  }
  return dot;
}

}  // namespace

std::string view_to_dot(const GraphView& view) {
  return str_cat("digraph \"", dot_escape(view.title), "\" {\n", kGraphHeader, "  label=\"",
                 dot_escape(view.title), "\";\n", view_body(view, ""), "}\n");
}

std::string side_by_side_dot(const GraphView* before, const GraphView* after) {
  std::string dot = str_cat("digraph \"opfuse\" {\n", kGraphHeader);
  for (auto [view, prefix] : {std::pair{before, "b_"}, std::pair{after, "a_"}}) {
    if (view == nullptr) continue;
    dot += str_cat("subgraph cluster_", prefix, "side {\n  label=\"", dot_escape(view->title),
                   "\"; fontsize=16; style=dashed; color=\"#999999\";\n", view_body(*view, prefix), "}\n");
  }
  return dot + "}\n";
}

std::vector<std::string> side_by_side_pages(const RenderedViews& views) {
  std::vector<std::string> pages;
  const size_t n = std::max(views.before.size(), views.after.size());
  for (size_t p = 0; p < n; ++p) {
    pages.push_back(side_by_side_dot(p < views.before.size() ? &views.before[p] : nullptr,
                                     p < views.after.size() ? &views.after[p] : nullptr));
  }
  return pages;
}

Result<std::string> run_graphviz(const std::string& dot, const std::string& format) {
  namespace fs = std::filesystem;
  // Both files live in a fresh private directory (mkdtemp: mode 0700): a predictable output name
  // next to a mkstemp file in the shared /tmp could be pre-created as a symlink by another user,
  // and dot would write through it.
  char dir_template[] = "/tmp/opfuse_viz_XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return Status::user_error("cannot create a temporary directory for Graphviz");
  const std::string dir = dir_template;
  const std::string in_path = dir + "/graph.dot";
  const std::string out_path = dir + "/graph." + format;
  {
    std::ofstream in(in_path, std::ios::binary);
    in << dot;
  }
  const std::string command = str_cat("dot -T", format, " -o '", out_path, "' '", in_path, "' 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  std::string messages;
  if (pipe != nullptr) {
    char buf[512];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) messages.append(buf, n);
  }
  const int status = pipe ? pclose(pipe) : -1;
  std::error_code ec;
  if (status != 0) {
    fs::remove_all(dir, ec);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code == 127) return Status::user_error("Graphviz 'dot' was not found; install graphviz or write .dot");
    return Status::user_error(str_cat("Graphviz 'dot' failed: ", messages));
  }
  std::ifstream out(out_path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  fs::remove_all(dir, ec);
  return bytes;
}

Result<std::string> render_html(const RenderedViews& views, const FusionReport& report,
                                const std::string& model_name) {
  std::string html = str_cat(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>opfuse: ", html_escape(model_name), " at ",
      report.level, "</title>\n<style>\n"
      "body{font-family:Helvetica,Arial,sans-serif;margin:1.5em;color:#222}\n"
      "pre{background:#f6f6f6;padding:1em;overflow:auto;font-size:12px}\n"
      ".graph{border:1px solid #ccc;overflow:auto;max-height:90vh;margin-bottom:1em}\n"
      ".graph svg{max-width:none}\n.page{display:none}.page.shown{display:block}\n"
      "button{margin:0 .2em .5em 0}\n.legend span{display:inline-block;padding:.1em .5em;margin-right:.5em;border-radius:4px}\n"
      "</style></head><body>\n<h1>", html_escape(model_name), " at ", report.level, "</h1>\n",
      "<p class=\"legend\"><span style=\"background:#e8f0ff;border:1px solid #1f5fbf\">fused kernel (cluster of original nodes)</span>"
      "<span style=\"background:#cfe3ff;border:2px solid #1f5fbf\">fused node</span>"
      "<span style=\"background:#fff0f0;border:2px dashed #d62728\">refused candidate</span>"
      "<span style=\"background:#e4e4e4;border:2px dotted #555\">excluded by the config</span>"
      "<span style=\"background:#eeeeee\">collapsed repeated blocks / page links</span></p>\n"
      "<h2>Fusion report</h2>\n<pre>", html_escape(format_fusion_report(report)), "</pre>\n");
  int side_index = 0;
  for (const auto* side : {&views.before, &views.after}) {
    const std::string id = side_index++ == 0 ? "before" : "after";
    const size_t hidden = id == "before" ? views.hidden_before : views.hidden_after;
    html += str_cat("<h2>", id == "before" ? "Before fusion (O0)" : str_cat("After ", report.level), "</h2>\n");
    if (hidden > 0) html += str_cat("<p>", hidden, " nodes of repeated blocks are collapsed.</p>\n");
    if (side->size() > 1) {
      html += "<div>";
      for (size_t p = 0; p < side->size(); ++p) {
        html += str_cat("<button onclick=\"show('", id, "',", p, ")\">page ", p + 1, "</button>");
      }
      html += "</div>\n";
    }
    for (size_t p = 0; p < side->size(); ++p) {
      OPFUSE_ASSIGN_OR_RETURN(std::string svg, run_graphviz(view_to_dot((*side)[p]), "svg"));
      // Drop the XML prologue and DOCTYPE: the <svg> element is inlined.
      const size_t start = svg.find("<svg");
      if (start != std::string::npos) svg.erase(0, start);
      html += str_cat("<div class=\"graph page", p == 0 ? " shown" : "", "\" id=\"", id, p, "\">\n", svg, "</div>\n");
    }
  }
  html +=
      "<script>\nfunction show(side, p){document.querySelectorAll('[id^='+side+']').forEach("
      "function(e){e.classList.toggle('shown', e.id===side+p);});}\n</script>\n</body></html>\n";
  return html;
}

}  // namespace opfuse
