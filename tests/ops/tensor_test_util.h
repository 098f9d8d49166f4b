// Helpers for the tensor-family op tests: build a one-node graph, infer its shapes, run its
// reference kernel, and compare results with literal expected values.
#pragma once

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ops/reference.h"
#include "ops/infer_shapes.h"

namespace opfuse::testing {

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

// One node input: a runtime value (graph input), a constant (initializer) or omitted.
struct Arg {
  enum class Kind { kRuntime, kConstant, kOmitted } kind;
  Tensor tensor;
};
inline Arg in(Tensor t) { return {Arg::Kind::kRuntime, std::move(t)}; }
inline Arg cst(Tensor t) { return {Arg::Kind::kConstant, std::move(t)}; }
inline Arg none() { return {Arg::Kind::kOmitted, Tensor()}; }

template <typename T>
Tensor tv(std::vector<int64_t> dims, std::vector<T> values) {
  return Tensor::from_vector<T>(std::move(dims), values);
}
inline Tensor i64s(std::vector<int64_t> values) {
  const int64_t n = static_cast<int64_t>(values.size());
  return Tensor::from_vector<int64_t>({n}, values);
}
// 0, 1, 2, ... as f32 of the given dims.
inline Tensor iota_f32(std::vector<int64_t> dims) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(dims)).value();
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

struct NodeRun {
  Status build;  // add_node or infer_shapes failure
  Status run;    // kernel failure
  std::vector<Tensor> outputs;
  std::vector<Value*> values;  // the node's output values (inferred types)
  std::unique_ptr<Graph> graph;

  std::string shape(size_t i = 0) const {
    return values[i]->shape ? shape_to_string(*values[i]->shape) : "*";
  }
};

// Builds `op` over `args`, infers shapes and (if that worked) runs the reference kernel.
inline NodeRun run_node(const std::string& op, std::vector<Arg> args, Attributes attrs = {},
                        size_t num_outputs = 1) {
  NodeRun r;
  r.graph = std::make_unique<Graph>();
  Graph& g = *r.graph;
  std::vector<Value*> inputs;
  std::vector<const Tensor*> tensors;
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg& a = args[i];
    const std::string name = "in" + std::to_string(i);
    if (a.kind == Arg::Kind::kOmitted) {
      inputs.push_back(nullptr);
      tensors.push_back(nullptr);
      continue;
    }
    inputs.push_back(a.kind == Arg::Kind::kConstant ? g.add_constant(name, a.tensor)
                                                    : g.add_input(name, a.tensor.dtype(), a.tensor.shape()));
    tensors.push_back(&args[i].tensor);
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < num_outputs; ++i) names.push_back("out" + std::to_string(i));
  auto node = g.add_node(op, inputs, names, std::move(attrs), "n");
  if (!node.is_ok()) {
    r.build = node.status();
    return r;
  }
  r.values = (*node)->outputs();
  r.build = infer_shapes(g);
  if (!r.build.is_ok()) return r;
  auto outs = run_reference(**node, tensors);
  if (!outs.is_ok()) {
    r.run = outs.status();
    return r;
  }
  r.outputs = std::move(*outs);
  return r;
}

// Inference only, on inputs given by type: for symbolic shapes.
struct TypedArg {
  DType dtype;
  std::optional<Shape> shape;
  const Tensor* constant = nullptr;
};
inline Result<std::vector<Value*>> infer_node(const std::string& op, std::vector<TypedArg> args,
                                              Attributes attrs = {}, size_t num_outputs = 1,
                                              Graph* g = nullptr) {
  std::vector<Value*> inputs;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    if (args[i].constant) {
      inputs.push_back(g->add_constant(name, *args[i].constant));
    } else {
      Value* v = g->add_value(name, args[i].dtype, args[i].shape);
      inputs.push_back(v);
    }
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < num_outputs; ++i) names.push_back("out" + std::to_string(i));
  OPFUSE_ASSIGN_OR_RETURN(Node * node, g->add_node(op, inputs, names, std::move(attrs), "n"));
  OPFUSE_TRY(infer_shapes(*g));
  return node->outputs();
}

inline Shape sym(std::initializer_list<std::variant<int64_t, const char*>> dims) {
  Shape s;
  for (const auto& d : dims) {
    if (std::holds_alternative<int64_t>(d)) {
      const int64_t v = std::get<int64_t>(d);
      s.push_back(v < 0 ? Dim::unknown() : Dim(v));
    } else {
      s.push_back(Dim::symbol(std::get<const char*>(d)));
    }
  }
  return s;
}

template <typename T>
void expect_tensor(const Tensor& t, std::vector<int64_t> dims, std::vector<T> values) {
  ASSERT_EQ(t.dtype(), DTypeOf<T>::value) << t.type_string();
  ASSERT_EQ(t.dims(), dims) << t.type_string();
  ASSERT_EQ(static_cast<size_t>(t.numel()), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      EXPECT_NEAR(t.data<T>()[i], values[i], 1e-6) << "element " << i;
    } else {
      EXPECT_EQ(t.data<T>()[i], values[i]) << "element " << i;
    }
  }
}

// A user error whose message contains every one of `parts`.
inline void expect_user_error(const Status& s, std::vector<std::string> parts) {
  ASSERT_FALSE(s.is_ok()) << "expected an error";
  EXPECT_EQ(s.kind(), ErrorKind::kUser) << s.message();
  for (const std::string& p : parts) EXPECT_NE(s.message().find(p), std::string::npos) << s.message();
}

}  // namespace opfuse::testing
