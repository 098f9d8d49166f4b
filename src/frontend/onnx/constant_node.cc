#include "frontend/onnx/constant_node.h"

namespace opfuse::onnx_import {

Result<Tensor> constant_node_value(const Attributes& attrs, const std::string& who) {
  if (attrs.size() != 1) {
    return Status::user_error(
        str_cat(who, ": Constant must have exactly one value attribute, it has ", attrs.size()));
  }
  // Plain references, not a structured binding: clang 14 cannot capture bindings in lambdas.
  const std::string& name = attrs.begin()->first;
  const AttrValue& value = attrs.begin()->second;
  auto wrong_type = [&] {
    return Status::user_error(str_cat(who, ": Constant attribute '", name, "' has type ",
                                      attr_type_name(attr_type_of(value))));
  };
  if (name == "value") {
    if (!std::holds_alternative<Tensor>(value)) return wrong_type();
    return std::get<Tensor>(value);
  }
  if (name == "value_float") {
    if (!std::holds_alternative<float>(value)) return wrong_type();
    return Tensor::scalar<float>(std::get<float>(value));
  }
  if (name == "value_int") {
    if (!std::holds_alternative<int64_t>(value)) return wrong_type();
    return Tensor::scalar<int64_t>(std::get<int64_t>(value));
  }
  if (name == "value_floats") {
    if (!std::holds_alternative<std::vector<float>>(value)) return wrong_type();
    const auto& v = std::get<std::vector<float>>(value);
    return Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v);
  }
  if (name == "value_ints") {
    if (!std::holds_alternative<std::vector<int64_t>>(value)) return wrong_type();
    const auto& v = std::get<std::vector<int64_t>>(value);
    return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
  }
  if (name == "value_string" || name == "value_strings") {
    return Status::user_error(
        str_cat(who, ": Constant attribute '", name, "': string tensors are not supported"));
  }
  return Status::user_error(str_cat(who, ": Constant attribute '", name, "' is not supported"));
}

}  // namespace opfuse::onnx_import
