// Helpers for the nn op tests: build a one-node graph, infer shapes, run the reference kernel.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ops/reference.h"
#include "ops/infer_shapes.h"

namespace opfuse::nn_test {

// Deterministic test data: ((i * mul) % mod - off) * scale, matching the generator used for the
// PyTorch-computed expected values pasted into the tests.
inline Tensor seq(std::vector<int64_t> dims, int mul = 7, int mod = 11, int off = 5,
                  double scale = 0.25) {
  Tensor t = Tensor::zeros(DType::kF32, dims).value();
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.data<float>()[i] = static_cast<float>(((i * mul) % mod - off) * scale);
  }
  return t;
}

inline Tensor random_tensor(std::vector<int64_t> dims, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor t = Tensor::zeros(DType::kF32, dims).value();
  for (float& v : t.values<float>()) v = dist(gen);
  return t;
}

struct OpRun {
  Status status;                  // first failure (inference or kernel), else ok
  std::vector<Shape> inferred;    // inferred output shapes (empty shape if rank unknown)
  std::vector<Tensor> outputs;
};

// Runs `op` named 'n1' on `inputs` (undefined tensors are omitted optional inputs). Inputs listed
// in `constants` become initializers, the rest graph inputs with their static shapes.
inline OpRun run_op(const std::string& op, const std::vector<Tensor>& inputs, Attributes attrs = {},
                    int num_outputs = 1, const std::vector<size_t>& constants = {}) {
  OpRun r;
  Graph g;
  std::vector<Value*> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = str_cat("in", i);
    if (!inputs[i].defined()) {
      values.push_back(nullptr);
    } else if (std::find(constants.begin(), constants.end(), i) != constants.end()) {
      values.push_back(g.add_constant(name, inputs[i]));
    } else {
      values.push_back(g.add_input(name, inputs[i].dtype(), inputs[i].shape()));
    }
  }
  std::vector<std::string> outs;
  for (int i = 0; i < num_outputs; ++i) outs.push_back(str_cat("out", i));
  auto node = g.add_node(op, values, outs, std::move(attrs), "n1");
  if (!node.is_ok()) {
    r.status = node.status();
    return r;
  }
  r.status = infer_shapes(g);
  if (!r.status.is_ok()) return r;
  for (Value* v : (*node)->outputs()) r.inferred.push_back(v->shape ? *v->shape : Shape{});
  std::vector<const Tensor*> args;
  for (const Tensor& t : inputs) args.push_back(t.defined() ? &t : nullptr);
  auto result = run_reference(**node, args);
  if (!result.is_ok()) {
    r.status = result.status();
    return r;
  }
  r.outputs = std::move(*result);
  return r;
}

// Inference only, on declared (possibly symbolic) input shapes; W-like inputs in `constants`
// get zero data of their (static) shape.
inline Result<std::vector<std::optional<Shape>>> infer_op(
    const std::string& op, const std::vector<std::pair<DType, std::optional<Shape>>>& inputs,
    Attributes attrs = {}, int num_outputs = 1, const std::vector<size_t>& constants = {}) {
  Graph g;
  std::vector<Value*> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& [dtype, shape] = inputs[i];
    if (std::find(constants.begin(), constants.end(), i) != constants.end()) {
      values.push_back(g.add_constant(str_cat("in", i),
                                      Tensor::zeros(dtype, *static_dims(*shape)).value()));
    } else if (shape) {
      values.push_back(g.add_input(str_cat("in", i), dtype, *shape));
    } else {
      Value* v = g.add_value(str_cat("in", i), dtype, std::nullopt);
      values.push_back(v);
    }
  }
  std::vector<std::string> outs;
  for (int i = 0; i < num_outputs; ++i) outs.push_back(str_cat("out", i));
  OPFUSE_ASSIGN_OR_RETURN(Node * node, g.add_node(op, values, outs, std::move(attrs), "n1"));
  OPFUSE_TRY(infer_shapes(g));
  std::vector<std::optional<Shape>> shapes;
  for (Value* v : node->outputs()) shapes.push_back(v->shape);
  return shapes;
}

inline void expect_near_values(const Tensor& actual, const std::vector<float>& expected,
                               double tol = 1e-5) {
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(expected.size())) << actual.type_string();
  for (int64_t i = 0; i < actual.numel(); ++i) {
    EXPECT_NEAR(actual.get_double(i), expected[i], tol + tol * std::abs(expected[i]))
        << "element " << i;
  }
}

inline void expect_user_error_naming_node(const Status& s, const std::string& fragment) {
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.kind(), ErrorKind::kUser) << s.message();
  EXPECT_NE(s.message().find("'n1'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
}

}  // namespace opfuse::nn_test
