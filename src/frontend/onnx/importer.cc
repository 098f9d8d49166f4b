#include "frontend/onnx/importer.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
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

// A mapped model file for protobuf, a chunk at a time. When the parser asks for the next chunk
// it has copied what it needed from the earlier ones (weights into the message's strings), so
// their pages are dropped: the file's bytes and the parsed model are not resident together
// (BERT-base's 340 MB of weights were resident twice while it loaded).
class DroppingFileStream final : public google::protobuf::io::ZeroCopyInputStream {
 public:
  explicit DroppingFileStream(const MappedFile& file) : file_(file) {}
  bool Next(const void** data, int* size) override {
    const std::string_view bytes = file_.bytes();
    if (pos_ >= bytes.size()) return false;
    file_.drop_pages_before(pos_);
    const size_t n = std::min(kChunk, bytes.size() - pos_);
    *data = bytes.data() + pos_;
    *size = static_cast<int>(n);
    pos_ += n;
    return true;
  }
  void BackUp(int count) override { pos_ -= static_cast<size_t>(count); }
  bool Skip(int count) override {
    const size_t left = file_.bytes().size() - pos_;
    if (static_cast<size_t>(count) > left) {
      pos_ += left;
      return false;
    }
    pos_ += static_cast<size_t>(count);
    return true;
  }
  int64_t ByteCount() const override { return static_cast<int64_t>(pos_); }

 private:
  static constexpr size_t kChunk = size_t{1} << 20;
  const MappedFile& file_;
  size_t pos_ = 0;
};

Result<onnx::ModelProto> parse_model(google::protobuf::io::ZeroCopyInputStream& input, size_t size,
                                     const std::string& source) {
  const std::string invalid =
      str_cat("'", source, "' is not a valid ONNX model (protobuf parse failed");
  if (size == 0) return Status::user_error(invalid + ": the file is empty)");
  if (size > kMaxModelBytes) {
    return Status::user_error(str_cat("'", source, "' is ", size,
                                      " bytes; ONNX models above 2 GiB are not supported "
                                      "(store the weights as external data)"));
  }
  google::protobuf::io::CodedInputStream stream(&input);
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
  const ScopedMappedTensors mapped;  // the weights, which a compile may free as it packs them
  OPFUSE_TRY(check_optimised_target(model, source));
  // Model-local functions are composite ops: inline them so the fuser sees their primitives.
  if (Status s = onnx_import::inline_local_functions(model); !s.is_ok()) return s.with_context(source);
  // An If on a constant condition is the branch it takes.
  if (Status s = onnx_import::inline_constant_ifs(model); !s.is_ok()) return s.with_context(source);
  Result<Graph> graph = onnx_import::build_graph(model, base_dir, options);
  if (!graph.is_ok()) return graph.status().with_context(source);
  return graph;
}

// The model in `file`, parsed from the file mapped into memory; the mapping ends on return (the
// bytes are the model's then).
Result<onnx::ModelProto> parse_model_file(const OpenFile& file) {
  OPFUSE_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::map(file, "model file"));
  DroppingFileStream stream(mapped);
  return parse_model(stream, mapped.bytes().size(), file.path());
}

// A loaded model's file, held open: the graph's constants can be read again from the bytes it
// was loaded from even once its path is deleted or replaced by another file. (A rewrite of the
// same file in place is caught by the reader comparing digests: Session's restore.)
class OnnxFileSource final : public ConstantSource {
 public:
  OnnxFileSource(OpenFile file, std::string base_dir, const OnnxLoadOptions& options)
      : file_(std::move(file)), base_dir_(std::move(base_dir)), options_(options) {}
  Result<Graph> reload() const override {
    OPFUSE_ASSIGN_OR_RETURN(onnx::ModelProto model, parse_model_file(file_));
    return load(std::move(model), base_dir_, options_, file_.path());
  }
  std::string describe() const override { return str_cat("'", file_.path(), "'"); }

 private:
  OpenFile file_;
  std::string base_dir_;
  OnnxLoadOptions options_;
};

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
  OPFUSE_ASSIGN_OR_RETURN(OpenFile file, OpenFile::open(path, "model file"));
  OPFUSE_ASSIGN_OR_RETURN(onnx::ModelProto model, parse_model_file(file));
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  OPFUSE_ASSIGN_OR_RETURN(Graph graph, load(std::move(model), dir, options, path));
  // External data is read again from this folder, wherever the process is by then.
  if (auto absolute = std::filesystem::absolute(dir, ec); !ec) dir = absolute.string();
  graph.constant_source = std::make_shared<OnnxFileSource>(std::move(file), std::move(dir), options);
  return graph;
}

Result<Graph> load_onnx_bytes(std::string_view bytes, const std::string& base_dir,
                              const OnnxLoadOptions& options, const std::string& source_name) {
  google::protobuf::io::ArrayInputStream stream(bytes.data(), static_cast<int>(std::min<size_t>(bytes.size(), INT_MAX)));
  OPFUSE_ASSIGN_OR_RETURN(onnx::ModelProto model, parse_model(stream, bytes.size(), source_name));
  return load(std::move(model), base_dir, options, source_name);
}

}  // namespace opfuse
