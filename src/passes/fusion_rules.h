// The names users may give to FusionConfig (--disable, --enable-only, the JSON config): every
// fusion rule opfuse knows. One list, so an unknown name is an error that lists the valid ones.
//
// Where the names come from:
//  - every pass except the canonicalisation passes (they never fuse and never consult
//    FusionConfig): "fold_batchnorm", "fuse_patterns", "region_fusion", "layout" ...; a new
//    pass shows up without further edits;
//  - rules registered by name: a pass that records finer-grained rules than its own name calls
//    register_fusion_rule before configs are validated; tests may register too;
//  - rule sources: a function listing rules, called when the list is needed (the pattern list
//    registers one; building the patterns during static initialisation would read other files'
//    static tables before they exist).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "passes/fusion_config.h"

namespace opfuse {

struct FusionRuleInfo {
  std::string name;     // "epilogue_relu"
  std::string summary;  // one line, shown by `opfuse report --rules`
};

// Adds a rule name (idempotent: the same name twice keeps the first summary).
void register_fusion_rule(std::string_view name, std::string_view summary);

// A list of rules computed on demand (the pattern engine's: one per pattern). Registering only
// stores the function, so it is safe from a static initialiser; the list is built when asked,
// after every static table it reads exists.
using FusionRuleSource = std::vector<FusionRuleInfo> (*)();
void register_fusion_rule_source(FusionRuleSource source);

// Every known rule, sorted by name.
std::vector<FusionRuleInfo> known_fusion_rules();
bool is_known_fusion_rule(std::string_view name);
// "epilogue_add, epilogue_relu, ...": for error messages.
std::string known_fusion_rule_list();

// Unknown rule names (disabled or enabled) and unknown op types are user errors listing the
// valid ones; out-of-range numbers too; prefixed by config.source when set. The one check of a
// configuration: run_pipeline makes it, and Session::create in eager mode (which runs no
// pipeline, but a bad rule name must not be silently ignored there).
Status validate_fusion_config(const FusionConfig& config);

}  // namespace opfuse
