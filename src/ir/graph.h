// The IR: a graph of nodes (operator applications) connected by values (typed, shaped edges).
// The Graph owns every node and value; pointers stay valid until the thing is removed. Links
// (producer, uses) are maintained by Graph methods only, so they never go stale.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/shape.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ir/attribute.h"

namespace opfuse {

struct OpDef;
class Node;
class Graph;

struct Use {
  Node* node;
  int input_index;
};

class Value {
 public:
  const std::string& name() const { return name_; }
  DType dtype = DType::kUndefined;
  std::optional<Shape> shape;  // nullopt: rank unknown

  Node* producer() const { return producer_; }
  int producer_output() const { return producer_output_; }
  const std::vector<Use>& uses() const { return uses_; }
  // Initializer data when this value is a constant (weight), else null.
  const Tensor* constant() const { return constant_ ? &*constant_ : nullptr; }
  bool is_constant() const { return constant_.has_value(); }
  bool is_graph_input() const { return is_graph_input_; }
  bool is_graph_output() const { return is_graph_output_; }
  // "f32[1,3,batch,?]" or "f32[*]" when the rank is unknown.
  std::string type_string() const;

 private:
  friend class Graph;
  std::string name_;
  Node* producer_ = nullptr;
  int producer_output_ = -1;
  std::vector<Use> uses_;
  std::optional<Tensor> constant_;
  size_t position_ = 0;      // index in the graph's value list
  bool maybe_dead_ = false;  // queued for the next remove_dead_values
  bool is_graph_input_ = false;
  bool is_graph_output_ = false;
};

class Node {
 public:
  const std::string& name() const { return name_; }
  const std::string& op_type() const { return op_type_; }
  const std::string& domain() const { return domain_; }  // "" is the default ONNX domain
  const OpDef& def() const { return *def_; }
  // Inputs in order; an omitted optional input is nullptr.
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  Value* output(size_t i) const { return i < outputs_.size() ? outputs_[i] : nullptr; }
  bool has_input(size_t i) const { return input(i) != nullptr; }
  Attributes attrs;
  // "Conv 'conv1' (inputs x, w)": how errors name a node.
  std::string describe() const;

 private:
  friend class Graph;
  std::string name_;
  std::string op_type_;
  std::string domain_;
  const OpDef* def_ = nullptr;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  size_t position_ = 0;  // index in the graph's node list, so removal needs no search
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;

  std::string name = "main";
  // For a subgraph (a GraphAttr): how many of its trailing inputs stand for values of the
  // enclosing graph it reads. The importer makes such outer-scope references explicit: the node
  // owning the subgraph passes those values as its own trailing inputs, in the same order, so
  // data flow, liveness and memory planning see them like any other input.
  size_t captured_inputs = 0;
  // Domain -> opset version the model was written against ("" is ai.onnx).
  std::map<std::string, int64_t> opset_imports;

  // A new value. `name` is made unique by suffixing if taken (or generated when empty).
  Value* add_value(const std::string& name, DType dtype = DType::kUndefined,
                   std::optional<Shape> shape = std::nullopt);
  Value* add_input(const std::string& name, DType dtype, Shape shape);
  // An initializer: a named constant with data. Its dtype and shape come from the tensor.
  Value* add_constant(const std::string& name, Tensor data);
  void add_output(Value* value);
  // Replaces the data of a constant value (constant folding, weight folds).
  void set_constant(Value* value, Tensor data);
  // Drops a constant's data when every reader keeps a copy of its own (weights a compiled plan's
  // kernels packed): the value keeps its dtype and dims, and constant() is a tensor without
  // storage (raw_data() null) until set_constant gives it data again.
  void release_constant_data(Value* value);

  // The file the graph was loaded from, which holds its constants (a Session gives its weights
  // to a compile and reads them again from there for the next); null for a graph built in
  // code. Adding, replacing or renaming a constant resets it: the file then no longer
  // describes the graph's constants.
  std::shared_ptr<const class ConstantSource> constant_source;

  // Adds a node of a registered op, with fresh output values named `output_names` (one per
  // output; empty names are generated). Fails with a user error naming the op if it is unknown.
  Result<Node*> add_node(const std::string& op_type, std::vector<Value*> inputs,
                         std::vector<std::string> output_names, Attributes attrs = {},
                         const std::string& node_name = "", const std::string& domain = "");

  void set_input(Node* node, size_t index, Value* value);
  // Gives a value another name; fails (internal error) when a live value has that name.
  Status rename_value(Value* value, const std::string& name);
  // Points every use of `from` (and the graph output, if it is one) at `to`.
  void replace_all_uses(Value* from, Value* to);
  // Removes a node; its outputs must have no uses and not be graph outputs.
  Status remove_node(Node* node);
  // Removes values with no producer, no uses, not inputs/outputs (dead constants and leftovers).
  // It looks only at values created or touched (a use, producer or output role lost) since the
  // last call, so passes may call it after every rewrite.
  void remove_dead_values();

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  // Nodes in execution (topological) order.
  std::vector<Node*> nodes() const;
  size_t num_nodes() const { return nodes_.size() - removed_; }
  std::vector<Value*> values() const;
  Value* find_value(const std::string& name) const;
  Node* find_node(const std::string& name) const;

  // Reorders nodes topologically (stable); an error names a node on a cycle.
  Status topological_sort();
  // A deep copy (values and nodes are new objects; tensors share storage).
  Graph clone() const;

  // `base`, or `base` with a suffix, such that no value has that name yet (for rename_value).
  std::string unique_value_name(const std::string& base);

 private:
  std::string unique_node_name(const std::string& base);
  // Drops the slots of removed nodes and renumbers positions.
  void compact_nodes();

  // In order; a removed node leaves a null slot until the next compaction (when half the slots
  // are null, or on sorting), so removing a node costs O(1) amortised, not a search and a shift.
  std::vector<std::unique_ptr<Node>> nodes_;
  size_t removed_ = 0;
  // Values, with null slots for removed ones like nodes_, and those that may have died since
  // the last remove_dead_values.
  std::vector<std::unique_ptr<Value>> values_;
  size_t removed_values_ = 0;
  std::vector<Value*> maybe_dead_;
  void suspect(Value* value);
  std::unordered_map<std::string, Value*> value_by_name_;
  std::unordered_map<std::string, Node*> node_by_name_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  int64_t name_counter_ = 0;
};

// Where a graph's constants can be read again (frontend/onnx/importer.h: the model's file).
class ConstantSource {
 public:
  virtual ~ConstantSource() = default;
  // The graph as the source holds it now; a user error when it cannot be read.
  virtual Result<Graph> reload() const = 0;
  // The constants read_constants() can read on their own (a model file's initializers and
  // Constant values, not those the importer made from attributes).
  virtual std::unordered_set<std::string> constants_read_alone() const = 0;
  // Those of the named constants the source can read on their own, as it holds them now,
  // without rebuilding the graph. Names it cannot read so are left out: reload() has them.
  virtual std::unordered_map<std::string, Tensor> read_constants(const std::vector<std::string>& names) const = 0;
  // For messages: "'model.onnx'".
  virtual std::string describe() const = 0;
};

}  // namespace opfuse
