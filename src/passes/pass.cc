#include "passes/pass.h"

namespace opfuse {

PassDecision refusal(std::string pass, std::string what, std::string reason, std::vector<std::string> members) {
  PassDecision d;
  d.pass = std::move(pass);
  d.what = std::move(what);
  d.reason = std::move(reason);
  d.members = std::move(members);
  return d;
}

PassDecision application(std::string pass, std::string what, std::vector<std::string> members, std::string result) {
  PassDecision d;
  d.pass = std::move(pass);
  d.what = std::move(what);
  d.applied = true;
  d.members = std::move(members);
  d.result = std::move(result);
  return d;
}

bool PassContext::decide(PassDecision decision) {
  if (decision.rule.empty()) decision.rule = decision.pass;
  const std::string& rule = decision.rule;
  if (!decision.applied) {
    std::string key = str_cat(decision.pass, '\0', rule, '\0', decision.what, '\0', decision.reason);
    if (!refusals_seen_.insert(std::move(key)).second) return false;
  }
  RuleCounter& counter = rule_counters[rule];
  ++counter.matched;
  if (decision.applied) ++counter.applied;
  decisions.push_back(std::move(decision));
  return true;
}

}  // namespace opfuse
