#include "frontend/onnx/constant_index.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace opfuse::onnx_import {
namespace {

// Field numbers in onnx.proto.
constexpr uint32_t kModelGraph = 7;
constexpr uint32_t kGraphNode = 1;
constexpr uint32_t kGraphInitializer = 5;
constexpr uint32_t kNodeOutput = 2;
constexpr uint32_t kNodeOpType = 4;
constexpr uint32_t kNodeAttribute = 5;
constexpr uint32_t kNodeDomain = 7;
constexpr uint32_t kAttributeName = 1;
constexpr uint32_t kAttributeTensor = 5;
constexpr uint32_t kTensorName = 8;
constexpr uint32_t kTensorRawData = 9;

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// One field of a message: its number, wire type, for length-delimited fields the bytes, and
// the whole field as encoded.
struct Field {
  uint32_t number = 0;
  uint32_t wire_type = 0;
  std::string_view bytes;
  std::string_view encoding;
};

class FieldReader {
 public:
  explicit FieldReader(std::string_view message) : pos_(message.data()), end_(message.data() + message.size()) {}

  bool done() const { return pos_ == end_; }

  // The next field, or nullopt when the bytes are malformed (then every later call fails too).
  std::optional<Field> next() {
    const char* start = pos_;
    const std::optional<uint64_t> tag = varint();
    if (!tag || (*tag >> 3) == 0 || (*tag >> 3) > UINT32_MAX) return fail();
    Field field{static_cast<uint32_t>(*tag >> 3), static_cast<uint32_t>(*tag & 7), {}, {}};
    bool ok = false;
    switch (field.wire_type) {
      case kVarint:
        ok = varint().has_value();
        break;
      case kFixed64:
        ok = skip(8);
        break;
      case kFixed32:
        ok = skip(4);
        break;
      case kLengthDelimited: {
        const std::optional<uint64_t> size = varint();
        ok = size && *size <= static_cast<uint64_t>(end_ - pos_);
        if (ok) {
          field.bytes = std::string_view(pos_, static_cast<size_t>(*size));
          pos_ += *size;
        }
        break;
      }
      default:  // groups: not used by ONNX
        break;
    }
    if (!ok) return fail();
    field.encoding = std::string_view(start, static_cast<size_t>(pos_ - start));
    return field;
  }

 private:
  std::optional<uint64_t> varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64 && pos_ < end_; shift += 7) {
      const auto byte = static_cast<uint8_t>(*pos_++);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    return std::nullopt;
  }
  bool skip(size_t n) {
    if (static_cast<size_t>(end_ - pos_) < n) return false;
    pos_ += n;
    return true;
  }
  std::optional<Field> fail() {
    pos_ = end_;
    return std::nullopt;
  }

  const char* pos_;
  const char* end_;
};

// Calls `visit` with every field of `message`; false when it is malformed or `visit` says so.
template <typename Visit>
bool for_each_field(std::string_view message, Visit visit) {
  FieldReader reader(message);
  while (!reader.done()) {
    const std::optional<Field> field = reader.next();
    if (!field || !visit(*field)) return false;
  }
  return true;
}

// The same for the length-delimited fields numbered `number` (messages, strings, bytes).
template <typename Visit>
bool for_each_bytes(std::string_view message, uint32_t number, Visit visit) {
  return for_each_field(message, [&](const Field& field) {
    return field.number != number || field.wire_type != kLengthDelimited || visit(field.bytes);
  });
}

// The last value of a string field (protobuf's rule for a field given twice), if any.
std::optional<std::string_view> last_string(std::string_view message, uint32_t number, bool& well_formed) {
  std::optional<std::string_view> value;
  well_formed = for_each_bytes(message, number, [&](std::string_view bytes) {
    value = bytes;
    return true;
  }) && well_formed;
  return value;
}

MessageSpan span_of(std::string_view bytes, std::string_view model) {
  return {static_cast<size_t>(bytes.data() - model.data()), bytes.size()};
}

// Where a TensorProto and its raw_data lie; false when it is malformed.
bool locate_tensor(std::string_view tensor, std::string_view model, ConstantSpan& span) {
  span = {span_of(tensor, model), std::nullopt};
  int raw_fields = 0;
  const bool well_formed = for_each_field(tensor, [&](const Field& field) {
    if (field.number == kTensorRawData && field.wire_type == kLengthDelimited) {
      ++raw_fields;
      span.raw_data = ConstantSpan::RawData{span_of(field.encoding, model), span_of(field.bytes, model)};
    }
    return true;
  });
  if (raw_fields != 1) span.raw_data.reset();  // several: protobuf keeps the last, the reader parses them all
  return well_formed;
}

// A Constant node's output name and the TensorProto of its `value`, if it is one.
bool index_constant_node(std::string_view node, std::string_view model,
                         std::unordered_map<std::string, ConstantSpan>& index) {
  bool well_formed = true;
  const auto op_type = last_string(node, kNodeOpType, well_formed);
  const auto domain = last_string(node, kNodeDomain, well_formed);
  if (!well_formed) return false;
  if (op_type != "Constant" || (domain && !domain->empty() && *domain != "ai.onnx")) return true;
  std::vector<std::string_view> outputs;
  std::optional<std::string_view> value;
  well_formed = for_each_bytes(node, kNodeOutput, [&](std::string_view name) {
    outputs.push_back(name);
    return true;
  }) && for_each_bytes(node, kNodeAttribute, [&](std::string_view attribute) {
    bool ok = true;
    const auto name = last_string(attribute, kAttributeName, ok);
    const auto tensor = last_string(attribute, kAttributeTensor, ok);
    if (name == "value" && tensor) value = tensor;
    return ok;
  });
  if (!well_formed || outputs.size() != 1 || !value) return well_formed;
  ConstantSpan& span = index[std::string(outputs[0])];
  if (!locate_tensor(*value, model, span)) return false;
  span.from_constant_node = true;
  return true;
}

void append_varint(uint64_t value, std::string& out) {
  for (; value >= 0x80; value >>= 7) out.push_back(static_cast<char>(value | 0x80));
  out.push_back(static_cast<char>(value));
}

// Appends `message` without the fields at `cuts` (sorted, offsets from `base`) to `out`.
void append_without(std::string_view message, const char* base, std::span<const MessageSpan> cuts, std::string& out) {
  FieldReader reader(message);
  while (!reader.done()) {
    const std::optional<Field> field = reader.next();
    if (!field) return;  // not reached for a message index_constants walked
    const size_t begin = static_cast<size_t>(field->encoding.data() - base);
    const size_t end = begin + field->encoding.size();
    // The cuts inside this field.
    const auto first = std::lower_bound(cuts.begin(), cuts.end(), begin,
                                        [](const MessageSpan& c, size_t offset) { return c.offset < offset; });
    auto last = first;
    while (last != cuts.end() && last->offset + last->size <= end) ++last;
    if (first == last) {
      out.append(field->encoding);
    } else if (first->offset == begin && first->size == field->encoding.size()) {
      // the field itself is cut
    } else {
      std::string inner;
      append_without(field->bytes, base, std::span(first, last), inner);
      append_varint(uint64_t{field->number} << 3 | kLengthDelimited, out);
      append_varint(inner.size(), out);
      out.append(inner);
    }
  }
}

}  // namespace

std::string cut_fields(std::string_view message, std::vector<MessageSpan> cuts) {
  std::sort(cuts.begin(), cuts.end(), [](const MessageSpan& a, const MessageSpan& b) { return a.offset < b.offset; });
  size_t kept = message.size();
  for (const MessageSpan& cut : cuts) kept -= std::min(cut.size, kept);
  std::string out;
  out.reserve(kept);
  append_without(message, message.data(), cuts, out);
  return out;
}

std::unordered_map<std::string, ConstantSpan> index_constants(std::string_view model) {
  std::unordered_map<std::string, ConstantSpan> index;
  // A message field given twice is merged by protobuf, so every graph field counts.
  const bool ok = for_each_bytes(model, kModelGraph, [&](std::string_view graph) {
    return for_each_field(graph, [&](const Field& field) {
      if (field.wire_type != kLengthDelimited) return true;
      if (field.number == kGraphNode) return index_constant_node(field.bytes, model, index);
      if (field.number != kGraphInitializer) return true;
      bool well_formed = true;
      const auto name = last_string(field.bytes, kTensorName, well_formed);
      if (!well_formed || !name) return well_formed;
      return locate_tensor(field.bytes, model, index[std::string(*name)]);
    });
  });
  if (!ok) index.clear();
  return index;
}

}  // namespace opfuse::onnx_import
