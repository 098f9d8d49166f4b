// Passes added at run time (a plugin, a test's deliberately broken rule): findable by name like
// the built-in ones (--passes), run at O2 and O3 before the level's own fusion stages, and known
// as fusion rules (FusionConfig can switch them). The built-in passes stay in pass_list.cc.
#pragma once

#include <string>
#include <string_view>

#include "passes/pass.h"

namespace opfuse {

// Fails when a pass of that name exists already.
Status register_extra_pass(std::string_view name, std::string_view summary, PassFn run);
// Removes it again (tests clean up after themselves); false when there was none.
bool unregister_extra_pass(std::string_view name);
const PassDef* find_extra_pass(std::string_view name);
std::vector<PassDef> extra_passes();

}  // namespace opfuse
