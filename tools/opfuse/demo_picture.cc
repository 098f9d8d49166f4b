#include "demo_picture.h"

#include <map>
#include <sstream>

namespace opfuse::cli {
namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string graph_to_dot(const Graph& graph, const std::string& title) {
  std::ostringstream dot;
  dot << "digraph " << quoted(graph.name) << " {\n"
      << "  label=" << quoted(title) << "; labelloc=t; rankdir=TB;\n"
      << "  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=Helvetica, fontsize=10];\n";
  std::map<const Node*, int> id;
  int next = 0;
  for (const Value* in : graph.inputs()) {
    dot << "  in" << next << " [shape=oval, fillcolor=lightgrey, label=" << quoted(in->name() + "\n" + in->type_string()) << "];\n";
    ++next;
  }
  for (const Node* n : graph.nodes()) {
    id[n] = next++;
    const bool fused = n->domain() == "opfuse";
    std::string label = n->op_type() + "\n" + n->name();
    dot << "  n" << id[n] << " [label=" << quoted(label) << (fused ? ", fillcolor=\"#ffd27f\"" : "") << "];\n";
  }
  int input_index = 0;
  std::map<const Value*, std::string> source;
  for (const Value* in : graph.inputs()) source[in] = str_cat("in", input_index++);
  for (const Node* n : graph.nodes()) {
    for (const Value* v : n->outputs()) source[v] = str_cat("n", id[n]);
  }
  for (const Node* n : graph.nodes()) {
    for (const Value* v : n->inputs()) {
      if (v == nullptr || !source.count(v)) continue;  // constants are not drawn
      dot << "  " << source[v] << " -> n" << id[n];
      if (v->shape) dot << " [label=" << quoted(v->type_string()) << ", fontsize=8]";
      dot << ";\n";
    }
  }
  int out_index = 0;
  for (const Value* out : graph.outputs()) {
    dot << "  out" << out_index << " [shape=oval, fillcolor=lightgrey, label=" << quoted(out->name()) << "];\n";
    if (source.count(out)) dot << "  " << source[out] << " -> out" << out_index << ";\n";
    ++out_index;
  }
  dot << "}\n";
  return dot.str();
}

}  // namespace opfuse::cli
