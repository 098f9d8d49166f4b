#include "serving/protocol.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "serving/json_reader.h"

namespace opfuse::serving {
namespace {

using nlohmann::json;

struct DatatypeName {
  DType dtype;
  const char* name;
};
constexpr DatatypeName kDatatypes[] = {
    {DType::kBool, "BOOL"},  {DType::kU8, "UINT8"},   {DType::kU16, "UINT16"},
    {DType::kU32, "UINT32"}, {DType::kU64, "UINT64"}, {DType::kI8, "INT8"},
    {DType::kI16, "INT16"},  {DType::kI32, "INT32"},  {DType::kI64, "INT64"},
    {DType::kF16, "FP16"},   {DType::kF32, "FP32"},   {DType::kF64, "FP64"},
};

std::string describe(const json& value) {
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

// Writes the elements of one input's (possibly nested) data array into a tensor's buffer, in
// row-major order, converting and range-checking each.
class DataReader {
 public:
  DataReader(const std::string& input, Tensor& tensor)
      : input_(input), tensor_(tensor), capacity_(tensor.numel()) {}

  Status read(const json& data) {
    if (data.is_array()) {
      for (const json& element : data) OPFUSE_TRY(read(element));
      return Status::ok();
    }
    if (count_ >= capacity_) return too_many();
    OPFUSE_TRY(store(data));
    ++count_;
    return Status::ok();
  }

  Status finish() const {
    if (count_ != capacity_) {
      return Status::user_error(str_cat("input '", input_, "': data has ", count_,
                                        " elements but shape ", shape_to_string(make_shape(tensor_.dims())),
                                        " needs ", capacity_));
    }
    return Status::ok();
  }

 private:
  Status too_many() const {
    return Status::user_error(str_cat("input '", input_, "': data has more than the ", capacity_,
                                      " elements shape ", shape_to_string(make_shape(tensor_.dims())),
                                      " holds"));
  }
  Status bad(const json& value, std::string_view expected) const {
    return Status::user_error(str_cat("input '", input_, "': element ", count_, " is ", describe(value),
                                      ", expected ", expected));
  }

  template <typename T>
  void put(T value) {
    tensor_.data<T>()[count_] = value;
  }

  Status store_float(const json& value) {
    double x;
    if (value.is_number()) {
      x = value.get<double>();
    } else if (value.is_string() && value.get_ref<const std::string&>() == "NaN") {
      x = std::numeric_limits<double>::quiet_NaN();
    } else if (value.is_string() && value.get_ref<const std::string&>() == "Infinity") {
      x = std::numeric_limits<double>::infinity();
    } else if (value.is_string() && value.get_ref<const std::string&>() == "-Infinity") {
      x = -std::numeric_limits<double>::infinity();
    } else {
      return bad(value, "a number (or \"NaN\", \"Infinity\", \"-Infinity\")");
    }
    switch (tensor_.dtype()) {
      case DType::kF32: put<float>(static_cast<float>(x)); break;
      case DType::kF64: put<double>(x); break;
      default: put<Half>(float_to_half(static_cast<float>(x))); break;
    }
    return Status::ok();
  }

  template <typename T>
  Status store_integer(const json& value) {
    if (value.is_number_unsigned()) {
      const auto v = value.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) return bad(value, range<T>());
      put<T>(static_cast<T>(v));
      return Status::ok();
    }
    if (value.is_number_integer()) {
      const auto v = value.get<int64_t>();
      if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          (v > 0 && static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
        return bad(value, range<T>());
      }
      put<T>(static_cast<T>(v));
      return Status::ok();
    }
    return bad(value, range<T>());
  }
  template <typename T>
  static std::string range() {
    return str_cat("an integer in [", +std::numeric_limits<T>::min(), ", ", +std::numeric_limits<T>::max(), "]");
  }

  Status store(const json& value) {
    switch (tensor_.dtype()) {
      case DType::kF32:
      case DType::kF64:
      case DType::kF16: return store_float(value);
      case DType::kI8: return store_integer<int8_t>(value);
      case DType::kI16: return store_integer<int16_t>(value);
      case DType::kI32: return store_integer<int32_t>(value);
      case DType::kI64: return store_integer<int64_t>(value);
      case DType::kU8: return store_integer<uint8_t>(value);
      case DType::kU16: return store_integer<uint16_t>(value);
      case DType::kU32: return store_integer<uint32_t>(value);
      case DType::kU64: return store_integer<uint64_t>(value);
      case DType::kBool:
        if (!value.is_boolean()) return bad(value, "true or false");
        put<bool>(value.get<bool>());
        return Status::ok();
      case DType::kUndefined: break;
    }
    return Status::internal_error("DataReader: undefined dtype");
  }

  const std::string& input_;
  Tensor& tensor_;
  const int64_t capacity_;
  int64_t count_ = 0;
};

// Checks a request's shape against the model's signature: rank and every fixed dimension.
Status check_shape(const TensorSignature& sig, const std::vector<int64_t>& dims) {
  if (!sig.shape) return Status::ok();
  const Shape& expected = *sig.shape;
  bool ok = expected.size() == dims.size();
  for (size_t i = 0; ok && i < dims.size(); ++i) {
    ok = !expected[i].is_known() || expected[i].value() == dims[i];
  }
  if (ok) return Status::ok();
  return Status::user_error(str_cat("input '", sig.name, "': shape ", shape_to_string(make_shape(dims)),
                                    " does not match the model's ", shape_to_string(expected)));
}

Result<std::vector<int64_t>> parse_shape(const std::string& input, const json& shape) {
  if (!shape.is_array()) {
    return Status::user_error(str_cat("input '", input, "': \"shape\" must be an array of integers, got ",
                                      describe(shape)));
  }
  std::vector<int64_t> dims;
  for (const json& d : shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return Status::user_error(str_cat("input '", input, "': \"shape\" holds ", describe(d),
                                        "; dimensions are integers >= 0"));
    }
    dims.push_back(d.get<int64_t>());
  }
  return dims;
}

const json* member(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

Result<std::string> string_member(const json& object, const char* key, std::string_view what) {
  const json* value = member(object, key);
  if (value == nullptr) return Status::user_error(str_cat(what, " has no \"", key, "\""));
  if (!value->is_string()) {
    return Status::user_error(str_cat(what, ": \"", key, "\" must be a string, got ", describe(*value)));
  }
  return value->get<std::string>();
}

// The raw bytes after the JSON header, handed out input by input in order.
struct BinaryData {
  std::string_view bytes;
  size_t used = 0;
};

// "parameters": {"binary_data_size": N} of an input, if any.
Result<std::optional<size_t>> binary_data_size(const json& entry, const std::string& what) {
  const json* params = member(entry, "parameters");
  if (params == nullptr) return std::optional<size_t>();
  if (!params->is_object()) return Status::user_error(str_cat(what, ": \"parameters\" must be an object"));
  const json* size = member(*params, "binary_data_size");
  if (size == nullptr) return std::optional<size_t>();
  if (!size->is_number_unsigned()) {
    return Status::user_error(str_cat(what, ": \"binary_data_size\" must be an integer >= 0, got ", describe(*size)));
  }
  return std::optional<size_t>(size->get<uint64_t>());
}

Status read_binary(const std::string& what, size_t size, BinaryData& binary, Tensor& tensor) {
  if (size != tensor.nbytes()) {
    return Status::user_error(str_cat(what, ": binary_data_size is ", size, " bytes but shape ",
                                      shape_to_string(make_shape(tensor.dims())), " of ", dtype_name(tensor.dtype()),
                                      " needs ", tensor.nbytes()));
  }
  if (binary.bytes.size() - binary.used < size) {
    return Status::user_error(str_cat(what, ": the body ends ", size - (binary.bytes.size() - binary.used),
                                      " bytes before its binary data does"));
  }
  if (size > 0) std::memcpy(tensor.raw_data(), binary.bytes.data() + binary.used, size);
  binary.used += size;
  if (tensor.dtype() == DType::kBool) {
    for (int64_t i = 0; i < tensor.numel(); ++i) {
      const auto byte = static_cast<const uint8_t*>(tensor.raw_data())[i];
      if (byte > 1) return Status::user_error(str_cat(what, ": BOOL element ", i, " is byte ", +byte, ", not 0 or 1"));
    }
  }
  return Status::ok();
}

Result<Tensor> parse_input(const json& entry, const Session& session, std::set<std::string>& seen,
                           BinaryData& binary) {
  if (!entry.is_object()) {
    return Status::user_error(str_cat("each of \"inputs\" must be an object, got ", describe(entry)));
  }
  OPFUSE_ASSIGN_OR_RETURN(std::string name, string_member(entry, "name", "an input"));
  const TensorSignature* sig = nullptr;
  std::string known;
  for (const auto& s : session.inputs()) {
    if (s.name == name) sig = &s;
    known += str_cat(known.empty() ? "" : ", ", s.name);
  }
  if (sig == nullptr) {
    return Status::user_error(str_cat("unknown input '", name, "'; the model's inputs are ", known));
  }
  if (!seen.insert(name).second) return Status::user_error(str_cat("input '", name, "' is given twice"));
  const std::string what = str_cat("input '", name, "'");
  OPFUSE_ASSIGN_OR_RETURN(std::string datatype, string_member(entry, "datatype", what));
  const auto dtype = parse_protocol_datatype(datatype);
  if (!dtype) return Status::user_error(str_cat(what, ": unknown datatype '", datatype, "'"));
  if (*dtype != sig->dtype) {
    return Status::user_error(str_cat(what, ": datatype ", datatype, " but the model takes ",
                                      protocol_datatype(sig->dtype).value_or(std::string(dtype_name(sig->dtype)))));
  }
  const json* shape = member(entry, "shape");
  if (shape == nullptr) return Status::user_error(str_cat(what, " has no \"shape\""));
  OPFUSE_ASSIGN_OR_RETURN(auto dims, parse_shape(name, *shape));
  OPFUSE_TRY(check_shape(*sig, dims));
  OPFUSE_ASSIGN_OR_RETURN(auto binary_size, binary_data_size(entry, what));
  const json* data = member(entry, "data");
  if (binary_size && data != nullptr) {
    return Status::user_error(str_cat(what, " has both \"data\" and binary data (binary_data_size)"));
  }
  if (!binary_size && data == nullptr) return Status::user_error(str_cat(what, " has no \"data\""));
  if (data != nullptr && !data->is_array()) return Status::user_error(str_cat(what, ": \"data\" must be an array"));
  // zeros() refuses element counts that overflow or pass the allocation cap, before any work.
  OPFUSE_ASSIGN_OR_RETURN(Tensor tensor, Tensor::zeros(*dtype, dims, what));
  if (binary_size) {
    OPFUSE_TRY(read_binary(what, *binary_size, binary, tensor));
    return tensor;
  }
  DataReader reader(name, tensor);
  OPFUSE_TRY(reader.read(*data));
  OPFUSE_TRY(reader.finish());
  return tensor;
}

template <typename T>
void append_integers(std::string& out, const Tensor& t) {
  char buffer[32];
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (i) out += ',';
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, t.data<T>()[i]);
    out.append(buffer, end);
  }
}

template <typename T>
void append_floats(std::string& out, const Tensor& t) {
  char buffer[64];
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (i) out += ',';
    double x;
    if constexpr (std::is_same_v<T, Half>) {
      x = half_to_float(t.data<Half>()[i]);
    } else {
      x = t.data<T>()[i];
    }
    if (std::isnan(x)) {
      out += "\"NaN\"";
    } else if (std::isinf(x)) {
      out += x > 0 ? "\"Infinity\"" : "\"-Infinity\"";
    } else if constexpr (std::is_same_v<T, double>) {
      out.append(buffer, std::to_chars(buffer, buffer + sizeof buffer, x).ptr);
    } else {  // shortest text that reads back as the same float
      out.append(buffer, std::to_chars(buffer, buffer + sizeof buffer, static_cast<float>(x)).ptr);
    }
  }
}

void append_data(std::string& out, const Tensor& t) {
  switch (t.dtype()) {
    case DType::kF32: append_floats<float>(out, t); break;
    case DType::kF64: append_floats<double>(out, t); break;
    case DType::kF16: append_floats<Half>(out, t); break;
    case DType::kI8: append_integers<int8_t>(out, t); break;
    case DType::kI16: append_integers<int16_t>(out, t); break;
    case DType::kI32: append_integers<int32_t>(out, t); break;
    case DType::kI64: append_integers<int64_t>(out, t); break;
    case DType::kU8: append_integers<uint8_t>(out, t); break;
    case DType::kU16: append_integers<uint16_t>(out, t); break;
    case DType::kU32: append_integers<uint32_t>(out, t); break;
    case DType::kU64: append_integers<uint64_t>(out, t); break;
    case DType::kBool:
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (i) out += ',';
        out += t.data<bool>()[i] ? "true" : "false";
      }
      break;
    case DType::kUndefined: break;
  }
}

json tensor_metadata(const TensorSignature& sig) {
  json shape = json::array();
  if (sig.shape) {
    for (const Dim& d : *sig.shape) shape.push_back(d.is_known() ? d.value() : -1);
  } else {
    shape.push_back(-1);
  }
  return {{"name", sig.name},
          {"datatype", protocol_datatype(sig.dtype).value_or(std::string(dtype_name(sig.dtype)))},
          {"shape", shape}};
}

}  // namespace

std::optional<std::string> protocol_datatype(DType dtype) {
  for (const auto& d : kDatatypes) {
    if (d.dtype == dtype) return d.name;
  }
  return std::nullopt;
}

std::optional<DType> parse_protocol_datatype(std::string_view name) {
  for (const auto& d : kDatatypes) {
    if (d.name == name) return d.dtype;
  }
  return std::nullopt;
}

Result<InferRequest> parse_infer_request(std::string_view body, std::optional<size_t> header_length,
                                         const Session& session) {
  if (header_length && *header_length > body.size()) {
    return Status::user_error(str_cat("Inference-Header-Content-Length is ", *header_length,
                                      " but the body has only ", body.size(), " bytes"));
  }
  BinaryData binary{header_length ? body.substr(*header_length) : std::string_view()};
  const std::string_view header = header_length ? body.substr(0, *header_length) : body;
  // Binary data sent without the header that says where it starts: say what is missing.
  if (const size_t nul = header.find('\0'); nul != std::string_view::npos) {
    return Status::user_error(str_cat("malformed JSON: a NUL byte at offset ", nul,
                                      " (binary data needs the Inference-Header-Content-Length header)"));
  }
  OPFUSE_ASSIGN_OR_RETURN(json root, parse_json(header));
  if (!root.is_object()) return Status::user_error("the request body must be a JSON object");
  InferRequest request;
  if (const json* id = member(root, "id")) {
    if (!id->is_string()) return Status::user_error(str_cat("\"id\" must be a string, got ", describe(*id)));
    request.id = id->get<std::string>();
  }
  const json* inputs = member(root, "inputs");
  if (inputs == nullptr || !inputs->is_array()) {
    return Status::user_error("the request needs \"inputs\": an array of {name, shape, datatype, data}");
  }
  std::set<std::string> seen;
  for (const json& entry : *inputs) {
    OPFUSE_ASSIGN_OR_RETURN(Tensor tensor, parse_input(entry, session, seen, binary));
    request.inputs.emplace(entry["name"].get<std::string>(), std::move(tensor));
  }
  if (binary.used != binary.bytes.size()) {
    return Status::user_error(str_cat("the body has ", binary.bytes.size() - binary.used,
                                      " bytes of binary data beyond what the inputs' binary_data_size claim"));
  }
  for (const auto& sig : session.inputs()) {
    if (!seen.count(sig.name)) {
      return Status::user_error(str_cat("missing input '", sig.name, "' (", sig.to_string(), ")"));
    }
  }
  if (const json* params = member(root, "parameters")) {
    if (!params->is_object()) return Status::user_error("\"parameters\" must be an object");
    if (const json* flag = member(*params, "binary_data_output")) {
      if (!flag->is_boolean()) return Status::user_error("\"binary_data_output\" must be true or false");
      request.all_outputs_binary = flag->get<bool>();
    }
  }
  if (const json* outputs = member(root, "outputs")) {
    if (!outputs->is_array()) return Status::user_error("\"outputs\" must be an array of {name}");
    for (const json& entry : *outputs) {
      if (!entry.is_object()) {
        return Status::user_error(str_cat("each of \"outputs\" must be an object, got ", describe(entry)));
      }
      OPFUSE_ASSIGN_OR_RETURN(std::string name, string_member(entry, "name", "a requested output"));
      bool known = false;
      std::string names;
      for (const auto& sig : session.outputs()) {
        known = known || sig.name == name;
        names += str_cat(names.empty() ? "" : ", ", sig.name);
      }
      if (!known) {
        return Status::user_error(str_cat("unknown output '", name, "'; the model's outputs are ", names));
      }
      if (const json* params = member(entry, "parameters")) {
        const json* flag = params->is_object() ? member(*params, "binary_data") : nullptr;
        if (flag != nullptr && !flag->is_boolean()) {
          return Status::user_error(str_cat("output '", name, "': \"binary_data\" must be true or false"));
        }
        if (flag != nullptr && flag->get<bool>()) request.binary_outputs.insert(name);
      }
      request.outputs.push_back(std::move(name));
    }
  }
  return request;
}

InferResponse infer_response(const std::string& model, const std::string& version, const InferRequest& request,
                             const TensorMap& outputs, const Session& session) {
  std::vector<std::string> names = request.outputs;
  if (names.empty()) {
    for (const auto& sig : session.outputs()) names.push_back(sig.name);
  }
  std::string out = str_cat("{\"model_name\":", json(model).dump(), ",\"model_version\":", json(version).dump());
  if (!request.id.empty()) out += str_cat(",\"id\":", json(request.id).dump());
  out += ",\"outputs\":[";
  std::vector<const Tensor*> binary;
  for (size_t i = 0; i < names.size(); ++i) {
    const Tensor& t = outputs.at(names[i]);
    out += str_cat(i ? "," : "", "{\"name\":", json(names[i]).dump(), ",\"datatype\":\"",
                   protocol_datatype(t.dtype()).value_or("BYTES"), "\",\"shape\":", json(t.dims()).dump());
    if (request.all_outputs_binary || request.binary_outputs.count(names[i])) {
      out += str_cat(",\"parameters\":{\"binary_data_size\":", t.nbytes(), "}}");
      binary.push_back(&t);
      continue;
    }
    out += ",\"data\":[";
    append_data(out, t);
    out += "]}";
  }
  out += "]}";
  if (binary.empty()) return {std::move(out), 0};
  const size_t header_length = out.size();
  for (const Tensor* t : binary) out.append(static_cast<const char*>(t->raw_data()), t->nbytes());
  return {std::move(out), header_length};
}

nlohmann::json model_metadata_json(const std::string& model, const std::vector<std::string>& versions,
                                   const Session& session) {
  json inputs = json::array(), outputs = json::array();
  for (const auto& sig : session.inputs()) inputs.push_back(tensor_metadata(sig));
  for (const auto& sig : session.outputs()) outputs.push_back(tensor_metadata(sig));
  return {{"name", model}, {"versions", versions}, {"platform", "onnx_onnxv1"},
          {"inputs", inputs}, {"outputs", outputs}};
}

std::string error_json(std::string_view message) {
  // A message may quote bytes of a malformed request: invalid UTF-8 is replaced, not thrown on.
  return json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace opfuse::serving
