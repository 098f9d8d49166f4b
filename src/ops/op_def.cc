#include "ops/op_def.h"

#include <cstring>

namespace opfuse {

std::string_view fusion_kind_name(FusionKind kind) {
  switch (kind) {
    case FusionKind::kElementwise: return "elementwise";
    case FusionKind::kBroadcast: return "broadcast";
    case FusionKind::kInjective: return "injective";
    case FusionKind::kReduction: return "reduction";
    case FusionKind::kAnchor: return "anchor";
    case FusionKind::kOpaque: return "opaque";
  }
  return "?";
}

const AttrSpec* OpDef::find_attr(const std::string& attr_name) const {
  for (const AttrSpec& spec : attrs) {
    if (spec.name == attr_name) return &spec;
  }
  return nullptr;
}

const AttrValue* AttrReader::find(const std::string& name) const {
  auto it = node_.attrs.find(name);
  if (it != node_.attrs.end()) return &it->second;
  const AttrSpec* spec = node_.def().find_attr(name);
  if (spec && spec->default_value) return &*spec->default_value;
  return nullptr;
}

// The verifier checks attribute types against the schema, so a mismatch here is a bug in a
// kernel asking for the wrong type; it reads as "absent".
int64_t AttrReader::get_int(const std::string& name) const {
  const AttrValue* v = find(name);
  if (v && std::holds_alternative<int64_t>(*v)) return std::get<int64_t>(*v);
  return 0;
}
float AttrReader::get_float(const std::string& name) const {
  const AttrValue* v = find(name);
  if (v && std::holds_alternative<float>(*v)) return std::get<float>(*v);
  return 0.0f;
}
std::string AttrReader::get_string(const std::string& name) const {
  const AttrValue* v = find(name);
  if (v && std::holds_alternative<std::string>(*v)) return std::get<std::string>(*v);
  return {};
}
std::vector<int64_t> AttrReader::get_ints(const std::string& name) const {
  const AttrValue* v = find(name);
  if (v && std::holds_alternative<std::vector<int64_t>>(*v)) {
    return std::get<std::vector<int64_t>>(*v);
  }
  return {};
}
std::vector<float> AttrReader::get_floats(const std::string& name) const {
  const AttrValue* v = find(name);
  if (v && std::holds_alternative<std::vector<float>>(*v)) return std::get<std::vector<float>>(*v);
  return {};
}
std::vector<std::string> AttrReader::get_strings(const std::string& name) const {
  const AttrValue* v = find(name);
  if (v && std::holds_alternative<std::vector<std::string>>(*v)) {
    return std::get<std::vector<std::string>>(*v);
  }
  return {};
}
const Tensor* AttrReader::get_tensor(const std::string& name) const {
  const AttrValue* v = find(name);
  if (v && std::holds_alternative<Tensor>(*v)) return &std::get<Tensor>(*v);
  return nullptr;
}

InferContext::InferContext(const Node& node, std::vector<ValueType> inputs,
                           std::vector<const Tensor*> constants)
    : node_(node),
      attrs_(node),
      inputs_(std::move(inputs)),
      constants_(std::move(constants)),
      outputs_(node.outputs().size()) {
  present_.resize(inputs_.size());
  for (size_t i = 0; i < inputs_.size(); ++i) present_[i] = node.input(i) != nullptr;
  constants_.resize(inputs_.size(), nullptr);
}

void InferContext::set_output(size_t i, DType dtype, std::optional<Shape> shape) {
  if (i < outputs_.size()) outputs_[i] = ValueType{dtype, std::move(shape)};
}

Status InferContext::error(const std::string& message) const {
  return Status::user_error(str_cat(node_.describe(), ": ", message));
}

KernelContext::KernelContext(const Node& node, std::vector<const Tensor*> inputs)
    : node_(node), attrs_(node), inputs_(std::move(inputs)), outputs_(node.outputs().size()) {}

KernelContext::KernelContext(const Node& node, std::vector<const Tensor*> inputs,
                             std::vector<Tensor*> preallocated)
    : KernelContext(node, std::move(inputs)) {
  preallocated_ = std::move(preallocated);
}

Result<Tensor*> KernelContext::allocate_output(size_t i, DType dtype, std::vector<int64_t> dims) {
  if (i >= outputs_.size()) {
    return Status::internal_error(str_cat(node_.describe(), ": kernel wrote output ", i,
                                          " but the node has ", outputs_.size()));
  }
  if (i < preallocated_.size() && preallocated_[i] != nullptr &&
      preallocated_[i]->dtype() == dtype && preallocated_[i]->dims() == dims) {
    outputs_[i] = *preallocated_[i];
    std::memset(outputs_[i].raw_data(), 0, outputs_[i].nbytes());
    return &outputs_[i];
  }
  OPFUSE_ASSIGN_OR_RETURN(
      outputs_[i], Tensor::zeros(dtype, std::move(dims), str_cat(node_.describe(), " output ", i)));
  return &outputs_[i];
}

Status KernelContext::error(const std::string& message) const {
  return Status::user_error(str_cat(node_.describe(), ": ", message));
}

std::optional<DType> dtype_from_onnx_code(int64_t code) {
  switch (code) {
    case 1: return DType::kF32;
    case 2: return DType::kU8;
    case 3: return DType::kI8;
    case 4: return DType::kU16;
    case 5: return DType::kI16;
    case 6: return DType::kI32;
    case 7: return DType::kI64;
    case 9: return DType::kBool;
    case 10: return DType::kF16;
    case 11: return DType::kF64;
    case 12: return DType::kU32;
    case 13: return DType::kU64;
    default: return std::nullopt;
  }
}

OpDef op_record(std::string name, int min_inputs, int max_inputs, FusionKind kind, InferFn infer,
                KernelFn reference, std::string summary) {
  OpDef def;
  def.name = std::move(name);
  def.min_inputs = min_inputs;
  def.max_inputs = max_inputs;
  def.kind = kind;
  def.infer = infer;
  def.reference = reference;
  def.summary = std::move(summary);
  return def;
}

}  // namespace opfuse
