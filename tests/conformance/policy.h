// What the conformance runner treats as "skipped" rather than "failed", and the few tests
// that get a looser tolerance (each with its reason).
#pragma once

#include <optional>
#include <string>

#include "compare.h"

namespace opfuse::conformance {

// True when an error says a feature is unsupported (op, opset, attribute, dtype, type kind):
// opfuse refused honestly, which is a skip, not a failure.
bool is_unsupported(const std::string& message);

// The reason with names of files, nodes and values removed, so that equal reasons group:
// "…/model.onnx: node 'x' (index 0): op If (domain ai.onnx, opset 16) is not supported"
// -> "op If (domain ai.onnx) is not supported".
std::string skip_reason(const std::string& message);

// The tolerance for `test_name`: the default unless the table below loosens it.
Tolerance tolerance_for(const std::string& test_name);

}  // namespace opfuse::conformance
