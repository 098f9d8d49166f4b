#include "frontend/onnx/graph_builder.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "frontend/onnx/attributes.h"
#include "frontend/onnx/canonicalize.h"
#include "frontend/onnx/constant_node.h"
#include "frontend/onnx/opsets.h"
#include "frontend/onnx/outer_scope.h"
#include "frontend/onnx/tensor_proto.h"
#include "ops/registry.h"
#include "ops/infer_shapes.h"

namespace opfuse::onnx_import {
namespace {

class GraphBuilder {
 public:
  GraphBuilder(const onnx::GraphProto& proto, const std::string& base_dir,
               const OnnxLoadOptions& options, TensorBudget* budget)
      : proto_(proto), base_dir_(base_dir), options_(options), budget_(budget) {}

  // The top-level graph, `proto_` itself, handed over mutable: each initializer's raw data is
  // freed once read (build_graph's promise).
  void release_initializers_from(onnx::GraphProto* proto) { releasable_ = proto == &proto_ ? proto : nullptr; }
  // The top-level graph's initializers whose raw data was cut out of `proto_`.
  void read_cut_raw_data_from(const CutRawData* cut) { cut_ = cut; }

  Result<Graph> build(const onnx::ModelProto& model) {
    OPFUSE_ASSIGN_OR_RETURN(model_opsets_, read_opset_imports(model));
    // Every default-domain node is read in the form of the op records' opsets (record_opset).
    graph_.opset_imports = model_opsets_;
    if (auto it = graph_.opset_imports.find(""); it != graph_.opset_imports.end()) {
      it->second = std::clamp(it->second, kMinOnnxOpset, kMaxOnnxOpset);
    }
    return build_body({});
  }

 private:
  // A subgraph of a node of `parent`: its own names, the model's opsets, `captures` (the
  // outer-scope names it reads) as trailing inputs typed like the parent's values, and
  // `constants` (the outer constants it reads) as constants of its own.
  Result<Graph> build_subgraph(const GraphBuilder& parent, const std::vector<std::string>& captures,
                               const std::vector<std::string>& constants) {
    model_opsets_ = parent.model_opsets_;
    std::vector<std::pair<std::string, const Value*>> outer, outer_constants;
    for (const std::string& name : captures) outer.emplace_back(name, parent.values_.at(name));
    for (const std::string& name : constants) outer_constants.emplace_back(name, parent.values_.at(name));
    return build_body(outer, outer_constants);
  }

  // `captures`: the ONNX name each captured outer value is read by, and that value; `constants`
  // likewise for outer constants (copies share the storage).
  Result<Graph> build_body(const std::vector<std::pair<std::string, const Value*>>& captures,
                           const std::vector<std::pair<std::string, const Value*>>& constants = {}) {
    if (!proto_.name().empty()) graph_.name = proto_.name();
    reserve_names();
    OPFUSE_TRY(read_initializers());
    OPFUSE_TRY(read_inputs());
    for (const auto& [name, outer] : constants) OPFUSE_TRY(define(name, graph_.add_constant(name, *outer->constant())));
    for (const auto& [name, outer] : captures) {
      Value* v = graph_.add_input(name, outer->dtype, outer->shape.value_or(Shape{}));
      v->shape = outer->shape;
      OPFUSE_TRY(define(name, v));
    }
    graph_.captured_inputs = captures.size();
    OPFUSE_TRY(check_node_ops());
    OPFUSE_TRY(check_node_names());
    OPFUSE_ASSIGN_OR_RETURN(std::vector<int> order, node_order());
    for (int index : order) OPFUSE_TRY(read_node(index));
    OPFUSE_TRY(read_outputs());
    OPFUSE_TRY(graph_.topological_sort());
    // A body's types depend on what its node passes: If, Loop and Scan infer them per use.
    if (options_.infer_shapes && !is_subgraph_) OPFUSE_TRY(infer_shapes(graph_));
    return std::move(graph_);
  }

  // "node 'conv1' (index 12)"; ONNX allows empty node names, so one is generated.
  std::string node_name(int index) const {
    const onnx::NodeProto& n = proto_.node(index);
    return n.name().empty() ? str_cat(n.op_type(), "_", index) : n.name();
  }
  std::string node_label(int index) const {
    return str_cat("node '", node_name(index), "' (index ", index, ")");
  }

  void reserve_names() {
    for (const auto& t : proto_.initializer()) reserved_.insert(t.name());
    for (const auto& v : proto_.input()) reserved_.insert(v.name());
    for (const auto& v : proto_.output()) reserved_.insert(v.name());
    for (const auto& n : proto_.node()) {
      reserved_.insert(n.input().begin(), n.input().end());
      reserved_.insert(n.output().begin(), n.output().end());
    }
  }

  std::string fresh_name(const std::string& base) {
    std::string name = base;
    for (int k = 1; reserved_.count(name) || graph_.find_value(name); ++k) {
      name = str_cat(base, "_", k);
    }
    reserved_.insert(name);
    return name;
  }

  Status define(const std::string& name, Value* value) {
    if (!values_.emplace(name, value).second) {
      return Status::user_error(str_cat("value '", name, "' is defined more than once"));
    }
    return Status::ok();
  }

  Status read_initializers() {
    if (proto_.sparse_initializer_size() > 0) {
      return Status::user_error(str_cat("sparse initializer '",
                                        proto_.sparse_initializer(0).values().name(),
                                        "': sparse tensors are not supported"));
    }
    for (int i = 0; i < proto_.initializer_size(); ++i) {
      const onnx::TensorProto& t = proto_.initializer(i);
      if (t.name().empty()) {
        return Status::user_error(str_cat("initializer at index ", i, " has no name"));
      }
      std::optional<std::string_view> raw_data;
      const MessageSpan* cut = nullptr;
      if (cut_ != nullptr) {
        if (auto it = cut_->bytes.find(t.name()); it != cut_->bytes.end()) cut = &it->second;
      }
      if (cut != nullptr) raw_data = cut_->model.substr(cut->offset, cut->size);
      OPFUSE_ASSIGN_OR_RETURN(
          Tensor data,
          tensor_from_proto(t, base_dir_, str_cat("initializer '", t.name(), "'"), budget_, raw_data));
      if (cut != nullptr && cut_->file != nullptr) cut_->file->drop_pages_before(cut->offset + cut->size);
      OPFUSE_TRY(define(t.name(), graph_.add_constant(t.name(), std::move(data))));
      // The bytes are now the Tensor's: free the proto's copy (release, as clearing a string
      // keeps its capacity).
      if (releasable_ != nullptr) delete releasable_->mutable_initializer(i)->release_raw_data();
    }
    return Status::ok();
  }

  // Inputs that are also initializers are constants: opfuse does not let callers override
  // weights at run time (and constant folding and weight layout passes rely on that).
  Status read_inputs() {
    for (const onnx::ValueInfoProto& info : proto_.input()) {
      const std::string what = str_cat("graph input '", info.name(), "'");
      if (values_.count(info.name()) && values_.at(info.name())->is_constant()) {
        OPFUSE_TRY(check_initializer_type(info, *values_.at(info.name()), what));
        continue;
      }
      if (info.name().empty()) return Status::user_error("a graph input has no name");
      OPFUSE_ASSIGN_OR_RETURN(DeclaredType type, declared_type(info, what));
      // A body's inputs take their types from the node at each run; the main graph's must say.
      if (type.dtype == DType::kUndefined && !is_subgraph_) {
        return Status::user_error(str_cat(what, " has no tensor type"));
      }
      Value* v = graph_.add_input(info.name(), type.dtype, type.shape.value_or(Shape{}));
      v->shape = type.shape;  // nullopt when the model gives no shape: rank unknown
      OPFUSE_TRY(define(info.name(), v));
    }
    return Status::ok();
  }

  // A graph input that is also an initializer must declare the initializer's type (when it
  // declares one): a mismatch means the model is inconsistent, and which one wins is a guess.
  Status check_initializer_type(const onnx::ValueInfoProto& info, const Value& init,
                                const std::string& what) const {
    OPFUSE_ASSIGN_OR_RETURN(DeclaredType type, declared_type(info, what));
    const Shape actual = init.constant()->shape();
    bool same = type.dtype == DType::kUndefined || type.dtype == init.dtype;
    if (same && type.shape) {
      same = type.shape->size() == actual.size();
      for (size_t i = 0; same && i < actual.size(); ++i) {
        same = !(*type.shape)[i].is_known() || (*type.shape)[i] == actual[i];
      }
    }
    if (same) return Status::ok();
    return Status::user_error(str_cat(
        what, " is declared ", type.dtype == DType::kUndefined ? "?" : dtype_name(type.dtype),
        type.shape ? shape_to_string(*type.shape) : "[*]", " but its initializer is ",
        init.constant()->type_string()));
  }

  // Node names identify nodes in reports, fusion decisions and --exclude globs, so two nodes
  // may not share one. (ONNX allows unnamed nodes; they get generated names.)
  Status check_node_names() const {
    std::unordered_map<std::string, int> seen;
    for (int i = 0; i < proto_.node_size(); ++i) {
      if (proto_.node(i).name().empty()) continue;
      auto [it, inserted] = seen.emplace(proto_.node(i).name(), i);
      if (!inserted) {
        return Status::user_error(str_cat(node_label(i), ": node name '", node_name(i),
                                          "' is already used by the node at index ", it->second));
      }
    }
    return Status::ok();
  }

  // The opset the model imports for the node's domain: the node's form follows it
  // (canonicalize.cc reads older and newer default-domain forms as the op records' opsets).
  Result<int64_t> node_opset(int index) const {
    const onnx::NodeProto& n = proto_.node(index);
    const std::string domain = canonical_domain(n.domain());
    auto it = model_opsets_.find(domain);
    if (it == model_opsets_.end()) {
      return Status::user_error(str_cat(node_label(index), ": op ", n.op_type(), " uses domain ",
                                        display_domain(domain),
                                        ", which the model does not import (opset_import)"));
    }
    return it->second;
  }

  // "op Foo (domain ai.onnx, opset 13) is not supported", checked for every node before the
  // graph is wired so that the first complaint about an unsupported model is the op itself.
  Status check_op(const std::string& label, const std::string& op_type, const std::string& domain,
                  int64_t opset) const {
    const std::string op =
        str_cat("op ", op_type, " (domain ", display_domain(domain), ", opset ", opset, ")");
    const OpDef* def = OpRegistry::global().find(domain, op_type);
    if (def == nullptr) return Status::user_error(str_cat(label, ": ", op, " is not supported"));
    if (opset < def->min_opset || opset > def->max_opset) {
      return Status::user_error(str_cat(label, ": ", op, " is not supported: opfuse implements ",
                                        op_type, " for opsets ", def->min_opset, "-",
                                        def->max_opset));
    }
    return Status::ok();
  }

  Status check_node_ops() const {
    for (int i = 0; i < proto_.node_size(); ++i) {
      const onnx::NodeProto& n = proto_.node(i);
      OPFUSE_ASSIGN_OR_RETURN(int64_t opset, node_opset(i));
      const std::string domain = canonical_domain(n.domain());
      if (domain.empty() && n.op_type() == "Constant") continue;  // the importer's own job
      if (domain.empty()) {
        auto record = record_opset(n.op_type(), opset);
        if (!record.is_ok()) return Status::user_error(str_cat(node_label(i), ": ", record.status().message()));
        if (has_version_rewrite(n.op_type(), opset)) continue;  // checked once rewritten
        opset = *record;
      }
      OPFUSE_TRY(check_op(node_label(i), n.op_type(), domain, opset));
    }
    return Status::ok();
  }

  // ONNX requires nodes in topological order but real files do not always comply: sort them
  // (stable: among ready nodes the earliest in the file goes first).
  Result<std::vector<int>> node_order() const {
    const int n = proto_.node_size();
    std::unordered_map<std::string, int> producer;
    for (int i = 0; i < n; ++i) {
      for (const std::string& out : proto_.node(i).output()) {
        if (out.empty()) continue;
        if (values_.count(out) || !producer.emplace(out, i).second) {
          return Status::user_error(str_cat(node_label(i), ": output '", out,
                                            "' is already defined by another node, a graph input "
                                            "or an initializer"));
        }
      }
    }
    std::vector<int> pending(n, 0);
    std::unordered_map<int, std::vector<int>> consumers;  // producer index -> consumer slots
    for (int i = 0; i < n; ++i) {
      // A node's subgraphs' outer-scope reads order it like its inputs do.
      std::vector<std::string> reads(proto_.node(i).input().begin(), proto_.node(i).input().end());
      for (const std::string& name : outer_scope_reads(proto_.node(i))) reads.push_back(name);
      for (const std::string& in : reads) {
        if (in.empty() || values_.count(in)) continue;
        auto it = producer.find(in);
        if (it == producer.end()) {
          return Status::user_error(str_cat(node_label(i), ": input '", in,
                                            "' is not a graph input, an initializer or the output "
                                            "of any node"));
        }
        ++pending[i];
        consumers[it->second].push_back(i);
      }
    }
    std::priority_queue<int, std::vector<int>, std::greater<>> ready;
    for (int i = 0; i < n; ++i) {
      if (pending[i] == 0) ready.push(i);
    }
    std::vector<int> order;
    while (!ready.empty()) {
      const int i = ready.top();
      ready.pop();
      order.push_back(i);
      for (int c : consumers[i]) {
        if (--pending[c] == 0) ready.push(c);
      }
    }
    for (int i = 0; i < n; ++i) {
      if (pending[i] != 0) {
        return Status::user_error(str_cat("the graph has a cycle through ", node_label(i)));
      }
    }
    return order;
  }

  Status read_node(int index) {
    const onnx::NodeProto& n = proto_.node(index);
    label_ = node_label(index);
    NodeDraft draft;
    draft.op_type = n.op_type();
    draft.domain = canonical_domain(n.domain());
    draft.name = node_name(index);
    OPFUSE_ASSIGN_OR_RETURN(draft.opset, node_opset(index));
    // Subgraphs read outer-scope values by name; each such value becomes a trailing input of the
    // node and of every subgraph (Graph::captured_inputs), in the same order. Outer constants
    // (initializers, Constant nodes) are not passed but held by each subgraph, so that folds,
    // constant-only rewrites (Reduce*-18's axes) and weight pre-packing see them inside a branch
    // or body as outside: exporters keep the weights of both If branches in the outer graph.
    std::vector<std::string> captures, constants;
    for (std::string& name : outer_scope_reads(n)) {
      (values_.at(name)->is_constant() ? constants : captures).push_back(std::move(name));
    }
    for (const auto& a : n.attribute()) {
      if (a.has_g()) {
        OPFUSE_ASSIGN_OR_RETURN(draft.attrs[a.name()], read_subgraph(a.g(), captures, constants));
        continue;
      }
      if (a.graphs_size() > 0) {
        return Status::user_error(str_cat(label_, ": attribute '", a.name(),
                                          "' is a list of graphs, which is not supported"));
      }
      OPFUSE_ASSIGN_OR_RETURN(AttrValue value, attr_from_proto(a, base_dir_, label_, budget_));
      draft.attrs[a.name()] = std::move(value);
    }
    for (const std::string& in : n.input())
      draft.inputs.push_back(in.empty() ? nullptr : values_.at(in));
    for (const std::string& name : captures) draft.inputs.push_back(values_.at(name));
    draft.outputs.assign(n.output().begin(), n.output().end());
    if (draft.domain.empty() && draft.op_type == "Constant") {
      OPFUSE_ASSIGN_OR_RETURN(Tensor data, constant_node_value(draft.attrs, label_));
      if (draft.outputs.size() != 1 || draft.outputs[0].empty()) {
        return Status::user_error(str_cat(label_, ": Constant must have exactly one output"));
      }
      return define(draft.outputs[0], graph_.add_constant(draft.outputs[0], std::move(data)));
    }
    original_op_ = draft.op_type;
    CanonicalizeContext ctx{graph_, [this](const std::string& base) { return fresh_name(base); },
                            [this](NodeDraft d) { return add_checked(std::move(d)); }};
    return add_canonical_node(std::move(draft), ctx);
  }

  Result<AttrValue> read_subgraph(const onnx::GraphProto& body, const std::vector<std::string>& captures,
                                  const std::vector<std::string>& constants) {
    GraphBuilder sub(body, base_dir_, options_, budget_);
    sub.is_subgraph_ = true;
    OPFUSE_ASSIGN_OR_RETURN(Graph graph, sub.build_subgraph(*this, captures, constants));
    return AttrValue(GraphAttr(std::make_shared<Graph>(std::move(graph))));
  }

  // Checks a (possibly canonicalised or helper) node against its op record and adds it.
  Result<Node*> add_checked(NodeDraft d) {
    const std::string label =
        d.op_type == original_op_ ? label_ : str_cat(label_, " (converting ", original_op_, ")");
    OPFUSE_TRY(check_op(label, d.op_type, d.domain, d.opset));
    const OpDef& def = *OpRegistry::global().find(d.domain, d.op_type);
    // Trailing omitted inputs and outputs are the same as absent ones.
    while (!d.inputs.empty() && d.inputs.back() == nullptr) d.inputs.pop_back();
    while (!d.outputs.empty() && d.outputs.back().empty()) d.outputs.pop_back();
    const auto n_in = static_cast<int>(d.inputs.size());
    const auto n_out = static_cast<int>(d.outputs.size());
    if (n_in < def.min_inputs || n_in > def.max_inputs) {
      return Status::user_error(str_cat(label, ": ", d.op_type, " takes ", def.min_inputs, " to ",
                                        def.max_inputs, " inputs but has ", n_in));
    }
    if (n_out < def.min_outputs || n_out > def.max_outputs) {
      return Status::user_error(str_cat(label, ": ", d.op_type, " has ", def.min_outputs, " to ",
                                        def.max_outputs, " outputs but the node has ", n_out));
    }
    OPFUSE_TRY(check_attributes(def, d.attrs, label));
    std::vector<std::string> onnx_names = d.outputs;
    for (std::string& out : d.outputs) {
      if (out.empty()) out = fresh_name(str_cat(d.name, "_unused"));
    }
    OPFUSE_ASSIGN_OR_RETURN(Node * node, graph_.add_node(d.op_type, std::move(d.inputs), d.outputs,
                                                         std::move(d.attrs), d.name, d.domain));
    for (size_t i = 0; i < onnx_names.size(); ++i) {
      if (!onnx_names[i].empty()) OPFUSE_TRY(define(onnx_names[i], node->output(i)));
    }
    return node;
  }

  // Graph outputs may be node outputs, graph inputs or initializers. Declared types of node
  // outputs are kept: infer_shapes merges them with what it infers (symbolic dims survive).
  Status read_outputs() {
    for (const onnx::ValueInfoProto& info : proto_.output()) {
      const std::string what = str_cat("graph output '", info.name(), "'");
      auto it = values_.find(info.name());
      if (it == values_.end()) {
        return Status::user_error(
            str_cat(what, " is not produced by any node, graph input or initializer"));
      }
      OPFUSE_ASSIGN_OR_RETURN(DeclaredType type, declared_type(info, what));
      Value* v = it->second;
      if (v->producer() != nullptr) {
        if (type.dtype != DType::kUndefined) v->dtype = type.dtype;
        if (type.shape) v->shape = type.shape;
      }
      graph_.add_output(v);
    }
    return Status::ok();
  }

  const onnx::GraphProto& proto_;
  onnx::GraphProto* releasable_ = nullptr;  // proto_, when its initializers' data may be freed
  bool is_subgraph_ = false;  // a node's body: its inputs may be untyped, it may capture
  std::string base_dir_;
  const OnnxLoadOptions& options_;
  Graph graph_;
  std::map<std::string, int64_t> model_opsets_;  // as the model imports them
  std::unordered_map<std::string, Value*> values_;  // ONNX value name -> value
  std::unordered_set<std::string> reserved_;        // every value name the model uses
  std::string label_;                               // the node being read, for messages
  std::string original_op_;
  TensorBudget* budget_;  // weight-byte caps from the load options, shared with subgraphs
  const CutRawData* cut_ = nullptr;
};

}  // namespace

Result<Graph> build_graph(onnx::ModelProto& model, const std::string& base_dir,
                          const OnnxLoadOptions& options, const CutRawData* cut) {
  TensorBudget budget;
  budget.max_tensor_bytes = options.max_tensor_bytes;
  budget.max_total_bytes = options.max_weight_bytes;
  GraphBuilder builder(model.graph(), base_dir, options, &budget);
  builder.release_initializers_from(model.mutable_graph());
  builder.read_cut_raw_data_from(cut);
  return builder.build(model);
}

}  // namespace opfuse::onnx_import
