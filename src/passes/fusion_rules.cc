#include "passes/fusion_rules.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include "ops/registry.h"
#include "passes/extra_passes.h"
#include "passes/pass.h"

namespace opfuse {
namespace {

// Passes that only canonicalise: not fusion rules, so naming them in a fusion config is an error
// rather than a switch that silently does nothing.
// expand_composites un-fuses (composite ops into primitives) so that fusion can see them.
const std::set<std::string_view> kNotFusionRules = {"infer_shapes", "dce", "constant_fold", "cse",
                                                    "simplify", "expand_composites"};

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::string, std::less<>> rules;
  std::vector<FusionRuleSource> sources;
};

Registry& registry() {
  static Registry r;  // function-local: safe to use from other files' static registrars
  return r;
}

}  // namespace

void register_fusion_rule(std::string_view name, std::string_view summary) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.rules.try_emplace(std::string(name), std::string(summary));
}

void register_fusion_rule_source(FusionRuleSource source) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.sources.push_back(source);
}

std::vector<FusionRuleInfo> known_fusion_rules() {
  std::map<std::string, std::string> all;
  std::vector<FusionRuleSource> sources;
  std::vector<PassDef> passes = all_passes();
  for (const PassDef& p : extra_passes()) passes.push_back(p);
  for (const PassDef& p : passes) {
    if (!kNotFusionRules.count(p.name)) all.try_emplace(std::string(p.name), std::string(p.summary));
  }
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    for (const auto& [name, summary] : r.rules) all[name] = summary;
    sources = r.sources;
  }
  for (FusionRuleSource source : sources) {
    for (FusionRuleInfo& info : source()) all.try_emplace(std::move(info.name), std::move(info.summary));
  }
  std::vector<FusionRuleInfo> out;
  for (auto& [name, summary] : all) out.push_back({name, summary});
  return out;
}

bool is_known_fusion_rule(std::string_view name) {
  for (const FusionRuleInfo& r : known_fusion_rules()) {
    if (r.name == name) return true;
  }
  return false;
}

std::string known_fusion_rule_list() {
  std::string out;
  for (const FusionRuleInfo& r : known_fusion_rules()) out += (out.empty() ? "" : ", ") + r.name;
  return out;
}

namespace {

Status validate_fields(const FusionConfig& config) {
  for (const auto* rules : {&config.disabled_rules, &config.enabled_rules}) {
    for (const std::string& name : *rules) {
      if (!is_known_fusion_rule(name)) {
        return Status::user_error(str_cat("unknown fusion rule '", name,
                                          "' (valid: ", known_fusion_rule_list(), ")"));
      }
    }
  }
  if (!config.disabled_op_types.empty()) {
    std::set<std::string> ops;
    for (const OpDef* def : OpRegistry::global().all()) ops.insert(def->name);
    for (const std::string& op : config.disabled_op_types) {
      if (!ops.count(op)) {
        std::string valid;
        for (const std::string& o : ops) valid += (valid.empty() ? "" : ", ") + o;
        return Status::user_error(str_cat("unknown op type '", op, "' (valid: ", valid, ")"));
      }
    }
  }
  for (const std::string& glob : config.excluded_node_globs) {
    if (glob.empty()) return Status::user_error("an exclusion glob is empty");
  }
  if (!(config.region_min_traffic_saving >= 0.0 && config.region_min_traffic_saving <= 1.0)) {
    return Status::user_error(str_cat("the region threshold must be a fraction in [0, 1], got ",
                                      config.region_min_traffic_saving));
  }
  if (config.max_region_nodes < 1) {
    return Status::user_error(str_cat("the maximum region size must be at least 1 node, got ",
                                      config.max_region_nodes));
  }
  if (config.region_table_budget_bytes < 0) {
    return Status::user_error("the region table budget must be 0 (the default, 64 MiB) or a positive size");
  }
  return Status::ok();
}

}  // namespace

Status validate_fusion_config(const FusionConfig& config) {
  Status s = validate_fields(config);
  if (s.is_ok() || config.source.empty()) return s;
  return Status::user_error(str_cat(config.source, ": ", s.message()));
}

}  // namespace opfuse
