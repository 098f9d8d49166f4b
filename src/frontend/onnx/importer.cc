#include "frontend/onnx/importer.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/file_io.h"
#include "core/target.h"
#include "frontend/onnx/constant_if.h"
#include "frontend/onnx/constant_index.h"
#include "frontend/onnx/exporter.h"
#include "frontend/onnx/functions.h"
#include "frontend/onnx/graph_builder.h"
#include "frontend/onnx/tensor_proto.h"

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
                   const std::string& source, const onnx_import::CutRawData* cut) {
  const ScopedMappedTensors mapped;  // the weights, which a compile may free as it packs them
  OPFUSE_TRY(check_optimised_target(model, source));
  // Model-local functions are composite ops: inline them so the fuser sees their primitives.
  if (Status s = onnx_import::inline_local_functions(model); !s.is_ok()) return s.with_context(source);
  // An If on a constant condition is the branch it takes.
  if (Status s = onnx_import::inline_constant_ifs(model); !s.is_ok()) return s.with_context(source);
  Result<Graph> graph = onnx_import::build_graph(model, base_dir, options, cut);
  if (!graph.is_ok()) return graph.status().with_context(source);
  return graph;
}

// Initializers of this size and more are read from the mapped file straight into tensors, not
// copied into protobuf's strings first: that copy faulted in every page of the weights a second
// time (`opfuse info` on BERT-base: 90 thousand page faults and 2.75 s; 7.6 thousand and 0.98 s
// without it, on a KVM guest). Smaller ones are
// left to protobuf, and with them the one-element tensors rewrites of the parsed model read
// (constant_if.cc).
constexpr size_t kCutRawDataBytes = size_t{64} << 10;

// The model in `bytes` (a mapped file's, `mapped`, or a buffer's), the raw data of its large
// initializers cut out before protobuf parses it and read from `bytes` by build_graph.
Result<Graph> load_cut(std::string_view bytes, const MappedFile* mapped, const std::string& base_dir,
                       const OnnxLoadOptions& options, const std::string& source) {
  onnx_import::CutRawData cut{bytes, mapped, {}};
  std::vector<onnx_import::MessageSpan> fields;
  for (const auto& [name, span] : onnx_import::index_constants(bytes)) {
    if (span.from_constant_node || !span.raw_data || span.raw_data->bytes.size < kCutRawDataBytes) continue;
    cut.bytes.emplace(name, span.raw_data->bytes);
    fields.push_back(span.raw_data->field);
  }
  auto parse = [&]() -> Result<onnx::ModelProto> {
    if (!fields.empty()) {
      const std::string rest = onnx_import::cut_fields(bytes, std::move(fields));
      google::protobuf::io::ArrayInputStream stream(rest.data(), static_cast<int>(rest.size()));
      return parse_model(stream, bytes.size(), source);
    }
    if (mapped != nullptr) {
      DroppingFileStream stream(*mapped);
      return parse_model(stream, bytes.size(), source);
    }
    google::protobuf::io::ArrayInputStream stream(bytes.data(), static_cast<int>(std::min<size_t>(bytes.size(), INT_MAX)));
    return parse_model(stream, bytes.size(), source);
  };
  OPFUSE_ASSIGN_OR_RETURN(onnx::ModelProto model, parse());
  return load(std::move(model), base_dir, options, source, &cut);
}

// The model in `file`, loaded from the file mapped into memory; the mapping ends on return (the
// bytes are the graph's then).
Result<Graph> load_file(const OpenFile& file, const std::string& base_dir, const OnnxLoadOptions& options) {
  OPFUSE_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::map(file, "model file"));
  return load_cut(mapped.bytes(), &mapped, base_dir, options, file.path());
}

// A loaded model's file, held open: the graph's constants can be read again from the bytes it
// was loaded from even once its path is deleted or replaced by another file. (A rewrite of the
// same file in place is caught by the reader comparing digests: Session's restore.)
class OnnxFileSource final : public ConstantSource {
 public:
  OnnxFileSource(OpenFile file, std::string base_dir, const OnnxLoadOptions& options)
      : file_(std::move(file)), base_dir_(std::move(base_dir)), options_(options) {}
  Result<Graph> reload() const override { return load_file(file_, base_dir_, options_); }
  // The main graph's initializers and Constant values. The file is indexed afresh for each
  // call, so a rewritten file gives what it holds now.
  std::unordered_set<std::string> constants_read_alone() const override {
    std::unordered_set<std::string> names;
    Result<MappedFile> mapped = MappedFile::map(file_, "model file");
    if (!mapped.is_ok()) return names;
    for (const auto& [name, span] : onnx_import::index_constants(mapped->bytes())) names.insert(name);
    return names;
  }
  // Those among `names`, each parsed on its own from the bytes of its TensorProto instead of
  // parsing and rebuilding the whole model.
  std::unordered_map<std::string, Tensor> read_constants(const std::vector<std::string>& names) const override {
    std::unordered_map<std::string, Tensor> found;
    Result<MappedFile> mapped = MappedFile::map(file_, "model file");
    if (!mapped.is_ok()) return found;  // reload() reports it
    const std::string_view file = mapped->bytes();
    const auto index = onnx_import::index_constants(file);
    std::vector<std::pair<const onnx_import::ConstantSpan*, const std::string*>> spans;
    for (const std::string& name : names) {
      if (auto it = index.find(name); it != index.end()) spans.emplace_back(&it->second, &name);
    }
    // In file order, dropping the pages read, so that the file and the weights read from it
    // are not resident together.
    std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) { return a.first->tensor.offset < b.first->tensor.offset; });
    for (const auto& [span, name] : spans) {
      const auto [offset, size] = span->tensor;
      onnx::TensorProto proto;
      std::optional<std::string_view> raw_data;
      bool parsed = false;
      if (const auto& raw = span->raw_data) {
        // The message without its raw_data field, whose bytes go from the file to the tensor.
        const size_t field_end = raw->field.offset + raw->field.size;
        std::string rest(file.substr(offset, raw->field.offset - offset));
        rest.append(file.substr(field_end, offset + size - field_end));
        parsed = proto.ParseFromString(rest);
        raw_data = file.substr(raw->bytes.offset, raw->bytes.size);
      } else {
        parsed = proto.ParseFromArray(file.data() + offset, static_cast<int>(size));
      }
      if (parsed) {
        Result<Tensor> t = onnx_import::tensor_from_proto(proto, base_dir_, str_cat("constant '", *name, "'"), nullptr, raw_data);
        if (t.is_ok()) found.emplace(*name, std::move(*t));
      }
      mapped->drop_pages_before(offset + size);
    }
    return found;
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
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  OPFUSE_ASSIGN_OR_RETURN(Graph graph, load_file(file, dir, options));
  // External data is read again from this folder, wherever the process is by then.
  if (auto absolute = std::filesystem::absolute(dir, ec); !ec) dir = absolute.string();
  graph.constant_source = std::make_shared<OnnxFileSource>(std::move(file), std::move(dir), options);
  return graph;
}

Result<Graph> load_onnx_bytes(std::string_view bytes, const std::string& base_dir,
                              const OnnxLoadOptions& options, const std::string& source_name) {
  return load_cut(bytes, nullptr, base_dir, options, source_name);
}

}  // namespace opfuse
