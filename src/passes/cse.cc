// Common subexpression elimination: two pure nodes with the same op, domain, attributes (unset
// ones read as their defaults) and the same input values compute the same outputs, so the later
// one's uses move to the earlier: Op(a, b) ; Op(a, b) -> one Op(a, b). Small constants with equal
// dtype, dims and bytes are merged first, so nodes reading equal-but-distinct constants match.
#include <cstring>
#include <unordered_map>

#include "ops/op_def.h"
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace opfuse {
namespace {

// Constants up to this many elements are compared by content (bigger ones are weights, which are
// rarely duplicated, and hashing them every round would cost more than it saves).
constexpr int64_t kMaxMergedConstantElements = 1024;

void append_bytes(std::string& key, const void* data, size_t n) {
  key.append(static_cast<const char*>(data), n);
}

template <typename T>
void append_pod(std::string& key, const T& v) {
  append_bytes(key, &v, sizeof(v));
}

void append_tensor(std::string& key, const Tensor& t) {
  append_pod(key, t.dtype());
  append_pod(key, t.rank());
  for (int64_t d : t.dims()) append_pod(key, d);
  append_bytes(key, t.raw_data(), t.nbytes());
}

void append_string(std::string& key, const std::string& s) {
  append_pod(key, s.size());
  key += s;
}

// Bit-exact, so 0.0 and -0.0 (and NaN payloads) stay distinct, as they may behave differently.
void append_attr(std::string& key, const AttrValue& value) {
  append_pod(key, value.index());
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, int64_t> || std::is_same_v<V, float>) {
          append_pod(key, v);
        } else if constexpr (std::is_same_v<V, std::string>) {
          append_string(key, v);
        } else if constexpr (std::is_same_v<V, std::vector<int64_t>> ||
                             std::is_same_v<V, std::vector<float>>) {
          append_pod(key, v.size());
          append_bytes(key, v.data(), v.size() * sizeof(v[0]));
        } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
          append_pod(key, v.size());
          for (const std::string& s : v) append_string(key, s);
        } else if constexpr (std::is_same_v<V, GraphAttr>) {
          append_pod(key, v.get());  // the same body object: subgraphs are never compared deeply
        } else {
          append_tensor(key, v);
        }
      },
      value);
}

// Op, domain, every attribute (declared ones with their defaults filled in), input identities.
std::string node_key(const Node& node) {
  std::string key;
  append_string(key, node.domain());
  append_string(key, node.op_type());
  append_pod(key, node.outputs().size());
  Attributes attrs = node.attrs;
  for (const AttrSpec& spec : node.def().attrs) {
    if (!attrs.count(spec.name) && spec.default_value) attrs[spec.name] = *spec.default_value;
  }
  for (const auto& [name, value] : attrs) {
    append_string(key, name);
    append_attr(key, value);
  }
  append_pod(key, node.inputs().size());
  for (const Value* in : node.inputs()) append_pod(key, in);
  return key;
}

bool merge_constants(Graph& graph) {
  bool changed = false;
  std::unordered_map<std::string, Value*> seen;
  for (Value* v : graph.values()) {
    const Tensor* data = constant_data(v);
    if (data == nullptr || data->numel() > kMaxMergedConstantElements || v->uses().empty()) continue;
    std::string key;
    append_tensor(key, *data);
    auto [it, inserted] = seen.emplace(key, v);
    if (!inserted) changed |= replace_uses_keeping_outputs(graph, v, it->second);
  }
  return changed;
}

}  // namespace

Result<bool> run_cse_pass(Graph& graph, PassContext&) {
  OPFUSE_TRY(graph.topological_sort());
  bool changed = merge_constants(graph);
  std::unordered_map<std::string, Node*> seen;
  // Topological order: once a duplicate's uses move, its consumers' keys match in turn.
  for (Node* node : graph.nodes()) {
    if (!is_pure(*node) || node->outputs().empty()) continue;
    auto [it, inserted] = seen.emplace(node_key(*node), node);
    if (inserted) continue;
    Node* original = it->second;
    bool keeps_outputs = true;
    for (const Value* out : node->outputs()) keeps_outputs = keeps_outputs && !out->is_graph_output();
    if (!keeps_outputs) continue;  // moving its uses would rename a graph output
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      replace_uses_keeping_outputs(graph, node->output(i), original->output(i));
    }
    OPFUSE_TRY(graph.remove_node(node));
    changed = true;
  }
  return changed;
}

}  // namespace opfuse
