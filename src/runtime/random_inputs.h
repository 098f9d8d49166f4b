// Seeded random inputs for a session: what `opfuse run --random`, bench, profile and the Python
// package's profile()/validate() feed a model when the user gives no data. Floats uniform in
// [-1, 1), integers and booleans in {0, 1}; a symbolic dim takes its size from `dims`, else 1.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/session.h"

namespace opfuse {

// The sizes a shape takes when its symbolic dims are bound by `dims` (a symbol not there: 1), the
// rule random inputs and the report's --dim binding share.
std::vector<int64_t> concrete_dims(const Shape& shape, const std::map<std::string, int64_t>& dims);

// Fills every input `given` lacks (and keeps those it has). An input of unknown rank must be given.
Result<TensorMap> random_inputs(const Session& session, uint64_t seed, const std::map<std::string, int64_t>& dims,
                                TensorMap given = {});

}  // namespace opfuse
