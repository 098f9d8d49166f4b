// The printer half of the text IR (docs/text-ir.md). Output is canonical: graph inputs in the
// header, then constants in value order, then nodes in graph order, then `return`; attributes
// sorted by name. Whatever it prints, text_parser.cc reads back to an equal graph.
#include <cstring>

#include "ir/text_format.h"
#include "ir/text_lexer.h"
#include "ops/registry.h"

namespace opfuse {
namespace {

using text::format_double;
using text::format_float;
using text::format_half;
using text::ident_or_quoted;
using text::quote;
using text::sigil_name;

std::string dim_text(const Dim& d) {
  if (d.is_known()) return std::to_string(d.value());
  if (d.is_symbolic()) return ident_or_quoted(d.symbol_name());
  return "?";
}

std::string shape_text(const std::optional<Shape>& shape) {
  if (!shape) return "[*]";
  std::string out = "[";
  for (size_t i = 0; i < shape->size(); ++i) {
    if (i) out += ",";
    out += dim_text((*shape)[i]);
  }
  return out + "]";
}

// "f32[2,batch]", "?[3]" (dtype unknown, shape known), "" when nothing is known.
std::string type_text(DType dtype, const std::optional<Shape>& shape) {
  if (dtype == DType::kUndefined && !shape) return "";
  const std::string dt = dtype == DType::kUndefined ? "?" : std::string(dtype_name(dtype));
  return dt + shape_text(shape);
}

std::string element_text(const Tensor& t, int64_t i) {
  return visit_dtype(t.dtype(), [&](auto tag) -> std::string {
    using T = decltype(tag);
    const T v = t.data<T>()[i];
    if constexpr (std::is_same_v<T, bool>) {
      return v ? "true" : "false";
    } else if constexpr (std::is_same_v<T, Half>) {
      return format_half(v);
    } else if constexpr (std::is_same_v<T, float>) {
      return format_float(v);
    } else if constexpr (std::is_same_v<T, double>) {
      return format_double(v);
    } else {
      return std::to_string(v);
    }
  });
}

bool all_elements_equal(const Tensor& t) {
  const size_t size = dtype_size(t.dtype());
  const auto* bytes = static_cast<const unsigned char*>(t.raw_data());
  for (int64_t i = 1; i < t.numel(); ++i) {
    if (std::memcmp(bytes, bytes + i * size, size) != 0) return false;
  }
  return true;
}

// The data part of a constant or tensor attribute: "[1, 2]", "splat 0" or "elided".
std::string tensor_data_text(const Tensor& t, const PrintOptions& options) {
  if (t.raw_data() == nullptr && t.numel() > 0) return "released";  // Graph::release_constant_data; not parseable
  if (t.numel() > 1 && all_elements_equal(t)) return "splat " + element_text(t, 0);
  if (t.numel() > options.max_constant_elements) return "elided";
  std::string out = "[";
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (i) out += ", ";
    out += element_text(t, i);
  }
  return out + "]";
}

template <typename T, typename Fn>
std::string list_text(const std::vector<T>& items, std::string_view empty_type, Fn fn) {
  if (items.empty()) return str_cat(empty_type, " []");
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += fn(items[i]);
  }
  return out + "]";
}

std::string graph_text(const Graph& graph, const PrintOptions& options, const std::string& indent);

std::string attr_text(const AttrValue& value, const PrintOptions& options, const std::string& indent) {
  switch (attr_type_of(value)) {
    case AttrType::kInt: return std::to_string(std::get<int64_t>(value));
    case AttrType::kFloat: return format_float(std::get<float>(value), /*force_float=*/true);
    case AttrType::kString: return quote(std::get<std::string>(value));
    case AttrType::kInts:
      return list_text(std::get<std::vector<int64_t>>(value), "ints",
                       [](int64_t v) { return std::to_string(v); });
    case AttrType::kFloats:
      return list_text(std::get<std::vector<float>>(value), "floats",
                       [](float v) { return format_float(v, true); });
    case AttrType::kStrings:
      return list_text(std::get<std::vector<std::string>>(value), "strings",
                       [](const std::string& v) { return quote(v); });
    case AttrType::kTensor: {
      const Tensor& t = std::get<Tensor>(value);
      if (!t.defined()) return "tensor<undefined>";  // not parseable; only a broken graph has it
      return str_cat("tensor<", type_text(t.dtype(), t.shape()), "> ",
                     tensor_data_text(t, options));
    }
    case AttrType::kGraph: {
      const GraphAttr& g = std::get<GraphAttr>(value);
      return g ? graph_text(*g, options, indent + "  ") : "graph<null>";  // only a broken node has null
    }
  }
  return "?";
}

std::string value_ref(const Value* v) { return v ? sigil_name('%', v->name()) : "_"; }

// "%x: f32[2]" or just "%x" when nothing is known about its type.
std::string value_def(const Value* v) {
  if (!v) return "_";
  const std::string type = type_text(v->dtype, v->shape);
  return type.empty() ? value_ref(v) : value_ref(v) + ": " + type;
}

std::string constant_rhs(const Tensor& t, const PrintOptions& options) {
  return "const " + tensor_data_text(t, options);
}

std::string constant_def(const Value* v, const PrintOptions& options) {
  const Tensor& t = *v->constant();
  // The declared type is the tensor's (a constant value's type always is).
  return str_cat(value_ref(v), ": ", type_text(t.dtype(), t.shape()), " = ",
                 constant_rhs(t, options));
}

std::string node_text(const Node& node, const PrintOptions& options, const std::string& indent) {
  std::string out;
  for (size_t i = 0; i < node.outputs().size(); ++i) {
    out += (i ? ", " : "") + value_def(node.output(i));
  }
  if (!out.empty()) out += " = ";
  if (!node.domain().empty()) out += ident_or_quoted(node.domain()) + "::";
  out += ident_or_quoted(node.op_type()) + "(";
  for (size_t i = 0; i < node.inputs().size(); ++i) {
    out += (i ? ", " : "") + value_ref(node.input(i));
  }
  out += ")";
  if (!node.attrs.empty()) {
    out += " {";
    bool first = true;
    for (const auto& [name, value] : node.attrs) {
      out += str_cat(first ? "" : ", ", ident_or_quoted(name), " = ", attr_text(value, options, indent));
      first = false;
    }
    out += "}";
  }
  if (options.node_names && node.name() != node.op_type()) {
    out += ' ';  // appended apart: GCC 12 warns (-Wrestrict) on " " + std::string here
    out += sigil_name('#', node.name());
  }
  return out;
}

std::string opset_text(const std::map<std::string, int64_t>& imports) {
  if (imports.empty()) return "";
  std::string out = " opset ";
  bool first = true;
  for (const auto& [domain, version] : imports) {
    if (!first) out += ", ";
    first = false;
    if (!domain.empty()) out += ident_or_quoted(domain) + " ";
    out += std::to_string(version);
  }
  return out;
}


// A graph's text; `indent` prefixes its inner lines (a subgraph prints inside its node's line).
std::string graph_text(const Graph& graph, const PrintOptions& options, const std::string& indent) {
  std::string out = str_cat("graph ", text::sigil_name('@', graph.name),
                            opset_text(graph.opset_imports), " (");
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Value* v = graph.inputs()[i];
    out += (i ? ", " : "") + value_def(v);
    // An input with an initializer: a default value the caller may override.
    if (v && v->is_constant()) out += " = " + constant_rhs(*v->constant(), options);
  }
  out += ")";
  if (graph.captured_inputs > 0) out += str_cat(" captures ", graph.captured_inputs);
  out += " {\n";
  const std::string inner = indent + "  ";
  for (const Value* v : graph.values()) {
    if (v->is_constant() && !v->is_graph_input()) out += inner + constant_def(v, options) + "\n";
  }
  for (const Node* node : graph.nodes()) out += inner + node_text(*node, options, inner) + "\n";
  out += inner + "return";
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    out += (i ? ", " : " ") + value_ref(graph.outputs()[i]);
  }
  return out + "\n" + indent + "}";
}

}  // namespace

std::string print_graph(const Graph& graph, const PrintOptions& options) {
  return graph_text(graph, options, "") + "\n";
}

}  // namespace opfuse
