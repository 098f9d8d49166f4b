// Node attributes: a small typed variant per ONNX attribute kind.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/tensor.h"

namespace opfuse {

enum class AttrType { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor };
std::string_view attr_type_name(AttrType t);  // "int", "float", "ints", ...

using AttrValue = std::variant<int64_t, float, std::string, std::vector<int64_t>,
                               std::vector<float>, std::vector<std::string>, Tensor>;
AttrType attr_type_of(const AttrValue& v);

// Attributes as set on a node, ordered by name (so printing is deterministic).
using Attributes = std::map<std::string, AttrValue>;

}  // namespace opfuse
