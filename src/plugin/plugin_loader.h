// Loads custom-op plugins (shared libraries implementing plugin/opfuse_plugin.h) and registers
// their ops (ops/custom_op.h) in the plugin's domain.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace opfuse {

struct LoadedPlugin {
  std::string path;
  std::string domain;
  std::vector<std::string> ops;
};

// dlopens the library, checks its ABI version, validates every op, then registers them all (or
// none). Loading the same file again returns the first load's result. Errors are user errors
// naming the library and the problem: the file is missing, dlopen failed (with dlerror's
// message), an entry point is missing, the ABI version differs, an op name is taken, an op
// record is malformed.
Result<LoadedPlugin> load_custom_op_library(const std::string& path);

}  // namespace opfuse
