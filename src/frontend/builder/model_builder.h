// The C++ model-building API: build a Graph in code with typed handles, deterministic weights
// and one call per op. A built graph is an ordinary Graph: it runs (Session eager/graph),
// compiles and exports like an imported one.
//
//   ModelBuilder b("tiny", /*seed=*/1);
//   Var x = b.input("x", {1, 3, 32, 32});
//   Var h = b.relu(b.conv2d(x, 16, 3, {.stride = 2, .pad = 1}));
//   b.output(b.global_average_pool(h), "y");
//   Result<Graph> graph = b.finish();
//
// Errors are sticky: the first failing call records its Status (naming the op, node and
// shapes), later calls return invalid handles, and finish() returns that first error. Model code
// reads top to bottom without a check per line, and user mistakes still come back as values.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "core/random.h"
#include "ir/graph.h"

namespace opfuse {

class ModelBuilder;

// A typed handle to one value of the graph under construction.
class Var {
 public:
  Var() = default;
  Var(ModelBuilder* builder, Value* value) : builder_(builder), value_(value) {}
  bool valid() const { return value_ != nullptr; }
  Value* value() const { return value_; }
  ModelBuilder* builder() const { return builder_; }
  DType dtype() const { return value_ ? value_->dtype : DType::kUndefined; }
  // Rank, or -1 when unknown. dim(i): the size of axis i (negative counts from the back), or -1
  // when it is not a known number.
  int64_t rank() const;
  int64_t dim(int64_t axis) const;
  const std::string& name() const;

 private:
  ModelBuilder* builder_ = nullptr;
  Value* value_ = nullptr;
};

// Elementwise arithmetic with numpy broadcasting (Add, Sub, Mul, Div nodes). A number operand
// becomes a scalar constant of the other operand's dtype.
Var operator+(Var a, Var b);
Var operator-(Var a, Var b);
Var operator*(Var a, Var b);
Var operator/(Var a, Var b);
Var operator+(Var a, double b);
Var operator-(Var a, double b);
Var operator*(Var a, double b);
Var operator/(Var a, double b);
Var operator-(double a, Var b);
Var operator*(double a, Var b);

// How a weight is initialised. Every random initialiser draws from the builder's seeded
// generator (core/random.h), so a model built twice with one seed has identical weights.
struct Init {
  enum class Kind { kConstant, kUniform, kHeUniform, kXavierUniform };
  Kind kind = Kind::kHeUniform;
  double a = 0, b = 0;
  static Init constant(double v) { return {Kind::kConstant, v, 0}; }
  static Init zeros() { return constant(0); }
  static Init ones() { return constant(1); }
  static Init uniform(double lo, double hi) { return {Kind::kUniform, lo, hi}; }
  // U(-sqrt(6/fan_in), sqrt(6/fan_in)); fan_in = product of dims[1:] (OIHW / [out, in]).
  static Init he_uniform() { return {Kind::kHeUniform, 0, 0}; }
  // U(-sqrt(6/(fan_in+fan_out)), ...), fan_out = dims[0] x receptive field.
  static Init xavier_uniform() { return {Kind::kXavierUniform, 0, 0}; }
};

struct ConvOptions {
  int64_t stride = 1;
  int64_t pad = -1;  // -1: "same" for odd kernels: dilation * (kernel - 1) / 2
  int64_t dilation = 1;
  int64_t group = 1;
  bool bias = true;
};

struct PoolOptions {
  int64_t kernel = 2;
  int64_t stride = -1;  // -1: equal to kernel
  int64_t pad = 0;
};

// Makes the node producing `value` produce a value named `name` instead, by re-adding the node
// with that output name (value names key the graph's lookups, so there is no renaming in
// place) and moving every use over. Returns the new value, or null (nothing changed) when
// `value` has no producer, its producer has several outputs, or it is a graph output. The old
// value is left dead (no producer, no uses) for the caller's remove_dead_values sweep. Used to
// give graph outputs their names without an Identity node (which would cost a copy).
Result<Value*> rename_by_rebuilding(Graph& graph, Value* value, const std::string& name);

class ModelBuilder {
 public:
  // Builds a new graph named `name`, default-domain opset 17, weights from `seed`.
  explicit ModelBuilder(std::string name = "model", uint64_t seed = 0);
  // Builds into an existing graph (composite op bodies are expanded this way).
  ModelBuilder(Graph& graph, uint64_t seed);
  ModelBuilder(const ModelBuilder&) = delete;
  ModelBuilder& operator=(const ModelBuilder&) = delete;

  Graph& graph() { return *graph_; }
  const Status& status() const { return status_; }
  bool ok() const { return status_.is_ok(); }
  // Records an error (the first one wins) and returns an invalid handle.
  Var fail(Status status);

  // Names: nodes and weights made inside a scope are prefixed "scope/"; scopes nest.
  class Scope {
   public:
    Scope(ModelBuilder& b, const std::string& name);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    ModelBuilder& b_;
    size_t previous_size_;
  };
  std::string scoped(const std::string& name) const;

  // Graph inputs, constants, weights and outputs.
  Var input(const std::string& name, DType dtype, Shape shape);
  Var input(const std::string& name, std::vector<int64_t> dims) {
    return input(name, DType::kF32, make_shape(dims));
  }
  Var constant(const std::string& name, Tensor data);
  Var scalar(double value, DType dtype = DType::kF32);
  Var ints(std::vector<int64_t> values);  // an i64 vector constant (shapes, axes, pads)
  Var weight(const std::string& name, std::vector<int64_t> dims, Init init = Init::he_uniform(),
             DType dtype = DType::kF32);
  // Marks a graph output, named `name` when given. At finish() the node computing it is re-made
  // under that name (an Identity only when `v` is an input or a constant, or output twice), so
  // a named output costs no copy. Builders that do not own their graph (composite bodies)
  // return values instead of declaring outputs.
  void output(Var v, const std::string& name = "");
  // Infers shapes over the whole graph, verifies it and hands it over. Returns the first error.
  Result<Graph> finish();

  // Any registered op: `op("Conv", {x, w}, {{"group", int64_t{2}}})`. Output types are inferred
  // immediately (typed helpers and blocks read them); arity and attributes are checked against
  // the op's record. The node is named `name` (scoped) or after the op.
  std::vector<Var> op_n(const std::string& op_type, const std::vector<Var>& inputs, int num_outputs,
                        Attributes attrs = {}, const std::string& name = "",
                        const std::string& domain = "");
  Var op(const std::string& op_type, const std::vector<Var>& inputs, Attributes attrs = {},
         const std::string& name = "", const std::string& domain = "");

  // ---- typed helpers for common ops ----
  Var relu(Var x) { return op("Relu", {x}); }
  Var sigmoid(Var x) { return op("Sigmoid", {x}); }
  Var tanh(Var x) { return op("Tanh", {x}); }
  Var silu(Var x) { return x * sigmoid(x); }
  Var hard_swish(Var x) { return op("HardSwish", {x}); }
  Var relu6(Var x) { return clip(x, 0, 6); }
  Var clip(Var x, double lo, double hi);
  Var gelu(Var x);  // 0.5 x (1 + erf(x / sqrt 2)), as primitives (the pattern fuser finds it)
  Var exp(Var x) { return op("Exp", {x}); }
  Var sqrt(Var x) { return op("Sqrt", {x}); }
  Var pow(Var x, double exponent);
  Var add(Var a, Var b) { return op("Add", {a, b}); }
  Var sub(Var a, Var b) { return op("Sub", {a, b}); }
  Var mul(Var a, Var b) { return op("Mul", {a, b}); }
  Var div(Var a, Var b) { return op("Div", {a, b}); }

  // Conv with given weights (OIHW) or with fresh He-initialised weights (bias zero-ish).
  Var conv(Var x, Var w, Var bias, const ConvOptions& o = {});
  Var conv2d(Var x, int64_t out_channels, int64_t kernel, const ConvOptions& o = {});
  // Inference BatchNormalization with fresh parameters (gamma near 1, small beta and mean,
  // variance in [0.5, 1.5]): realistic for folding, not an identity.
  Var batch_norm(Var x, double epsilon = 1e-5);
  Var layer_norm(Var x, int64_t axis = -1, double epsilon = 1e-5);  // over the last dims, fresh scale/bias
  Var matmul(Var a, Var b) { return op("MatMul", {a, b}); }
  // y = x W^T + b over the last axis, with fresh weights: Gemm for 2-D x, MatMul + Add otherwise.
  Var linear(Var x, int64_t out_features, bool bias = true);
  Var max_pool(Var x, const PoolOptions& o);
  Var average_pool(Var x, const PoolOptions& o);
  Var global_average_pool(Var x) { return op("GlobalAveragePool", {x}); }
  Var flatten(Var x, int64_t axis = 1);
  Var reshape(Var x, std::vector<int64_t> dims);
  Var transpose(Var x, std::vector<int64_t> perm);
  Var concat(const std::vector<Var>& xs, int64_t axis);
  Var softmax(Var x, int64_t axis = -1);
  Var reduce_mean(Var x, std::vector<int64_t> axes, bool keepdims = true);
  // Bilinear resize of an NCHW tensor to (height, width), half-pixel centres (PyTorch's
  // align_corners=False).
  Var resize_bilinear(Var x, int64_t height, int64_t width);

  Random& rng() { return rng_; }

 private:
  void init_tensor(Tensor& t, const Init& init);
  Status name_outputs();
  // Validates a node's arity and attributes against its record and infers its output types.
  Status check_and_infer(Node& node);

  std::optional<Graph> owned_;
  Graph* graph_;
  Random rng_;
  Status status_;
  std::string scope_;
  int64_t counter_ = 0;
  std::vector<std::pair<Value*, std::string>> outputs_;  // declared outputs, named at finish()
};

}  // namespace opfuse
