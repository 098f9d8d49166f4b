#include "ir/attribute.h"

namespace opfuse {

std::string_view attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::kInt: return "int";
    case AttrType::kFloat: return "float";
    case AttrType::kString: return "string";
    case AttrType::kInts: return "ints";
    case AttrType::kFloats: return "floats";
    case AttrType::kStrings: return "strings";
    case AttrType::kTensor: return "tensor";
    case AttrType::kGraph: return "graph";
  }
  return "?";
}

AttrType attr_type_of(const AttrValue& v) { return static_cast<AttrType>(v.index()); }

}  // namespace opfuse
