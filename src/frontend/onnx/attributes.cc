#include "frontend/onnx/attributes.h"

#include "frontend/onnx/tensor_proto.h"

namespace opfuse::onnx_import {
namespace {

using onnx::AttributeProto;

// Old exporters (IR version < 3 era) leave `type` unset; the populated field says the kind.
AttributeProto::AttributeType effective_type(const AttributeProto& a) {
  if (a.type() != AttributeProto::UNDEFINED) return a.type();
  if (a.has_f()) return AttributeProto::FLOAT;
  if (a.has_i()) return AttributeProto::INT;
  if (a.has_s()) return AttributeProto::STRING;
  if (a.has_t()) return AttributeProto::TENSOR;
  if (a.has_g()) return AttributeProto::GRAPH;
  if (a.floats_size() > 0) return AttributeProto::FLOATS;
  if (a.ints_size() > 0) return AttributeProto::INTS;
  if (a.strings_size() > 0) return AttributeProto::STRINGS;
  if (a.graphs_size() > 0) return AttributeProto::GRAPHS;
  return AttributeProto::UNDEFINED;
}

}  // namespace

Result<AttrValue> attr_from_proto(const AttributeProto& a, const std::string& base_dir,
                                  const std::string& who, TensorBudget* budget) {
  const std::string what = str_cat(who, ": attribute '", a.name(), "'");
  if (!a.ref_attr_name().empty()) {
    return Status::user_error(
        str_cat(what, " refers to a function attribute, which is not supported"));
  }
  const AttributeProto::AttributeType type = effective_type(a);
  switch (type) {
    case AttributeProto::INT:
      return AttrValue(static_cast<int64_t>(a.i()));
    case AttributeProto::FLOAT:
      return AttrValue(a.f());
    case AttributeProto::STRING:
      return AttrValue(a.s());
    case AttributeProto::INTS:
      return AttrValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case AttributeProto::FLOATS:
      return AttrValue(std::vector<float>(a.floats().begin(), a.floats().end()));
    case AttributeProto::STRINGS:
      return AttrValue(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case AttributeProto::TENSOR: {
      OPFUSE_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(a.t(), base_dir, what, budget));
      return AttrValue(std::move(t));
    }
    case AttributeProto::UNDEFINED:
      return Status::user_error(str_cat(what, " has no type and no value"));
    default:
      break;
  }
  return Status::user_error(str_cat(what, " has type ", AttributeProto::AttributeType_Name(type),
                                    ", which is not supported",
                                    type == AttributeProto::GRAPH || type == AttributeProto::GRAPHS
                                        ? " here (subgraphs are read only as the bodies of If, Loop and Scan)"
                                        : ""));
}

Status check_attributes(const OpDef& def, const Attributes& attrs, const std::string& who) {
  for (const auto& [name, value] : attrs) {
    const AttrSpec* spec = def.find_attr(name);
    if (spec == nullptr) {
      return Status::user_error(
          str_cat(who, ": attribute '", name, "' of op ", def.name, " is not supported"));
    }
    if (attr_type_of(value) != spec->type) {
      return Status::user_error(str_cat(who, ": attribute '", name, "' has type ",
                                        attr_type_name(attr_type_of(value)), " but op ", def.name,
                                        " expects ", attr_type_name(spec->type)));
    }
  }
  for (const AttrSpec& spec : def.attrs) {
    if (spec.required && !attrs.count(spec.name)) {
      return Status::user_error(
          str_cat(who, ": required attribute '", spec.name, "' of op ", def.name, " is missing"));
    }
  }
  return Status::ok();
}

}  // namespace opfuse::onnx_import
