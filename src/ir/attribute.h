// Node attributes: a small typed variant per ONNX attribute kind.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/tensor.h"

namespace opfuse {

class Graph;
// A subgraph (If's branches, Loop's and Scan's bodies). Immutable once built and shared by the
// copies of its node, so cloning a graph does not copy its bodies; a pass that rewrites a body
// makes a new one.
using GraphAttr = std::shared_ptr<const Graph>;

enum class AttrType { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor, kGraph };
std::string_view attr_type_name(AttrType t);  // "int", "float", "ints", ...

using AttrValue = std::variant<int64_t, float, std::string, std::vector<int64_t>,
                               std::vector<float>, std::vector<std::string>, Tensor, GraphAttr>;
AttrType attr_type_of(const AttrValue& v);

// Attributes as set on a node, ordered by name (so printing is deterministic).
using Attributes = std::map<std::string, AttrValue>;

}  // namespace opfuse
