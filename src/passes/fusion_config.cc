#include "passes/fusion_config.h"

#include "core/status.h"
#include "ir/graph.h"

namespace opfuse {

bool glob_match(std::string_view glob, std::string_view text) {
  // Iterative matcher with one backtrack point for the last '*': linear in practice, no recursion.
  size_t g = 0, t = 0, star = std::string_view::npos, resume = 0;
  while (t < text.size()) {
    if (g < glob.size() && (glob[g] == '?' || glob[g] == text[t])) {
      ++g, ++t;
    } else if (g < glob.size() && glob[g] == '*') {
      star = g++;
      resume = t;
    } else if (star != std::string_view::npos) {
      g = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (g < glob.size() && glob[g] == '*') ++g;
  return g == glob.size();
}

bool FusionConfig::rule_enabled(std::string_view rule) const {
  std::string name(rule);
  if (disabled_rules.count(name)) return false;
  return enabled_rules.empty() || enabled_rules.count(name) > 0;
}

std::string FusionConfig::node_refusal(const Node& node) const {
  if (disabled_op_types.count(node.op_type())) {
    return str_cat("op type ", node.op_type(), " excluded from fusion");
  }
  for (const std::string& glob : excluded_node_globs) {
    if (glob_match(glob, node.name())) return str_cat("node excluded by glob '", glob, "'");
  }
  return {};
}

bool FusionConfig::node_fusible(const Node& node) const { return node_refusal(node).empty(); }

}  // namespace opfuse
