// Reads a scalar expression from its text form (what ScalarExpr::to_string prints):
// "mul(sub(%0, %1), %0)", "max(%0, 0)", "select(gt(%0, 0), %0, mul(%0, 0.01))".
// Plugins declare their elementwise ops this way (plugin/opfuse_plugin.h).
#pragma once

#include <string_view>

#include "core/status.h"
#include "ops/scalar_expr.h"

namespace opfuse {

// Errors say what was expected at which character offset.
Result<ScalarExpr> parse_scalar_expr(std::string_view text);

}  // namespace opfuse
