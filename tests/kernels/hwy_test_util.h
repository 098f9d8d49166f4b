// One-node graphs for comparing a Highway kernel with the node's reference kernel.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/random.h"
#include "kernels/kernel.h"
#include "ops/op_def.h"
#include "ops/infer_shapes.h"

namespace opfuse::hwy_test {

struct In {
  In(std::vector<int64_t> d, DType t = DType::kF32, std::optional<Tensor> c = std::nullopt, double l = -3,
     double h = 3, std::optional<std::vector<float>> v = std::nullopt)
      : dims(std::move(d)), dtype(t), constant(std::move(c)), lo(l), hi(h), values(std::move(v)) {}
  std::vector<int64_t> dims;
  DType dtype = DType::kF32;
  std::optional<Tensor> constant;  // a graph constant (visible to the kernel at compile time)
  double lo = -3, hi = 3;          // range of random data
  std::optional<std::vector<float>> values;  // explicit data (f32), overrides the range
};

struct Case {
  Graph graph;
  Node* node = nullptr;
  std::vector<Tensor> inputs;  // one per node input, runtime data or the constant
};

inline std::unique_ptr<Case> make_case(const std::string& op, std::vector<In> ins, Attributes attrs = {},
                                       uint64_t seed = 1, int num_outputs = 1) {
  auto c = std::make_unique<Case>();
  c->graph.opset_imports[""] = 17;
  Random rng(seed);
  std::vector<Value*> values;
  for (size_t i = 0; i < ins.size(); ++i) {
    In& in = ins[i];
    if (in.constant) {
      values.push_back(c->graph.add_constant(str_cat("c", i), *in.constant));
      c->inputs.push_back(*in.constant);
      continue;
    }
    values.push_back(c->graph.add_input(str_cat("x", i), in.dtype, make_shape(in.dims)));
    Tensor t = Tensor::zeros(in.dtype, in.dims).value();
    if (in.values) {
      for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = (*in.values)[k % in.values->size()];
    } else {
      fill_uniform(t, rng, in.lo, in.hi);
    }
    c->inputs.push_back(t);
  }
  std::vector<std::string> outs(num_outputs);
  for (int i = 0; i < num_outputs; ++i) outs[i] = str_cat("y", i);
  auto node = c->graph.add_node(op, values, outs, std::move(attrs));
  EXPECT_TRUE(node.is_ok()) << node.status().message();
  c->node = node.value();
  for (Value* v : c->node->outputs()) c->graph.add_output(v);
  const Status st = infer_shapes(c->graph);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return c;
}

inline std::vector<Tensor> allocate_outputs(const Node& node) {
  std::vector<Tensor> outs;
  for (const Value* v : node.outputs()) outs.push_back(Tensor::zeros(v->dtype, *static_dims(*v->shape)).value());
  return outs;
}

inline Status run_kernel(const Kernel& k, const Case& c, std::vector<Tensor>& outs) {
  std::vector<const Tensor*> in;
  for (const Tensor& t : c.inputs) in.push_back(&t);
  std::vector<Tensor*> out;
  for (Tensor& t : outs) out.push_back(&t);
  return k.run(in, out);
}

inline std::unique_ptr<Kernel> compile(const Case& c) {
  KernelCompileContext ctx{*c.node, {}, 1};
  for (const Value* v : c.node->inputs()) ctx.constants.push_back(v ? v->constant() : nullptr);
  auto k = create_kernel(ctx);
  EXPECT_TRUE(k.is_ok()) << k.status().message();
  return std::move(k).value();
}

// |got - want| <= rel * |want| + abs; NaN must meet NaN and infinities must be equal.
inline void expect_close(const Tensor& got, const Tensor& want, double rel, double abs,
                         const std::string& what) {
  ASSERT_EQ(got.dims(), want.dims()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  int reported = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.get_double(i), w = want.get_double(i);
    bool ok;
    if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
    } else if (std::isinf(w) || std::isinf(g)) {
      ok = g == w;
    } else {
      ok = std::fabs(g - w) <= rel * std::fabs(w) + abs;
    }
    if (!ok && reported++ < 5) ADD_FAILURE() << what << ": element " << i << " is " << g << ", reference " << w;
  }
}

// Runs the optimised kernel (expected to be `kernel_name`) and the reference kernel on the same
// inputs and compares every output. Returns the optimised outputs.
inline std::vector<Tensor> check_against_reference(const Case& c, const std::string& kernel_name,
                                                   double rel = 1e-5, double abs = 1e-6) {
  auto k = compile(c);
  EXPECT_EQ(k->name(), kernel_name) << c.node->describe();
  auto got = allocate_outputs(*c.node);
  auto want = allocate_outputs(*c.node);
  Status st = run_kernel(*k, c, got);
  EXPECT_TRUE(st.is_ok()) << st.message();
  st = run_kernel(*make_reference_kernel(*c.node), c, want);
  EXPECT_TRUE(st.is_ok()) << st.message();
  for (size_t i = 0; i < got.size(); ++i) {
    expect_close(got[i], want[i], rel, abs, str_cat(c.node->describe(), " output ", i));
  }
  return got;
}

// The kernel (expected to be `kernel_name`) declares input 0 in place and, run with output 0
// sharing input 0's storage, gives the reference's result within `rel` and `abs` (expect_close).
inline void expect_in_place_matches_reference(const Case& c, const std::string& kernel_name, double rel, double abs,
                                              const std::string& what) {
  auto k = compile(c);
  ASSERT_EQ(k->name(), kernel_name) << what;
  EXPECT_EQ(k->in_place_input(), 0) << what;
  auto want = allocate_outputs(*c.node);
  ASSERT_TRUE(run_kernel(*make_reference_kernel(*c.node), c, want).is_ok()) << what;
  std::vector<Tensor> alias = {c.inputs[0]};  // shares input 0's storage
  ASSERT_TRUE(run_kernel(*k, c, alias).is_ok()) << what;
  expect_close(c.inputs[0], want[0], rel, abs, what);
}

}  // namespace opfuse::hwy_test
