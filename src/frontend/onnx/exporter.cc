#include "frontend/onnx/exporter.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "ops/op_def.h"
#include "ops/registry.h"

namespace opfuse {
namespace {

using onnx::TensorProto;

int32_t onnx_elem_type(DType t) {
  switch (t) {
    case DType::kF32: return TensorProto::FLOAT;
    case DType::kF16: return TensorProto::FLOAT16;
    case DType::kF64: return TensorProto::DOUBLE;
    case DType::kI64: return TensorProto::INT64;
    case DType::kI32: return TensorProto::INT32;
    case DType::kI16: return TensorProto::INT16;
    case DType::kI8: return TensorProto::INT8;
    case DType::kU64: return TensorProto::UINT64;
    case DType::kU32: return TensorProto::UINT32;
    case DType::kU16: return TensorProto::UINT16;
    case DType::kU8: return TensorProto::UINT8;
    case DType::kBool: return TensorProto::BOOL;
    case DType::kUndefined: break;
  }
  return TensorProto::UNDEFINED;
}

// Dense little-endian raw_data (the machines opfuse runs on are little-endian, as ONNX requires).
void tensor_to_proto(const Tensor& t, const std::string& name, TensorProto& proto) {
  proto.set_name(name);
  proto.set_data_type(onnx_elem_type(t.dtype()));
  for (int64_t d : t.dims()) proto.add_dims(d);
  proto.set_raw_data(t.raw_data(), t.nbytes());
}

void set_type(const Value& v, onnx::ValueInfoProto& info) {
  info.set_name(v.name());
  auto* tt = info.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx_elem_type(v.dtype));
  if (!v.shape) return;
  auto* shape = tt->mutable_shape();
  for (const Dim& d : *v.shape) {
    auto* dim = shape->add_dim();
    if (d.is_known()) dim->set_dim_value(d.value());
    else if (d.is_symbolic()) dim->set_dim_param(d.symbol_name());
  }
}

Status write_graph(const Graph& graph, const std::vector<std::string>& captured_names, onnx::GraphProto& g);

Status attr_to_proto(const std::string& name, const AttrValue& value, const Node& node,
                     const std::vector<std::string>& captured_names, onnx::AttributeProto& a) {
  a.set_name(name);
  using onnx::AttributeProto;
  switch (attr_type_of(value)) {
    case AttrType::kInt:
      a.set_type(AttributeProto::INT);
      a.set_i(std::get<int64_t>(value));
      break;
    case AttrType::kFloat:
      a.set_type(AttributeProto::FLOAT);
      a.set_f(std::get<float>(value));
      break;
    case AttrType::kString:
      a.set_type(AttributeProto::STRING);
      a.set_s(std::get<std::string>(value));
      break;
    case AttrType::kInts:
      a.set_type(AttributeProto::INTS);
      for (int64_t i : std::get<std::vector<int64_t>>(value)) a.add_ints(i);
      break;
    case AttrType::kFloats:
      a.set_type(AttributeProto::FLOATS);
      for (float f : std::get<std::vector<float>>(value)) a.add_floats(f);
      break;
    case AttrType::kStrings:
      a.set_type(AttributeProto::STRINGS);
      for (const std::string& s : std::get<std::vector<std::string>>(value)) a.add_strings(s);
      break;
    case AttrType::kTensor: {
      const Tensor& t = std::get<Tensor>(value);
      if (onnx_elem_type(t.dtype()) == TensorProto::UNDEFINED) {
        return Status::user_error(str_cat(node.describe(), ": attribute '", name, "' has a tensor of undefined dtype"));
      }
      a.set_type(AttributeProto::TENSOR);
      tensor_to_proto(t, "", *a.mutable_t());
      break;
    }
    case AttrType::kGraph: {
      const GraphAttr& body = std::get<GraphAttr>(value);
      if (!body) return Status::internal_error(str_cat(node.describe(), ": attribute '", name, "' has no graph"));
      a.set_type(AttributeProto::GRAPH);
      a.mutable_g()->set_name(body->name);
      OPFUSE_TRY(write_graph(*body, captured_names, *a.mutable_g()));
      break;
    }
  }
  return Status::ok();
}

// The nodes, inputs, outputs and initializers of `graph`. A subgraph's captured inputs are not
// inputs in ONNX but reads of the enclosing graph's values: they are written under those values'
// names (`captured_names`, the owning node's trailing inputs).
Status write_graph(const Graph& graph, const std::vector<std::string>& captured_names, onnx::GraphProto& g) {
  std::map<const Value*, std::string> renamed;
  const size_t formal = graph.inputs().size() - graph.captured_inputs;
  for (size_t i = formal; i < graph.inputs().size(); ++i) renamed[graph.inputs()[i]] = captured_names.at(i - formal);
  auto name_of = [&](const Value* v) {
    auto it = renamed.find(v);
    return it == renamed.end() ? v->name() : it->second;
  };
  for (size_t i = 0; i < formal; ++i) set_type(*graph.inputs()[i], *g.add_input());
  for (const Value* out : graph.outputs()) {
    set_type(*out, *g.add_output());
    g.mutable_output()->rbegin()->set_name(name_of(out));
  }
  // Initializers: every constant some node or output uses (graph inputs with a default too).
  for (const Value* v : graph.values()) {
    if (!v->is_constant() || (v->uses().empty() && !v->is_graph_output())) continue;
    const Tensor& t = *v->constant();
    if (onnx_elem_type(t.dtype()) == TensorProto::UNDEFINED) {
      return Status::user_error(str_cat("constant '", v->name(), "' has an undefined dtype"));
    }
    tensor_to_proto(t, v->name(), *g.add_initializer());
  }
  for (const Node* node : graph.nodes()) {
    onnx::NodeProto* n = g.add_node();
    n->set_name(node->name());
    n->set_op_type(node->op_type());
    if (!node->domain().empty()) n->set_domain(node->domain());
    // The inputs a node passes to its subgraphs' captures are not ONNX inputs.
    std::vector<std::string> captured;
    size_t explicit_inputs = node->inputs().size();
    for (const auto& [name, value] : node->attrs) {
      if (const auto* body = std::get_if<GraphAttr>(&value); body && *body) {
        explicit_inputs = node->inputs().size() - (*body)->captured_inputs;
      }
    }
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      const Value* in = node->input(i);
      if (i < explicit_inputs) n->add_input(in ? name_of(in) : "");
      else captured.push_back(name_of(in));
    }
    for (const Value* out : node->outputs()) {
      // Unused optional outputs are left unnamed, as ONNX spells "absent".
      n->add_output(out && (!out->uses().empty() || out->is_graph_output()) ? out->name() : "");
    }
    while (n->output_size() > 1 && n->output(n->output_size() - 1).empty()) n->mutable_output()->RemoveLast();
    if (n->output_size() == 1 && n->output(0).empty()) n->set_output(0, node->output(0)->name());
    for (const auto& [name, value] : node->attrs) {
      OPFUSE_TRY(attr_to_proto(name, value, *node, captured, *n->add_attribute()));
    }
    for (const Value* out : node->outputs()) {
      if (out && out->shape && !out->uses().empty() && !out->is_graph_output() && out->dtype != DType::kUndefined) {
        set_type(*out, *g.add_value_info());
      }
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::string> export_onnx(const Graph& graph, const OnnxExportOptions& options) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("opfuse");
  model.set_producer_version("0.1");
  if (!options.target.empty()) {
    onnx::StringStringEntryProto* entry = model.add_metadata_props();
    entry->set_key(kTargetMetadataKey);
    entry->set_value(options.target);
  }
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name(options.graph_name);

  // Opsets: the smallest ai.onnx opset >= 13 that every standard op used supports.
  int64_t opset = 13, cap = INT64_MAX;
  std::string capped_by;
  std::set<std::string> custom_domains;
  for (const Node* node : graph.nodes()) {
    if (!node->domain().empty()) {
      if (options.standard_only) {
        return Status::user_error(str_cat(node->describe(), " is in domain '", node->domain(),
                                          "', which --standard-only does not allow"));
      }
      custom_domains.insert(node->domain());
      continue;
    }
    opset = std::max<int64_t>(opset, node->def().min_opset);
    if (node->def().max_opset < cap) {
      cap = node->def().max_opset;
      capped_by = node->op_type();
    }
  }
  if (opset > cap) {
    return Status::user_error(str_cat("cannot export: the graph needs ai.onnx opset ", opset,
                                      " but opfuse implements ", capped_by, " only up to opset ", cap));
  }
  auto* main_opset = model.add_opset_import();
  main_opset->set_domain("");
  main_opset->set_version(opset);
  for (const std::string& domain : custom_domains) {
    auto* o = model.add_opset_import();
    o->set_domain(domain);
    o->set_version(1);
  }

  OPFUSE_TRY(write_graph(graph, {}, *g));
  std::string bytes;
  if (!model.SerializeToString(&bytes)) {
    return Status::user_error("the model is too large to serialize as one ONNX file (over 2 GB)");
  }
  return bytes;
}

}  // namespace opfuse
