#include "frontend/onnx/importer.h"

#include <google/protobuf/io/coded_stream.h>

#include <climits>
#include <filesystem>

#include "core/file_io.h"
#include "core/target.h"
#include "frontend/onnx/exporter.h"
#include "frontend/onnx/constant_if.h"
#include "frontend/onnx/functions.h"
#include "frontend/onnx/graph_builder.h"

namespace opfuse {
namespace {

// Protobuf messages are limited to 2 GiB (sizes are ints); bigger models must use external data.
constexpr uint64_t kMaxModelBytes = static_cast<uint64_t>(INT_MAX);

Result<onnx::ModelProto> parse_model(std::string_view bytes, const std::string& source) {
  const std::string invalid =
      str_cat("'", source, "' is not a valid ONNX model (protobuf parse failed");
  if (bytes.empty()) return Status::user_error(invalid + ": the file is empty)");
  if (bytes.size() > kMaxModelBytes) {
    return Status::user_error(str_cat("'", source, "' is ", bytes.size(),
                                      " bytes; ONNX models above 2 GiB are not supported "
                                      "(store the weights as external data)"));
  }
  google::protobuf::io::CodedInputStream stream(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                static_cast<int>(bytes.size()));
  // The default limit has varied between protobuf releases; allow the whole 2 GiB.
  stream.SetTotalBytesLimit(INT_MAX);
  onnx::ModelProto model;
  if (!model.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage()) {
    return Status::user_error(invalid + ")");
  }
  // Protobuf accepts many byte strings as some message; a model has at least a graph and an IR
  // version, which random or truncated bytes rarely produce.
  if (!model.has_graph() || model.ir_version() <= 0) {
    return Status::user_error(invalid + ": no graph or IR version)");
  }
  return model;
}

// A model `opfuse optimize` wrote for a higher ISA tier than this process compiles for holds
// kernels' choices (blocked layouts, post-op placement) that run badly or not at all here.
Status check_optimised_target(const onnx::ModelProto& model, const std::string& source) {
  for (const auto& entry : model.metadata_props()) {
    if (entry.key() != kTargetMetadataKey) continue;
    const auto tier = parse_isa_tier(entry.value());
    const Target here = active_target();
    if (!tier) {
      return Status::user_error(str_cat(source, ": optimised for an unknown target '", entry.value(), "'"));
    }
    if (*tier > here.isa) {
      return Status::user_error(str_cat(source, " was optimised for ", entry.value(), ", but this process runs for ",
                                        isa_tier_name(here.isa), ": optimise the original model here "
                                        "(opfuse optimize MODEL --target ", isa_tier_name(here.isa), ")"));
    }
  }
  return Status::ok();
}

Result<Graph> load(onnx::ModelProto model, const std::string& base_dir, const OnnxLoadOptions& options,
                   const std::string& source) {
  OPFUSE_TRY(check_optimised_target(model, source));
  // Model-local functions are composite ops: inline them so the fuser sees their primitives.
  if (Status s = onnx_import::inline_local_functions(model); !s.is_ok()) return s.with_context(source);
  // An If on a constant condition is the branch it takes.
  if (Status s = onnx_import::inline_constant_ifs(model); !s.is_ok()) return s.with_context(source);
  Result<Graph> graph = onnx_import::build_graph(model, base_dir, options);
  if (!graph.is_ok()) return graph.status().with_context(source);
  return graph;
}

// The model in the file at `path`, parsed from the file mapped into memory; the mapping ends on
// return (the bytes are the model's then).
Result<onnx::ModelProto> parse_model_file(const std::string& path) {
  OPFUSE_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path, "model file"));
  return parse_model(file.bytes(), path);
}

}  // namespace

Result<Graph> load_onnx_file(const std::string& path, const OnnxLoadOptions& options) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return Status::user_error(str_cat("model file '", path, "' does not exist"));
  }
  if (std::filesystem::is_directory(path, ec)) {
    return Status::user_error(str_cat("model path '", path, "' is a directory, not a file"));
  }
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return Status::user_error(str_cat("cannot read model file '", path, "': ", ec.message()));
  if (size > kMaxModelBytes) {
    return Status::user_error(str_cat("model file '", path, "' is ", size,
                                      " bytes; ONNX models above 2 GiB are not supported "
                                      "(store the weights as external data)"));
  }
  OPFUSE_ASSIGN_OR_RETURN(onnx::ModelProto model, parse_model_file(path));
  std::string dir = std::filesystem::path(path).parent_path().string();
  return load(std::move(model), dir.empty() ? "." : dir, options, path);
}

Result<Graph> load_onnx_bytes(std::string_view bytes, const std::string& base_dir,
                              const OnnxLoadOptions& options, const std::string& source_name) {
  OPFUSE_ASSIGN_OR_RETURN(onnx::ModelProto model, parse_model(bytes, source_name));
  return load(std::move(model), base_dir, options, source_name);
}

}  // namespace opfuse
