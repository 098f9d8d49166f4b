#include "core/npy.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/file_io.h"

namespace opfuse {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

struct NpyDType {
  std::string_view descr;
  DType dtype;
};
// '<' little-endian, '|' not applicable (single byte).
constexpr NpyDType kNpyDTypes[] = {
    {"<f4", DType::kF32}, {"<f2", DType::kF16}, {"<f8", DType::kF64}, {"<i8", DType::kI64},
    {"<i4", DType::kI32}, {"<i2", DType::kI16}, {"|i1", DType::kI8},  {"<u8", DType::kU64},
    {"<u4", DType::kU32}, {"<u2", DType::kU16}, {"|u1", DType::kU8},  {"|b1", DType::kBool},
};

// Finds `'key': value` in the header dict and returns the raw value text.
Result<std::string> header_field(const std::string& header, const std::string& key,
                                 const std::string& what) {
  const std::string needle = "'" + key + "'";
  size_t pos = header.find(needle);
  if (pos == std::string::npos) {
    return Status::user_error(str_cat(what, ": .npy header has no '", key, "' field"));
  }
  pos = header.find(':', pos + needle.size());
  if (pos == std::string::npos) {
    return Status::user_error(str_cat(what, ": malformed .npy header"));
  }
  ++pos;
  while (pos < header.size() && header[pos] == ' ') ++pos;
  size_t end = pos;
  if (pos < header.size() && header[pos] == '(') {
    end = header.find(')', pos);
    if (end == std::string::npos) return Status::user_error(str_cat(what, ": malformed .npy shape"));
    ++end;
  } else {
    while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  }
  return header.substr(pos, end - pos);
}

Result<std::vector<int64_t>> parse_shape_tuple(const std::string& text, const std::string& what) {
  std::vector<int64_t> dims;
  std::string inner = text.substr(1, text.size() - 2);
  std::stringstream stream(inner);
  std::string item;
  while (std::getline(stream, item, ',')) {
    size_t b = item.find_first_not_of(' ');
    if (b == std::string::npos) continue;  // trailing comma of a 1-tuple
    item = item.substr(b, item.find_last_not_of(' ') - b + 1);
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos ||
        item.size() > 18) {
      return Status::user_error(str_cat(what, ": bad dim '", item, "' in .npy shape ", text));
    }
    dims.push_back(std::stoll(item));
  }
  return dims;
}

}  // namespace

Result<Tensor> parse_npy(std::string_view bytes, const std::string& what) {
  if (bytes.size() < 10 || bytes.substr(0, kMagic.size()) != kMagic) {
    return Status::user_error(str_cat(what, ": not a NumPy .npy file (bad magic)"));
  }
  const uint8_t major = static_cast<uint8_t>(bytes[6]);
  size_t header_len;
  size_t header_start;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return Status::user_error(str_cat(what, ": truncated .npy header"));
    uint32_t len;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    header_start = 12;
  } else {
    return Status::user_error(str_cat(what, ": unsupported .npy version ", int(major)));
  }
  if (header_start + header_len > bytes.size()) {
    return Status::user_error(str_cat(what, ": truncated .npy header"));
  }
  const std::string header(bytes.substr(header_start, header_len));
  OPFUSE_ASSIGN_OR_RETURN(std::string descr, header_field(header, "descr", what));
  OPFUSE_ASSIGN_OR_RETURN(std::string fortran, header_field(header, "fortran_order", what));
  OPFUSE_ASSIGN_OR_RETURN(std::string shape_text, header_field(header, "shape", what));
  if (fortran.rfind("False", 0) != 0) {
    return Status::user_error(str_cat(what, ": Fortran-order .npy arrays are not supported"));
  }
  if (descr.size() < 2) return Status::user_error(str_cat(what, ": bad .npy descr ", descr));
  descr = descr.substr(1, descr.size() - 2);  // strip quotes
  // numpy writes '<' for multi-byte and '|' for single-byte types; accept '=' as native (LE here).
  if (!descr.empty() && descr[0] == '=') descr[0] = '<';
  DType dtype = DType::kUndefined;
  for (const auto& d : kNpyDTypes) {
    if (d.descr == descr) dtype = d.dtype;
  }
  if (dtype == DType::kUndefined) {
    return Status::user_error(str_cat(what, ": unsupported .npy dtype '", descr,
                                      "' (supported: float16/32/64, (u)int8-64, bool; little-endian)"));
  }
  if (shape_text.size() < 2 || shape_text.front() != '(') {
    return Status::user_error(str_cat(what, ": bad .npy shape ", shape_text));
  }
  OPFUSE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, parse_shape_tuple(shape_text, what));
  OPFUSE_ASSIGN_OR_RETURN(int64_t numel, checked_numel(dims, what));
  const size_t data_start = header_start + header_len;
  const size_t available = bytes.size() - data_start;
  if (static_cast<uint64_t>(numel) > available / dtype_size(dtype)) {
    return Status::user_error(str_cat(what, ": .npy data is truncated: shape ", dims_to_string(dims),
                                      " needs ", numel * dtype_size(dtype), " bytes, file has ",
                                      available));
  }
  OPFUSE_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(dtype, dims, what));
  std::memcpy(t.raw_data(), bytes.data() + data_start, t.nbytes());
  return t;
}

Result<Tensor> read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::user_error(str_cat("cannot open '", path, "'"));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_npy(bytes, str_cat("'", path, "'"));
}

std::string encode_npy(const Tensor& tensor) {
  std::string_view descr = "<f4";
  for (const auto& d : kNpyDTypes) {
    if (d.dtype == tensor.dtype()) descr = d.descr;
  }
  std::string shape = "(";
  for (int64_t d : tensor.dims()) shape += std::to_string(d) + ",";
  if (tensor.rank() > 1) shape.pop_back();  // numpy writes (3,) for 1-D, (2, 3) otherwise
  shape += ")";
  std::string header =
      str_cat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Pad so the data starts on a 64-byte boundary; the header ends with a newline.
  const size_t unpadded = kMagic.size() + 4 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(static_cast<const char*>(tensor.raw_data()), tensor.nbytes());
  return out;
}

// A fixed "<path>.tmp" would clobber a user's file of that name and collide between concurrent
// writers; write_file_atomically uses a unique temporary name.
Status write_npy(const std::string& path, const Tensor& tensor, bool overwrite) {
  return write_file_atomically(path, encode_npy(tensor), overwrite);
}

}  // namespace opfuse
