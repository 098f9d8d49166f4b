// OpDef: everything opfuse knows about one operator, declared once. The importer, verifier,
// shape inference, constant folding, the fuser and eager mode all read this record; no pass
// switches over op names.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/attribute.h"
#include "ir/graph.h"
#include "ops/scalar_expr.h"

namespace opfuse {

// The fusion lattice. Ordered: combining two kinds is std::max, and rules are comparisons.
enum class FusionKind : uint8_t {
  kElementwise,  // out[i] = f(in[i]) with identical shapes
  kBroadcast,    // elementwise after numpy broadcasting of the inputs
  kInjective,    // each output element reads one input element (reshape, transpose, slice ...)
  kReduction,    // combines elements along axes (ReduceSum, Softmax, LayerNormalization ...)
  kAnchor,       // compute-heavy op that absorbs epilogues (Conv, MatMul, Gemm ...)
  kOpaque,       // fuses with nothing
};
std::string_view fusion_kind_name(FusionKind kind);

struct OpTraits {
  bool commutative = false;  // f(a, b) == f(b, a): the pattern matcher tries both orders
  bool associative = false;  // f(f(a, b), c) == f(a, f(b, c))
  bool idempotent = false;   // f(f(x)) == f(x)
  bool inplace = false;      // output 0 may reuse input 0's buffer when it dies
  bool reads_shape_only = false;  // output depends on input shapes, not values (Shape)
  // Output 0 is input 0's bytes under other dims (Reshape, Squeeze, Identity ...): a compiled
  // plan aliases the buffers instead of running a kernel.
  bool output_is_view = false;
  bool has_side_effects = false;  // never removed or folded
  // Finite inputs give finite outputs (up to overflow of huge values): no unbounded division,
  // logarithm, root, power or exponential. Read by the NaN analysis of compiled plans
  // (runtime/non_finite.h) and by the layout pass (padded lanes must stay finite).
  bool finite_preserving = false;
  // An activation (ops/elementwise_activations.cc): one with a single input and float attributes
  // only becomes a Conv/MatMul epilogue post-op derived from its scalar expression (ops/fused.cc).
  bool activation = false;
};

struct AttrSpec {
  std::string name;
  AttrType type;
  std::optional<AttrValue> default_value;  // used when the node does not set it
  bool required = false;
};

// How a reduction op combines elements.
enum class ReduceCombiner : uint8_t { kNone, kSum, kMax, kMin, kProd };
struct ReduceSpec {
  ReduceCombiner combiner = ReduceCombiner::kNone;
  double identity = 0;          // starting value of the accumulator
  bool divide_by_count = false; // mean
};

// Reads a node's attributes, falling back to the OpDef's defaults.
class AttrReader {
 public:
  explicit AttrReader(const Node& node) : node_(node) {}
  bool has(const std::string& name) const { return node_.attrs.count(name) > 0; }
  int64_t get_int(const std::string& name) const;
  float get_float(const std::string& name) const;
  std::string get_string(const std::string& name) const;
  std::vector<int64_t> get_ints(const std::string& name) const;
  std::vector<float> get_floats(const std::string& name) const;
  std::vector<std::string> get_strings(const std::string& name) const;
  const Tensor* get_tensor(const std::string& name) const;

 private:
  const AttrValue* find(const std::string& name) const;
  const Node& node_;
};

// What a shape/dtype inference function sees: the node, its input types and the values of
// inputs that are known constants. Pure: it only writes `outputs`.
struct ValueType {
  DType dtype = DType::kUndefined;
  std::optional<Shape> shape;
};

class InferContext {
 public:
  InferContext(const Node& node, std::vector<ValueType> inputs,
               std::vector<const Tensor*> constants);
  const Node& node() const { return node_; }
  const AttrReader& attrs() const { return attrs_; }
  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return outputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && present_[i]; }
  DType input_dtype(size_t i) const { return inputs_[i].dtype; }
  const std::optional<Shape>& input_shape(size_t i) const { return inputs_[i].shape; }
  // The input's data when it is a known constant, else null.
  const Tensor* input_constant(size_t i) const { return i < constants_.size() ? constants_[i] : nullptr; }
  void set_output(size_t i, DType dtype, std::optional<Shape> shape);
  const std::vector<ValueType>& outputs() const { return outputs_; }
  // A user error prefixed with the node's description.
  Status error(const std::string& message) const;

 private:
  const Node& node_;
  AttrReader attrs_;
  std::vector<ValueType> inputs_;
  std::vector<bool> present_;
  std::vector<const Tensor*> constants_;
  std::vector<ValueType> outputs_;
};

// What a reference kernel sees: concrete input tensors; it allocates its outputs.
class KernelContext {
 public:
  KernelContext(const Node& node, std::vector<const Tensor*> inputs);
  // With outputs preallocated by a memory plan: allocate_output hands out these buffers
  // (zero-filled, as a fresh allocation would be) when dtype and dims match.
  KernelContext(const Node& node, std::vector<const Tensor*> inputs,
                std::vector<Tensor*> preallocated);
  const Node& node() const { return node_; }
  const AttrReader& attrs() const { return attrs_; }
  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return outputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  const Tensor& input(size_t i) const { return *inputs_[i]; }
  const Tensor* input_or_null(size_t i) const { return has_input(i) ? inputs_[i] : nullptr; }
  // Allocates output i (zero-filled); errors (overflow, allocation cap) name the node.
  Result<Tensor*> allocate_output(size_t i, DType dtype, std::vector<int64_t> dims);
  // Sets output i to an existing tensor (e.g. a reshape sharing its input's storage).
  void set_output(size_t i, Tensor t) { outputs_[i] = std::move(t); }
  std::vector<Tensor>& outputs() { return outputs_; }
  Status error(const std::string& message) const;

 private:
  const Node& node_;
  AttrReader attrs_;
  std::vector<const Tensor*> inputs_;
  std::vector<Tensor> outputs_;
  std::vector<Tensor*> preallocated_;
};

// Builds an elementwise op's scalar expression; it may depend on attributes and on which
// optional inputs are present (Clip without max).
struct ScalarExprContext {
  const AttrReader& attrs;
  const Node& node;
};

using InferFn = Status (*)(InferContext&);
using KernelFn = Status (*)(KernelContext&);
using ScalarExprFn = ScalarExpr (*)(const ScalarExprContext&);
// Multiply-adds x2 (or elementwise ops) of one run, from the node's static shapes; -1 if unknown.
using FlopsFn = int64_t (*)(const Node&);

// The dtype of an ONNX TensorProto.DataType number carried by an attribute (Cast's `to`,
// EyeLike's `dtype`); nullopt for the types opfuse does not support (strings, bfloat16 ...).
std::optional<DType> dtype_from_onnx_code(int64_t code);

struct OpDef {
  std::string name;            // ONNX spelling: "Conv"
  std::string domain;          // "" is ai.onnx
  int min_opset = 11;          // opset versions of `domain` whose semantics this record covers
  int max_opset = 17;
  int min_inputs = 1;
  int max_inputs = 1;
  int min_outputs = 1;
  int max_outputs = 1;
  std::vector<AttrSpec> attrs;
  FusionKind kind = FusionKind::kOpaque;
  OpTraits traits;
  InferFn infer = nullptr;
  // Null for elementwise ops that have `scalar`: their reference kernel evaluates it.
  KernelFn reference = nullptr;
  ScalarExprFn scalar = nullptr;
  ReduceSpec reduce;
  FlopsFn flops = nullptr;
  std::string summary;  // one line for `opfuse ops` and docs

  const AttrSpec* find_attr(const std::string& attr_name) const;
};

// OpTraits::finite_preserving of this node: its op's trait, a Div by a constant whose every
// value is finite with magnitude at least 1 (hardswish's x / 6), which cannot turn finite values
// into Inf or NaN, or a FusedRegion whose members all are and whose constants are finite.
bool is_finite_preserving(const Node& node);

// The fields every op record sets (one output; a family adds attributes, traits, opsets ...).
OpDef op_record(std::string name, int min_inputs, int max_inputs, FusionKind kind, InferFn infer,
                KernelFn reference, std::string summary);

}  // namespace opfuse
