#include "frontend/onnx/tensor_proto.h"

#include <google/protobuf/io/coded_stream.h>

#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "frontend/onnx/external_data.h"

namespace opfuse::onnx_import {
namespace {

using onnx::TensorProto;

// Copies a repeated proto field into typed tensor storage, converting each element
// (int32_data carries i8/i16/u8/u16/bool and f16 bit patterns).
template <typename Dst, typename Field, typename Convert>
void copy_field(const Field& field, Tensor& t, Convert convert) {
  Dst* dst = t.data<Dst>();
  for (int i = 0; i < field.size(); ++i) dst[i] = convert(field.Get(i));
}

// The number of elements a typed field holds for `dtype`, or -1 if the dtype has no typed
// field (then only raw_data can carry it).
int64_t typed_field_size(const TensorProto& p, DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return p.float_data_size();
    case DType::kF64:
      return p.double_data_size();
    case DType::kI64:
      return p.int64_data_size();
    case DType::kU32:
    case DType::kU64:
      return p.uint64_data_size();
    case DType::kF16:
    case DType::kI32:
    case DType::kI16:
    case DType::kI8:
    case DType::kU16:
    case DType::kU8:
    case DType::kBool:
      return p.int32_data_size();
    case DType::kUndefined:
      break;
  }
  return -1;
}

const char* typed_field_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "float_data";
    case DType::kF64:
      return "double_data";
    case DType::kI64:
      return "int64_data";
    case DType::kU32:
    case DType::kU64:
      return "uint64_data";
    default:
      return "int32_data";
  }
}

void copy_typed_field(const TensorProto& p, Tensor& t) {
  auto same = [](auto v) { return v; };
  switch (t.dtype()) {
    case DType::kF32:
      copy_field<float>(p.float_data(), t, same);
      break;
    case DType::kF64:
      copy_field<double>(p.double_data(), t, same);
      break;
    case DType::kI64:
      copy_field<int64_t>(p.int64_data(), t, same);
      break;
    case DType::kU64:
      copy_field<uint64_t>(p.uint64_data(), t, same);
      break;
    case DType::kU32:
      copy_field<uint32_t>(p.uint64_data(), t, [](uint64_t v) { return static_cast<uint32_t>(v); });
      break;
    case DType::kF16:
      copy_field<Half>(p.int32_data(), t,
                       [](int32_t v) { return Half{static_cast<uint16_t>(v & 0xffff)}; });
      break;
    case DType::kI32:
      copy_field<int32_t>(p.int32_data(), t, same);
      break;
    case DType::kI16:
      copy_field<int16_t>(p.int32_data(), t, [](int32_t v) { return static_cast<int16_t>(v); });
      break;
    case DType::kI8:
      copy_field<int8_t>(p.int32_data(), t, [](int32_t v) { return static_cast<int8_t>(v); });
      break;
    case DType::kU16:
      copy_field<uint16_t>(p.int32_data(), t, [](int32_t v) { return static_cast<uint16_t>(v); });
      break;
    case DType::kU8:
      copy_field<uint8_t>(p.int32_data(), t, [](int32_t v) { return static_cast<uint8_t>(v); });
      break;
    case DType::kBool:
      copy_field<bool>(p.int32_data(), t, [](int32_t v) { return v != 0; });
      break;
    case DType::kUndefined:
      break;
  }
}

// Raw bytes are little-endian, as on every platform we build for. Bools are normalised to 0/1
// because any other byte value in a C++ bool is undefined behaviour.
void copy_raw(const void* src, Tensor& t) {
  std::memcpy(t.raw_data(), src, t.nbytes());
  if (t.dtype() == DType::kBool) {
    auto* bytes = static_cast<uint8_t*>(t.raw_data());
    for (int64_t i = 0; i < t.numel(); ++i) bytes[i] = bytes[i] != 0 ? 1 : 0;
  }
}

}  // namespace

std::string onnx_dtype_name(int32_t elem_type) {
  if (onnx::TensorProto_DataType_IsValid(elem_type)) {
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(elem_type));
  }
  return str_cat("<type ", elem_type, ">");
}

Result<DType> dtype_from_onnx(int32_t elem_type, const std::string& what) {
  switch (elem_type) {
    case TensorProto::FLOAT:
      return DType::kF32;
    case TensorProto::FLOAT16:
      return DType::kF16;
    case TensorProto::DOUBLE:
      return DType::kF64;
    case TensorProto::INT64:
      return DType::kI64;
    case TensorProto::INT32:
      return DType::kI32;
    case TensorProto::INT16:
      return DType::kI16;
    case TensorProto::INT8:
      return DType::kI8;
    case TensorProto::UINT64:
      return DType::kU64;
    case TensorProto::UINT32:
      return DType::kU32;
    case TensorProto::UINT16:
      return DType::kU16;
    case TensorProto::UINT8:
      return DType::kU8;
    case TensorProto::BOOL:
      return DType::kBool;
    case TensorProto::UNDEFINED:
      return Status::user_error(str_cat(what, " has no element type"));
    default:
      break;
  }
  return Status::user_error(
      str_cat(what, " has dtype ", onnx_dtype_name(elem_type), ", which is not supported"));
}

Status TensorBudget::charge(uint64_t bytes, const std::string& what) {
  if (max_tensor_bytes != 0 && bytes > max_tensor_bytes) {
    return Status::user_error(str_cat(what, " needs ", bytes,
                                      " bytes, above the cap of ", max_tensor_bytes,
                                      " bytes for one tensor"));
  }
  if (max_total_bytes != 0 && bytes > max_total_bytes - std::min(used_bytes, max_total_bytes)) {
    return Status::user_error(str_cat(what, " needs ", bytes, " bytes, which brings the model's ",
                                      "weights above the cap of ", max_total_bytes,
                                      " bytes (", used_bytes, " bytes read before it)"));
  }
  used_bytes += bytes;
  return Status::ok();
}

Result<Tensor> tensor_from_proto(const TensorProto& proto, const std::string& base_dir,
                                 const std::string& what, TensorBudget* budget,
                                 std::optional<std::string_view> raw_data) {
  if (!raw_data && proto.has_raw_data()) raw_data = proto.raw_data();
  if (proto.data_type() == TensorProto::STRING) {
    return Status::user_error(
        str_cat(what, " is a string tensor; string tensors are not supported"));
  }
  OPFUSE_ASSIGN_OR_RETURN(DType dtype, dtype_from_onnx(proto.data_type(), what));
  if (proto.has_segment()) {
    return Status::user_error(str_cat(what, " is a segmented tensor, which is not supported"));
  }
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  for (int64_t d : dims) {
    if (d < 0) return Status::user_error(str_cat(what, " has a negative dimension ", d));
  }
  OPFUSE_ASSIGN_OR_RETURN(int64_t numel, checked_numel(dims, what));
  const uint64_t elem = dtype_size(dtype);
  if (static_cast<uint64_t>(numel) > std::numeric_limits<uint64_t>::max() / elem) {
    return Status::user_error(str_cat(what, ": byte size of ", dims_to_string(dims), " overflows"));
  }
  const uint64_t nbytes = static_cast<uint64_t>(numel) * elem;
  auto size_error = [&](const std::string& source, uint64_t needed, uint64_t have,
                        const char* unit) {
    return Status::user_error(str_cat(what, ": ", dtype_name(dtype), dims_to_string(dims),
                                      " needs ", needed, " ", unit, " but its ", source, " holds ",
                                      have));
  };

  // Every size is checked before the allocation below: first against the bytes present, then
  // against the budget.
  auto charge = [&]() -> Status { return budget ? budget->charge(nbytes, what) : Status::ok(); };
  if (proto.data_location() == TensorProto::EXTERNAL) {
    OPFUSE_ASSIGN_OR_RETURN(ExternalDataRef ref, resolve_external_data(proto, base_dir, what));
    if (ref.length != nbytes) {
      return size_error(str_cat("external data in '", ref.location, "'"), nbytes, ref.length,
                        "bytes");
    }
    OPFUSE_TRY(charge());
    OPFUSE_ASSIGN_OR_RETURN(Tensor t, Tensor::uninitialized(dtype, dims, what));
    OPFUSE_TRY(read_external_data(ref, t.raw_data(), what));
    if (dtype == DType::kBool) copy_raw(t.raw_data(), t);
    return t;
  }
  if (raw_data) {
    if (raw_data->size() != nbytes) return size_error("raw_data", nbytes, raw_data->size(), "bytes");
    OPFUSE_TRY(charge());
    OPFUSE_ASSIGN_OR_RETURN(Tensor t, Tensor::uninitialized(dtype, dims, what));
    copy_raw(raw_data->data(), t);
    return t;
  }
  const int64_t have = typed_field_size(proto, dtype);
  if (have != numel) {
    return size_error(typed_field_name(dtype), static_cast<uint64_t>(numel),
                      static_cast<uint64_t>(have), "elements");
  }
  OPFUSE_TRY(charge());
  OPFUSE_ASSIGN_OR_RETURN(Tensor t, Tensor::uninitialized(dtype, dims, what));
  copy_typed_field(proto, t);
  return t;
}

Result<Tensor> read_tensor_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::user_error(str_cat("cannot open tensor file '", path, "'"));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    return Status::user_error(str_cat("tensor file '", path, "' is larger than 2 GiB"));
  }
  TensorProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Status::user_error(
        str_cat("'", path, "' is not a valid ONNX TensorProto (protobuf parse failed)"));
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  return tensor_from_proto(proto, dir.empty() ? "." : dir,
                           str_cat("tensor '", proto.name(), "' in '", path, "'"));
}

Result<DeclaredType> declared_type(const onnx::ValueInfoProto& info, const std::string& what) {
  DeclaredType out;
  if (!info.has_type()) return out;
  const onnx::TypeProto& type = info.type();
  switch (type.value_case()) {
    case onnx::TypeProto::kTensorType:
      break;
    case onnx::TypeProto::VALUE_NOT_SET:
      return out;
    case onnx::TypeProto::kSequenceType:
      return Status::user_error(str_cat(what, " is a sequence; sequence types are not supported"));
    case onnx::TypeProto::kMapType:
      return Status::user_error(str_cat(what, " is a map; map types are not supported"));
    case onnx::TypeProto::kOptionalType:
      return Status::user_error(str_cat(what, " is an optional; optional types are not supported"));
    default:
      return Status::user_error(str_cat(what, " has a non-tensor type, which is not supported"));
  }
  const auto& tensor_type = type.tensor_type();
  if (tensor_type.elem_type() != TensorProto::UNDEFINED) {
    if (tensor_type.elem_type() == TensorProto::STRING) {
      return Status::user_error(
          str_cat(what, " has dtype STRING; string tensors are not supported"));
    }
    OPFUSE_ASSIGN_OR_RETURN(out.dtype, dtype_from_onnx(tensor_type.elem_type(), what));
  }
  if (!tensor_type.has_shape()) return out;
  Shape shape;
  for (const auto& dim : tensor_type.shape().dim()) {
    if (dim.has_dim_value()) {
      if (dim.dim_value() < 0) {
        return Status::user_error(
            str_cat(what, " declares a negative dimension ", dim.dim_value()));
      }
      shape.push_back(Dim(dim.dim_value()));
    } else if (dim.has_dim_param() && !dim.dim_param().empty()) {
      shape.push_back(Dim::symbol(dim.dim_param()));
    } else {
      shape.push_back(Dim::unknown());
    }
  }
  out.shape = std::move(shape);
  return out;
}

}  // namespace opfuse::onnx_import
