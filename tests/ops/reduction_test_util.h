// Small helpers for the reduction and resize op tests: build a one-node graph, infer, run.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ops/reference.h"
#include "ops/infer_shapes.h"

namespace opfuse::testing_ops {

struct OneNode {
  Graph g;
  Node* node = nullptr;
  std::vector<Tensor> inputs;  // undefined for omitted optional inputs
};

// Input 0 is a graph input of x's type (or `x_shape` when given, for symbolic-shape tests);
// the others are constants (std::nullopt: omitted optional input).
inline std::unique_ptr<OneNode> make_node(const std::string& op, const Tensor& x,
                                          std::vector<std::optional<Tensor>> extra = {},
                                          Attributes attrs = {}, int num_outputs = 1,
                                          std::optional<Shape> x_shape = std::nullopt) {
  auto n = std::make_unique<OneNode>();
  std::vector<Value*> ins = {n->g.add_input("x", x.dtype(), x_shape ? *x_shape : x.shape())};
  n->inputs.push_back(x);
  for (size_t i = 0; i < extra.size(); ++i) {
    if (extra[i]) {
      ins.push_back(n->g.add_constant(str_cat("c", i), *extra[i]));
      n->inputs.push_back(*extra[i]);
    } else {
      ins.push_back(nullptr);
      n->inputs.emplace_back();
    }
  }
  std::vector<std::string> outs;
  for (int i = 0; i < num_outputs; ++i) outs.push_back(str_cat("y", i));
  auto node = n->g.add_node(op, ins, outs, std::move(attrs), "node_under_test");
  EXPECT_TRUE(node.is_ok()) << node.status().message();
  n->node = node.is_ok() ? *node : nullptr;
  return n;
}

inline Result<std::vector<Tensor>> run(OneNode& n) {
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : n.inputs) ptrs.push_back(t.defined() ? &t : nullptr);
  return run_reference(*n.node, ptrs);
}

// Infers shapes and runs the node; fails the test on any error.
inline std::vector<Tensor> infer_and_run(OneNode& n) {
  Status s = infer_shapes(n.g);
  EXPECT_TRUE(s.is_ok()) << s.message();
  auto r = run(n);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  if (!r.is_ok()) return {};
  // The kernel's output dims must agree with inference.
  for (size_t i = 0; i < r->size(); ++i) {
    const Value* v = n.node->output(i);
    EXPECT_TRUE(v->shape && *v->shape == (*r)[i].shape())
        << "output " << i << ": inferred " << (v->shape ? shape_to_string(*v->shape) : "none")
        << ", kernel " << (*r)[i].type_string();
  }
  return std::move(r).value();
}

inline void expect_values(const Tensor& t, const std::vector<double>& want, double tol = 1e-5) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size())) << t.type_string();
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(t.get_double(i))) << "element " << i << ": " << t.get_double(i);
    } else {
      EXPECT_NEAR(t.get_double(i), want[i], tol + tol * std::fabs(want[i])) << "element " << i;
    }
  }
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

inline Tensor i64s(const std::vector<int64_t>& v) {
  return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
}

}  // namespace opfuse::testing_ops
