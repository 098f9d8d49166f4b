#include "frontend/onnx/external_data.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>

namespace opfuse::onnx_import {
namespace {

Result<uint64_t> parse_u64(const std::string& text, const std::string& key,
                           const std::string& what) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return Status::user_error(
        str_cat(what, ": external data ", key, " '", text, "' is not a non-negative integer"));
  }
  return v;
}

// A location must stay inside the model's directory: relative, without ".." components.
// Both separators are checked so a Windows-made model cannot sneak "..\\" through.
Status check_location(const std::string& location, const std::string& what) {
  if (location.empty()) {
    return Status::user_error(str_cat(what, ": external data has no location"));
  }
  if (location.front() == '/' || location.front() == '\\' ||
      (location.size() > 1 && location[1] == ':')) {
    return Status::user_error(str_cat(what, ": external data location '", location,
                                      "' is an absolute path; it must be relative to the model"));
  }
  size_t start = 0;
  while (start <= location.size()) {
    size_t end = location.find_first_of("/\\", start);
    if (end == std::string::npos) end = location.size();
    if (location.compare(start, end - start, "..") == 0 && end - start == 2) {
      return Status::user_error(
          str_cat(what, ": external data location '", location,
                  "' contains '..'; it must stay inside the model directory"));
    }
    start = end + 1;
  }
  return Status::ok();
}

// The location passed the textual check, but a symlink (the file, or a directory on the way)
// can still lead out of the model directory: compare the resolved paths, component by component,
// and read from the resolved path so a symlink swapped in later is not followed either.
Status check_inside(const std::string& base_dir, ExternalDataRef& ref, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path base = fs::canonical(base_dir, ec);
  if (ec) {
    return Status::user_error(str_cat(what, ": cannot resolve the model directory '", base_dir,
                                      "': ", ec.message()));
  }
  const fs::path target = fs::canonical(ref.path, ec);
  if (ec) {
    return Status::user_error(str_cat(what, ": cannot resolve external data file '", ref.path,
                                      "': ", ec.message()));
  }
  auto [base_end, target_it] = std::mismatch(base.begin(), base.end(), target.begin(), target.end());
  if (base_end != base.end()) {
    return Status::user_error(str_cat(what, ": external data location '", ref.location,
                                      "' resolves to '", target.string(),
                                      "', outside the model directory '", base.string(),
                                      "' (through a symbolic link)"));
  }
  ref.path = target.string();
  return Status::ok();
}

}  // namespace

Result<ExternalDataRef> resolve_external_data(const onnx::TensorProto& proto,
                                              const std::string& base_dir,
                                              const std::string& what) {
  ExternalDataRef ref;
  bool has_length = false;
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location") {
      ref.location = entry.value();
    } else if (entry.key() == "offset") {
      OPFUSE_ASSIGN_OR_RETURN(ref.offset, parse_u64(entry.value(), "offset", what));
    } else if (entry.key() == "length") {
      OPFUSE_ASSIGN_OR_RETURN(ref.length, parse_u64(entry.value(), "length", what));
      has_length = true;
    }
    // "checksum" and unknown keys carry no semantics we need.
  }
  OPFUSE_TRY(check_location(ref.location, what));
  if (base_dir.empty()) {
    return Status::user_error(str_cat(what, ": external data file '", ref.location,
                                      "' cannot be read: the model was not loaded from a file"));
  }
  ref.path = (std::filesystem::path(base_dir) / ref.location).string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(ref.path, ec)) {
    return Status::user_error(str_cat(what, ": external data file '", ref.path,
                                      "' does not exist or is not a regular file"));
  }
  OPFUSE_TRY(check_inside(base_dir, ref, what));
  const uint64_t file_size = std::filesystem::file_size(ref.path, ec);
  if (ec) {
    return Status::user_error(str_cat(what, ": cannot read the size of external data file '",
                                      ref.path, "': ", ec.message()));
  }
  if (ref.offset > file_size) {
    return Status::user_error(str_cat(what, ": external data offset ", ref.offset,
                                      " is beyond the end of '", ref.path, "' (", file_size,
                                      " bytes)"));
  }
  if (!has_length) ref.length = file_size - ref.offset;
  if (ref.length > file_size - ref.offset) {
    return Status::user_error(str_cat(what, ": external data range [", ref.offset, ", +",
                                      ref.length, ") is beyond the end of '", ref.path, "' (",
                                      file_size, " bytes)"));
  }
  return ref;
}

Status read_external_data(const ExternalDataRef& ref, void* dst, const std::string& what) {
  std::ifstream in(ref.path, std::ios::binary);
  if (!in) {
    return Status::user_error(str_cat(what, ": cannot open external data file '", ref.path, "'"));
  }
  in.seekg(static_cast<std::streamoff>(ref.offset));
  in.read(static_cast<char*>(dst), static_cast<std::streamsize>(ref.length));
  if (!in || static_cast<uint64_t>(in.gcount()) != ref.length) {
    return Status::user_error(str_cat(what, ": reading ", ref.length,
                                      " bytes from external data file '", ref.path, "' at offset ",
                                      ref.offset, " failed"));
  }
  return Status::ok();
}

}  // namespace opfuse::onnx_import
