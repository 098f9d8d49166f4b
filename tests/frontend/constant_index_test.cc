// index_constants: where a model file's weights lie, found without parsing them, so that a
// session reads released weights one by one.
#include "frontend/onnx/constant_index.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "testing/onnx_builders.h"

namespace opfuse::onnx_import {
namespace {

using testing_onnx::add_float_initializer;
using testing_onnx::add_node;
using testing_onnx::add_raw_initializer;

onnx::ModelProto model_with_constants() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_doc_string("bytes before the graph, so that offsets are not zero");
  add_raw_initializer(m, "w", onnx::TensorProto::FLOAT, {2}, std::string("\0\0\x80\x3f\0\0\0\x40", 8));
  add_float_initializer(m, "b", {3}, {1, 2, 3});
  auto* value = add_node(m, "Constant", {}, {"c"})->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_float_data(7);
  auto* scalar = add_node(m, "Constant", {}, {"s"})->add_attribute();  // no TensorProto to point at
  scalar->set_name("value_float");
  scalar->set_type(onnx::AttributeProto::FLOAT);
  scalar->set_f(2);
  auto* custom = add_node(m, "Constant", {}, {"d"}, "", "com.example")->add_attribute();  // not ONNX's Constant
  custom->set_name("value");
  *custom->mutable_t() = m.graph().initializer(0);
  add_node(m, "Relu", {"w"}, {"y"});
  return m;
}

std::string_view bytes_of(const std::string& bytes, const MessageSpan& span) {
  EXPECT_LE(span.offset + span.size, bytes.size());
  return std::string_view(bytes).substr(span.offset, span.size);
}

onnx::TensorProto parse_span(const std::string& bytes, const ConstantSpan& span) {
  onnx::TensorProto t;
  const std::string_view message = bytes_of(bytes, span.tensor);
  EXPECT_TRUE(t.ParseFromArray(message.data(), static_cast<int>(message.size())));
  if (span.raw_data) {
    // The raw_data field lies inside the message, its bytes inside the field, and they are
    // the message's raw_data.
    const auto [field, data] = *span.raw_data;
    EXPECT_GE(field.offset, span.tensor.offset);
    EXPECT_LE(field.offset + field.size, span.tensor.offset + span.tensor.size);
    EXPECT_GT(data.offset, field.offset);
    EXPECT_EQ(data.offset + data.size, field.offset + field.size);
    EXPECT_EQ(bytes_of(bytes, data), t.raw_data());
  }
  return t;
}

TEST(ConstantIndex, FindsInitializersAndConstantValues) {
  const std::string bytes = model_with_constants().SerializeAsString();
  const auto index = index_constants(bytes);
  ASSERT_EQ(index.size(), 3u) << "w, b and c; not the scalar Constant nor another domain's";
  ASSERT_TRUE(index.at("w").raw_data);
  EXPECT_FALSE(index.at("b").raw_data);
  EXPECT_EQ(parse_span(bytes, index.at("w")).raw_data(), std::string("\0\0\x80\x3f\0\0\0\x40", 8));
  const onnx::TensorProto b = parse_span(bytes, index.at("b"));
  EXPECT_EQ(b.name(), "b");
  ASSERT_EQ(b.float_data_size(), 3);
  EXPECT_EQ(b.float_data(2), 3.0f);
  const onnx::TensorProto c = parse_span(bytes, index.at("c"));
  ASSERT_EQ(c.float_data_size(), 1);
  EXPECT_EQ(c.float_data(0), 7.0f);
}

TEST(ConstantIndex, AGraphGivenTwiceIsMergedAsProtobufDoes) {
  onnx::ModelProto more;
  add_float_initializer(more, "extra", {1}, {5});
  const std::string bytes = model_with_constants().SerializeAsString() + more.SerializeAsString();
  onnx::ModelProto merged;
  ASSERT_TRUE(merged.ParseFromString(bytes));
  ASSERT_EQ(merged.graph().initializer_size(), 3);
  const auto index = index_constants(bytes);
  EXPECT_EQ(index.size(), 4u);
  EXPECT_EQ(parse_span(bytes, index.at("extra")).float_data(0), 5.0f);
  EXPECT_EQ(parse_span(bytes, index.at("w")).name(), "w");
}

// A length-delimited field as protobuf encodes it.
std::string encode_field(uint32_t number, const std::string& payload) {
  std::string out;
  for (uint64_t v : {uint64_t{number} << 3 | 2, uint64_t{payload.size()}}) {
    for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>(v | 0x80));
    out.push_back(static_cast<char>(v));
  }
  return out + payload;
}

TEST(ConstantIndex, ATensorWithTwoRawDataFieldsIsLeftToTheParser) {
  onnx::TensorProto first;
  first.set_name("t");
  first.set_data_type(onnx::TensorProto::FLOAT);
  first.add_dims(1);
  first.set_raw_data(std::string(4, 'a'));
  onnx::TensorProto second;
  second.set_raw_data(std::string(4, 'b'));  // merged: protobuf keeps this one
  const std::string tensor = first.SerializeAsString() + second.SerializeAsString();
  const std::string bytes = encode_field(7, encode_field(5, tensor));
  const auto index = index_constants(bytes);
  ASSERT_EQ(index.count("t"), 1u);
  EXPECT_FALSE(index.at("t").raw_data);
  EXPECT_EQ(parse_span(bytes, index.at("t")).raw_data(), std::string(4, 'b'));
}

TEST(ConstantIndex, CutFieldsRemovesRawDataAtAnyDepth) {
  onnx::ModelProto m = model_with_constants();
  auto* node_value = add_node(m, "Constant", {}, {"k"})->add_attribute();
  node_value->set_name("value");
  node_value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  node_value->mutable_t()->add_dims(300);
  node_value->mutable_t()->set_raw_data(std::string(1200, 'k'));  // a length of two varint bytes
  const std::string bytes = m.SerializeAsString();
  const auto index = index_constants(bytes);
  ASSERT_TRUE(index.at("k").raw_data);
  EXPECT_TRUE(index.at("k").from_constant_node);
  EXPECT_FALSE(index.at("w").from_constant_node);
  const std::string cut = cut_fields(bytes, {index.at("k").raw_data->field, index.at("w").raw_data->field});
  EXPECT_LT(cut.size(), bytes.size() - 1200 - 8) << "both payloads gone, and their tags and lengths";
  onnx::ModelProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(cut));
  m.mutable_graph()->mutable_initializer(0)->clear_raw_data();
  m.mutable_graph()->mutable_node()->rbegin()->mutable_attribute(0)->mutable_t()->clear_raw_data();
  EXPECT_EQ(parsed.SerializeAsString(), m.SerializeAsString());
  EXPECT_EQ(cut_fields(bytes, {}), bytes);
}

TEST(ConstantIndex, MalformedBytesGiveNoIndex) {
  const std::string bytes = model_with_constants().SerializeAsString();
  EXPECT_TRUE(index_constants(bytes.substr(0, bytes.size() - 3)).empty()) << "truncated";
  EXPECT_TRUE(index_constants(std::string(64, '\xff')).empty()) << "a varint without end";
  EXPECT_TRUE(index_constants(std::string("\x3b\x01", 2)).empty()) << "a group";
  EXPECT_TRUE(index_constants("").empty());
}

}  // namespace
}  // namespace opfuse::onnx_import
