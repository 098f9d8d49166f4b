#include "report/model_summary.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "ops/op_def.h"

namespace opfuse {

ModelSummary summarize(const Graph& graph) {
  ModelSummary s;
  s.num_nodes = graph.num_nodes();
  for (const Node* node : graph.nodes()) {
    ++s.op_histogram[node->op_type()];
    // Ops without a flops function only move data; they count as zero.
    const int64_t f = node->def().flops ? node->def().flops(*node) : 0;
    if (f >= 0) {
      s.flops += f;
    } else {
      ++s.nodes_without_flops;
    }
  }
  for (const Value* v : graph.values()) {
    if (const Tensor* t = v->constant(); t && !v->uses().empty()) {
      s.constant_bytes += static_cast<int64_t>(t->nbytes());
      if (is_float(t->dtype())) s.parameters += t->numel();
    }
  }
  return s;
}

std::string human_count(double n) {
  const char* units[] = {"", " K", " M", " G", " T"};
  int u = 0;
  while (n >= 1000.0 && u < 4) {
    n /= 1000.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f%s" : "%.3g%s", n, units[u]);
  return buf;
}

std::string format_summary(const Graph& graph, const ModelSummary& s) {
  std::string out;
  out += "inputs:\n";
  for (const Value* v : graph.inputs()) out += str_cat("  ", v->name(), ": ", v->type_string(), "\n");
  out += "outputs:\n";
  for (const Value* v : graph.outputs()) out += str_cat("  ", v->name(), ": ", v->type_string(), "\n");
  std::vector<std::pair<std::string, int64_t>> ops(s.op_histogram.begin(), s.op_histogram.end());
  std::stable_sort(ops.begin(), ops.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  out += str_cat("ops (", s.num_nodes, " nodes, ", ops.size(), " types):\n");
  for (const auto& [op, count] : ops) {
    char line[96];
    std::snprintf(line, sizeof line, "  %-28s %6lld\n", op.c_str(), static_cast<long long>(count));
    out += line;
  }
  out += str_cat("parameters: ", human_count(static_cast<double>(s.parameters)), " (",
                 s.parameters, " weights, ", human_count(static_cast<double>(s.constant_bytes)),
                 "B of constants)\n");
  out += str_cat("flops: ", human_count(static_cast<double>(s.flops)), " (", s.flops, ")");
  if (s.nodes_without_flops > 0) {
    out += str_cat(", unknown for ", s.nodes_without_flops, " nodes with dynamic shapes");
  }
  out += "\n";
  return out;
}

}  // namespace opfuse
