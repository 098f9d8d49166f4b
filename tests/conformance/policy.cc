#include "policy.h"

#include <fnmatch.h>

#include <regex>

namespace opfuse::conformance {
namespace {

struct ToleranceOverride {
  const char* pattern;  // fnmatch glob over the test directory name
  Tolerance tolerance;
  const char* reason;
};

// Keep this short; every entry needs a reason a reviewer would accept.
const ToleranceOverride kToleranceOverrides[] = {
    // Half precision has an 11-bit significand: one ulp is ~1e-3 relative, and the reference
    // data was rounded from float32 results while opfuse may round intermediate steps.
    {"*_FLOAT16*", {4e-3, 1e-3}, "float16 results carry ~1e-3 relative rounding error"},
    {"*_fp16*", {4e-3, 1e-3}, "float16 results carry ~1e-3 relative rounding error"},
};

}  // namespace

bool is_unsupported(const std::string& message) {
  return message.find("not supported") != std::string::npos ||
         message.find("unsupported") != std::string::npos;
}

std::string skip_reason(const std::string& message) {
  std::string m = message;
  // The model path the importer puts in front.
  if (size_t p = m.find("model.onnx: "); p != std::string::npos) m = m.substr(p + 12);
  static const std::regex node_label(R"(^node '[^']*' \(index \d+\)( \(converting \w+\))?: )");
  m = std::regex_replace(m, node_label, "");
  static const std::regex op_opset(
      R"(^op (\S+) \(domain ([^,]+), opset (\d+)\) is not supported(: .*)?$)");
  std::smatch match;
  if (std::regex_match(m, match, op_opset)) {
    if (!match[4].matched) return str_cat("op ", match[1], " (domain ", match[2], ") is not supported");
    return str_cat("op ", match[1], " (domain ", match[2], ") at opset ", match[3],
                   " is not supported");
  }
  // Value and node names vary per test; what is unsupported does not.
  static const std::regex names(R"((input|output|initializer|tensor|value|node) '[^']*')");
  return std::regex_replace(m, names, "$1 '*'");
}

Tolerance tolerance_for(const std::string& test_name) {
  for (const ToleranceOverride& o : kToleranceOverrides) {
    if (fnmatch(o.pattern, test_name.c_str(), 0) == 0) return o.tolerance;
  }
  return Tolerance{};
}

}  // namespace opfuse::conformance
