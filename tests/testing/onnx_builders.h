// Building ONNX ModelProtos by hand in tests (crafted and hostile models): value infos, nodes and
// initializers, written once for every test that needs them.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace opfuse::testing_onnx {

// A dim of a declared shape: a size, a symbol, or (the empty symbol) neither: unknown.
using DeclaredDim = std::variant<int64_t, std::string>;

inline void add_symbolic_value_info(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list,
                                    const std::string& name, const std::vector<DeclaredDim>& dims,
                                    int elem_type = onnx::TensorProto::FLOAT) {
  auto* v = list->Add();
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  auto* shape = t->mutable_shape();
  for (const DeclaredDim& d : dims) {
    auto* dim = shape->add_dim();
    if (const auto* size = std::get_if<int64_t>(&d)) {
      dim->set_dim_value(*size);
    } else if (!std::get<std::string>(d).empty()) {
      dim->set_dim_param(std::get<std::string>(d));
    }
  }
}

inline void add_value_info(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list,
                           const std::string& name, const std::vector<int64_t>& dims,
                           int elem_type = onnx::TensorProto::FLOAT) {
  add_symbolic_value_info(list, name, std::vector<DeclaredDim>(dims.begin(), dims.end()), elem_type);
}

inline onnx::NodeProto* add_node(onnx::ModelProto& m, const std::string& op, std::vector<std::string> in,
                                 std::vector<std::string> out, const std::string& name = "",
                                 const std::string& domain = "") {
  auto* n = m.mutable_graph()->add_node();
  n->set_op_type(op);
  if (!domain.empty()) n->set_domain(domain);
  n->set_name(name);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

// An f32 initializer with `values.size()` float_data entries (which may disagree with dims).
inline onnx::TensorProto* add_float_initializer(onnx::ModelProto& m, const std::string& name,
                                                const std::vector<int64_t>& dims,
                                                const std::vector<float>& values) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
  return t;
}

// An initializer of `data_type` whose data is the bytes `raw` (raw_data), which may disagree
// with dims: a short or a huge claim.
inline onnx::TensorProto* add_raw_initializer(onnx::ModelProto& m, const std::string& name, int data_type,
                                              const std::vector<int64_t>& dims, std::string raw) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(data_type);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::move(raw));
  return t;
}

}  // namespace opfuse::testing_onnx
