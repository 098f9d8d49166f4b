#include "report/fusion_report.h"

#include "passes/tuning_record.h"
#include "pipelines/pipeline.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace opfuse {
namespace {

// Union-find over node names: every applied decision joins its members and its result.
class Groups {
 public:
  std::string find(const std::string& name) {
    auto it = parent_.find(name);
    if (it == parent_.end()) {
      parent_[name] = name;
      return name;
    }
    if (it->second == name) return name;
    std::string root = find(it->second);
    parent_[name] = root;
    return root;
  }
  void join(const std::string& a, const std::string& b) {
    const std::string ra = find(a), rb = find(b);
    if (ra != rb) parent_[ra] = rb;
  }

 private:
  std::map<std::string, std::string> parent_;
};

std::string qualified_op(const Node& node) {
  return node.domain().empty() ? node.op_type() : str_cat(node.domain(), "::", node.op_type());
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

}  // namespace

std::string format_bytes(int64_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (bytes < 1000) std::snprintf(buf, sizeof(buf), "%" PRId64 " B", bytes);
  else if (bytes < 1000 * 1000) std::snprintf(buf, sizeof(buf), "%.1f KB", b / 1e3);
  else if (bytes < int64_t{1000} * 1000 * 1000) std::snprintf(buf, sizeof(buf), "%.2f MB", b / 1e6);
  else std::snprintf(buf, sizeof(buf), "%.2f GB", b / 1e9);
  return buf;
}

FusionReport make_fusion_report(const FusionAnalysis& a) {
  FusionReport r;
  r.level = std::string(opt_level_name(a.level));
  r.target = a.context.target.describe();
  r.config = a.config;
  r.config.region_min_traffic_saving = a.context.fusion.region_min_traffic_saving;  // a record's, if any
  // Rules: every decision was counted under its rule as it was recorded (PassContext::decide).
  for (const auto& [name, c] : a.context.rule_counters) {
    r.rules.push_back({name, c.matched, c.applied, c.matched - c.applied});
  }

  // Kernels: connected groups of applied decisions.
  Groups groups;
  for (const PassDecision& d : a.context.decisions) {
    if (!d.applied) continue;
    for (const std::string& m : d.members) groups.join(m, d.members.front());
    if (!d.result.empty() && !d.members.empty()) groups.join(d.result, d.members.front());
  }
  std::map<std::string, FusionReport::Kernel> by_root;
  std::map<std::string, std::set<std::string>> rules_of, members_of;
  std::vector<std::string> order;  // roots in order of first decision
  for (const PassDecision& d : a.context.decisions) {
    if (!d.applied || d.members.empty()) continue;
    const std::string root = groups.find(d.members.front());
    if (!by_root.count(root)) order.push_back(root);
    FusionReport::Kernel& k = by_root[root];
    if (!d.result.empty()) k.node = d.result;  // the latest decision's result does the work
    k.bytes_saved += d.bytes_saved;
    if (d.pass == "layout") k.layout = d.what;
    rules_of[root].insert(d.rule.empty() ? d.pass : d.rule);
    members_of[root].insert(d.members.begin(), d.members.end());
  }
  // Members in the original execution order; nodes a pass created (not in `before`) last.
  std::map<std::string, size_t> position;
  {
    size_t i = 0;
    for (const Node* n : a.before.nodes()) position[n->name()] = i++;
  }
  for (const std::string& root : order) {
    FusionReport::Kernel& k = by_root[root];
    std::vector<std::string> members(members_of[root].begin(), members_of[root].end());
    std::stable_sort(members.begin(), members.end(), [&](const std::string& x, const std::string& y) {
      const size_t px = position.count(x) ? position[x] : SIZE_MAX;
      const size_t py = position.count(y) ? position[y] : SIZE_MAX;
      return px < py;
    });
    for (const std::string& m : members) {
      const Node* n = a.before.find_node(m);
      if (n == nullptr) continue;  // created and absorbed within the pipeline
      k.members.push_back(m);
      k.member_ops.push_back(qualified_op(*n));
    }
    k.rules.assign(rules_of[root].begin(), rules_of[root].end());
    const Node* result = k.node.empty() ? nullptr : a.after.find_node(k.node);
    if (result == nullptr) k.node.clear();
    k.kind = result ? qualified_op(*result) : "(removed)";
    r.kernels.push_back(std::move(k));
  }
  for (const PassDecision& d : a.context.decisions) {
    if (d.applied) continue;
    r.refused.push_back({d.rule.empty() ? d.pass : d.rule, d.what, d.reason, d.members});
  }
  for (const Node* n : a.before.nodes()) {
    std::string why = a.config.node_refusal(*n);
    if (!why.empty()) r.excluded.emplace_back(n->name(), std::move(why));
  }
  r.nodes_before = a.before.num_nodes();
  r.nodes_after = a.after.num_nodes();
  r.kernels_before = count_kernels(a.before);
  r.kernels_after = count_kernels(a.after);
  r.traffic_before = estimated_traffic_bytes(a.before);
  r.traffic_after = estimated_traffic_bytes(a.after);
  return r;
}

std::string format_fusion_report(const FusionReport& r) {
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  char buf[512];
  line(str_cat("fusion report at ", r.level));
  line(str_cat("target: ", r.target));
  const FusionConfig& c = r.config;
  std::vector<std::string> config;
  if (!c.disabled_rules.empty()) config.push_back("disabled rules: " + join({c.disabled_rules.begin(), c.disabled_rules.end()}, ", "));
  if (!c.enabled_rules.empty()) config.push_back("only rules: " + join({c.enabled_rules.begin(), c.enabled_rules.end()}, ", "));
  if (!c.disabled_op_types.empty()) config.push_back("ops never fused: " + join({c.disabled_op_types.begin(), c.disabled_op_types.end()}, ", "));
  if (!c.excluded_node_globs.empty()) config.push_back("excluded nodes: " + join(c.excluded_node_globs, ", "));
  if (const auto& t = c.tuning) {
    config.push_back(str_cat(t->source.empty() ? std::string("a tuning record") : t->source, " (layouts ",
                             t->use_layouts ? "from its timings" : "estimated", ", region threshold ",
                             t->region_threshold ? std::to_string(*t->region_threshold) : std::string("configured"),
                             ", ", t->kernels.size(), " kernel choice(s), ", t->epilogues.size(),
                             " epilogue placement(s))"));
  }
  line("config: " + (config.empty() ? std::string("defaults") : join(config, "; ")));

  line("\nrules                          matched  applied  refused");
  if (r.rules.empty()) line("  (no fusion rule ran)");
  for (const auto& rule : r.rules) {
    std::snprintf(buf, sizeof(buf), "  %-28s %7" PRId64 "  %7" PRId64 "  %7" PRId64, rule.name.c_str(),
                  rule.matched, rule.applied, rule.refused);
    line(buf);
  }

  line(str_cat("\nfused kernels (", r.kernels.size(), ")"));
  for (const auto& k : r.kernels) {
    line(str_cat("  ", k.node.empty() ? std::string("(folded away)") : k.node, "  ", k.kind, "  [",
                 join(k.rules, ", "), "]  saves ~", format_bytes(k.bytes_saved)));
    for (size_t i = 0; i < k.members.size(); ++i) line(str_cat("      ", k.member_ops[i], " '", k.members[i], "'"));
    if (!k.layout.empty()) line(str_cat("      layout: ", k.layout));
  }

  line(str_cat("\nrefused candidates (", r.refused.size(), ")"));
  for (const auto& f : r.refused) line(str_cat("  ", f.rule, ": ", f.what, ": ", f.reason));

  if (!r.excluded.empty()) {
    line(str_cat("\nexcluded from fusion by the config (", r.excluded.size(), ")"));
    for (const auto& [node, why] : r.excluded) line(str_cat("  ", node, ": ", why));
  }

  line("\ntotals                 before       after");
  std::snprintf(buf, sizeof(buf), "  nodes          %12zu %11zu", r.nodes_before, r.nodes_after);
  line(buf);
  std::snprintf(buf, sizeof(buf), "  kernels        %12zu %11zu", r.kernels_before, r.kernels_after);
  line(buf);
  const double change = r.traffic_before > 0
                            ? 100.0 * static_cast<double>(r.traffic_after - r.traffic_before) /
                                  static_cast<double>(r.traffic_before)
                            : 0.0;
  std::snprintf(buf, sizeof(buf), "  memory traffic %12s %11s  (%+.1f%%, estimated)", format_bytes(r.traffic_before).c_str(),
                format_bytes(r.traffic_after).c_str(), change);
  line(buf);
  return out;
}

std::string fusion_report_json(const FusionReport& r) {
  using nlohmann::json;
  json j;
  j["level"] = r.level;
  j["target"] = r.target;
  j["config"] = {{"disable", r.config.disabled_rules},
                 {"enable_only", r.config.enabled_rules},
                 {"disable_op_types", r.config.disabled_op_types},
                 {"exclude", r.config.excluded_node_globs},
                 {"region_threshold", r.config.region_min_traffic_saving},
                 {"max_region_nodes", r.config.max_region_nodes},
                 {"region_table_budget", r.config.region_table_budget_bytes}};
  j["tuning"] = nullptr;
  if (const auto& t = r.config.tuning) {
    j["tuning"] = {{"source", t->source}, {"use_layouts", t->use_layouts}, {"kernels", t->kernels}, {"epilogues", t->epilogues},
                   {"region_threshold", t->region_threshold ? json(*t->region_threshold) : json(nullptr)}};
  }
  j["rules"] = json::array();
  for (const auto& rule : r.rules) {
    j["rules"].push_back({{"name", rule.name}, {"matched", rule.matched}, {"applied", rule.applied},
                          {"refused", rule.refused}});
  }
  j["kernels"] = json::array();
  for (const auto& k : r.kernels) {
    json kernel = {{"node", k.node}, {"kind", k.kind}, {"rules", k.rules}, {"members", k.members},
                   {"member_ops", k.member_ops}, {"bytes_saved", k.bytes_saved}};
    if (!k.layout.empty()) kernel["layout"] = k.layout;
    j["kernels"].push_back(std::move(kernel));
  }
  j["refused"] = json::array();
  for (const auto& f : r.refused) {
    j["refused"].push_back({{"rule", f.rule}, {"what", f.what}, {"reason", f.reason}, {"members", f.members}});
  }
  j["excluded"] = json::array();
  for (const auto& [node, why] : r.excluded) j["excluded"].push_back({{"node", node}, {"reason", why}});
  j["totals"] = {{"nodes_before", r.nodes_before},     {"nodes_after", r.nodes_after},
                 {"kernels_before", r.kernels_before}, {"kernels_after", r.kernels_after},
                 {"traffic_bytes_before", r.traffic_before}, {"traffic_bytes_after", r.traffic_after}};
  return j.dump(2) + "\n";
}

}  // namespace opfuse
