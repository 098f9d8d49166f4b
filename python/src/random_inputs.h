// Seeded random inputs for a session, as the CLI makes them for `profile` and `validate` when no
// inputs are given (tools/opfuse/cli_common.cc, gather_inputs with --random): symbolic dims take
// their size from `dims` (default 1), floats are uniform in [-1, 1), integers in [0, 2), so the
// Python methods and the CLI see the same inputs for the same seed.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "runtime/session.h"

namespace opfuse {

Result<TensorMap> random_inputs(const Session& session, uint64_t seed,
                                const std::map<std::string, int64_t>& dims = {});

}  // namespace opfuse
