// Every pattern of opfuse, family by family. Order matters only among patterns with the same
// root op type and benefit (the earlier wins).
#include "passes/fusion_rules.h"
#include "patterns/families.h"

namespace opfuse::patterns {

const std::vector<Pattern>& all_patterns() {
  static const std::vector<Pattern> patterns = [] {
    std::vector<Pattern> all;
    for (auto family : {gelu_patterns, focus_patterns, anchor_affine_patterns, epilogue_patterns,
                        attention_patterns, input_scale_patterns, layer_norm_patterns, skip_layer_norm_patterns,
                        lstm_cell_patterns}) {
      for (Pattern& p : family()) all.push_back(std::move(p));
    }
    return all;
  }();
  return patterns;
}

namespace {
// Every pattern name is a rule users may switch (--disable epilogue_relu), listed from the
// patterns themselves, so a new pattern needs no second entry anywhere.
std::vector<FusionRuleInfo> pattern_rules() {
  std::vector<FusionRuleInfo> rules;
  for (const Pattern& p : all_patterns()) {
    rules.push_back({p.name, "pattern (" + p.family + " family, src/patterns/" + p.family + ".cc)"});
  }
  return rules;
}
const bool kPatternRulesRegistered = (register_fusion_rule_source(pattern_rules), true);
}  // namespace

}  // namespace opfuse::patterns
