// Shared by the kernel tests that compare an optimised kernel with the reference on one node:
// random f32 tensors (uniform in [-scale, scale]) and a graph holding the node alone.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/target.h"
#include "core/tensor.h"
#include "kernels/kernel.h"
#include "ops/fused.h"
#include "ops/infer_shapes.h"

namespace opfuse::onednn_test {

inline Tensor random_f32(const std::vector<int64_t>& dims, std::mt19937& gen, float scale = 1.0f) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  Tensor t = Tensor::zeros(DType::kF32, dims).value();
  for (float& v : t.values<float>()) v = dist(gen);
  return t;
}

// Whether the dispatched vector is a layout block (8 floats on AVX2, 16 with AVX-512), which our
// own blocked conv kernels require; below AVX2 the vector (4 floats) is none and they never apply.
inline bool vector_is_a_block() { return active_target().isa >= IsaTier::kAvx2; }

// Dims of a logical [N, C, H, W] in a BlockedConv layout (block 0: channels-last, one block of C).
inline std::vector<int64_t> blocked_dims(int64_t n, int64_t c, int64_t h, int64_t w, int64_t block) {
  const int64_t lanes = block == 0 ? c : block;
  return {n, (c + lanes - 1) / lanes, h, w, lanes};
}

// Max |got - want| / max |want| over the real channels of blocked tensors of dims `y` holding `m`
// channels (padded lanes are unspecified); a NaN must meet a NaN, an Inf the same Inf (else Inf).
inline double blocked_relative_error(const Tensor& got, const Tensor& want, const std::vector<int64_t>& y,
                                     int64_t m) {
  double diff = 0, scale = 1e-30;
  const int64_t lanes = y[4], plane = y[2] * y[3] * lanes;
  for (int64_t i = 0; i < want.numel(); ++i) {
    if ((i / plane) % y[1] * lanes + i % lanes >= m) continue;
    const double g = got.get_double(i), w = want.get_double(i);
    if (std::isnan(w) || std::isnan(g)) {
      if (std::isnan(w) != std::isnan(g)) return INFINITY;
      continue;
    }
    if (std::isinf(w) || std::isinf(g)) {
      if (g != w) return INFINITY;
      continue;
    }
    diff = std::max(diff, std::abs(g - w));
    scale = std::max(scale, std::abs(w));
  }
  return diff / scale;
}

// One input of the node under test: a graph input, or a constant (weights) when `constant`.
struct Arg {
  Tensor tensor;  // undefined: omitted optional input
  bool constant = false;
};
inline Arg in(Tensor t) { return {std::move(t), false}; }
inline Arg cst(Tensor t) { return {std::move(t), true}; }

// One node in its own graph, shapes inferred, ready for create_kernel.
struct OneNode {
  Graph graph;
  Node* node = nullptr;
  std::vector<Tensor> inputs;
  std::vector<const Tensor*> constants;

  KernelCompileContext context() const { return KernelCompileContext{*node, constants, 1}; }
  std::vector<const Tensor*> args() const {
    std::vector<const Tensor*> a;
    for (const Tensor& t : inputs) a.push_back(t.defined() ? &t : nullptr);
    return a;
  }
  // Fresh zero outputs of the node's inferred (static) shapes.
  std::vector<Tensor> make_outputs() const {
    std::vector<Tensor> out;
    for (Value* v : node->outputs()) {
      out.push_back(v ? Tensor::zeros(v->dtype, *static_dims(*v->shape)).value() : Tensor());
    }
    return out;
  }
  // Output 0 of running `k` on the inputs.
  Tensor run(const Kernel& k) const {
    std::vector<Tensor> out = make_outputs();
    Tensor* y = &out[0];
    const Status s = k.run(args(), {&y, 1});
    EXPECT_TRUE(s.is_ok()) << s.message();
    return std::move(out[0]);
  }
};

// `op` ("Fused..." ops in opfuse's domain) on `args`, with `num_outputs` outputs.
inline std::unique_ptr<OneNode> make_node(const std::string& op, const std::vector<Arg>& args,
                                          Attributes attrs = {}, int num_outputs = 1) {
  auto n = std::make_unique<OneNode>();
  n->inputs.reserve(args.size());  // `constants` points into it
  std::vector<Value*> values;
  for (size_t i = 0; i < args.size(); ++i) {
    const Tensor& t = n->inputs.emplace_back(args[i].tensor);
    n->constants.push_back(args[i].constant && t.defined() ? &t : nullptr);
    const std::string name = str_cat("in", i);
    if (!t.defined()) {
      values.push_back(nullptr);
    } else if (args[i].constant) {
      values.push_back(n->graph.add_constant(name, t));
    } else {
      values.push_back(n->graph.add_input(name, t.dtype(), t.shape()));
    }
  }
  std::vector<std::string> outs;
  for (int i = 0; i < num_outputs; ++i) outs.push_back(str_cat("out", i));
  const bool opfuse_domain = op.rfind("Fused", 0) == 0 || op == "BlockedConv";
  auto node = n->graph.add_node(op, values, outs, std::move(attrs), "n1",
                                opfuse_domain ? std::string(kFusedDomain) : std::string());
  EXPECT_TRUE(node.is_ok()) << node.status().message();
  if (!node.is_ok()) return nullptr;
  n->node = *node;
  const Status s = infer_shapes(n->graph);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return s.is_ok() ? std::move(n) : nullptr;
}

// For the kernel benches: microseconds per run of `k`, running it on each node's inputs in turn
// (distinct inputs, so each run reads its X from L2 or L3, as after the op before), `passes`
// times over, into the output `y`.
inline double us_per_run(const Kernel& k, const std::vector<std::unique_ptr<OneNode>>& nodes, Tensor* y, int passes) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int pass = 0; pass < passes; ++pass) {
    for (const auto& n : nodes) EXPECT_TRUE(k.run(n->args(), {&y, 1}).is_ok());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return seconds / static_cast<double>(passes * static_cast<int>(nodes.size())) * 1e6;
}

}  // namespace opfuse::onednn_test
