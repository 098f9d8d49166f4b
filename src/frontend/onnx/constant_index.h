// Where each constant tensor of a model file's main graph lies in the file, found by walking the
// protobuf wire format: a session reads the weights it released again one by one
// (OnnxFileSource::read_constants) instead of parsing and rebuilding the whole model.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace opfuse::onnx_import {

// Bytes within the file.
struct MessageSpan {
  size_t offset = 0;
  size_t size = 0;
};

struct ConstantSpan {
  MessageSpan tensor;  // the serialized TensorProto
  // Its raw_data field when it has exactly one: the field as encoded (tag, length, bytes) and
  // the bytes alone. A reader parses the rest and copies the bytes straight from the file,
  // without the copy into the message (a page fault per 4 KiB, 11 us each on a KVM guest).
  struct RawData {
    MessageSpan field;
    MessageSpan bytes;
  };
  std::optional<RawData> raw_data;
  bool from_constant_node = false;  // a Constant node's value, not an initializer
};

// The TensorProtos of the main graph's initializers, and of its Constant nodes' `value`
// attributes (how Paddle exports weights), by the name of the value they define. Only tags and
// lengths are read, never the weights' bytes, so it costs microseconds per constant whatever
// its size. Empty when the bytes are not well-formed protobuf (a reader then falls back to
// parsing the model).
std::unordered_map<std::string, ConstantSpan> index_constants(std::string_view model);

// `message` re-encoded without the fields at `cuts` (whole fields as encoded, nested at any
// depth, such as ConstantSpan::RawData::field), the lengths of the messages around them
// adjusted: what protobuf then parses without copying the weights. Spans are offsets into
// `message`; each must be a field index_constants found in it.
std::string cut_fields(std::string_view message, std::vector<MessageSpan> cuts);

}  // namespace opfuse::onnx_import
