// A model built in C++: a small MobileNet-style classifier and a transformer encoder layer,
// with the builder's blocks and fixed-seed weights, run eagerly and compiled at O2.
#include <cstdio>

#include "core/random.h"
#include "frontend/builder/blocks.h"
#include "pipelines/pipeline.h"
#include "runtime/compare.h"
#include "runtime/session.h"

using namespace opfuse;

namespace {

Result<Graph> build_classifier() {
  ModelBuilder b("tiny_mobilenet", /*seed=*/7);
  Var x = b.input("image", {1, 3, 64, 64});
  Var h = conv2d_bn_act(b, "stem", x, 16, 3, {.stride = 2, .bias = false}, Activation::kRelu6);
  h = depthwise_separable_block(b, "block1", h, 32, /*stride=*/2);
  h = inverted_residual_block(b, "block2", h, 32, /*expand_ratio=*/4);
  h = bottleneck_block(b, "block3", h, 16);
  h = b.flatten(b.global_average_pool(h));
  h = dense_bn_act(b, "fc1", h, 32, Activation::kHardSwish);
  b.output(b.softmax(b.linear(h, 10)), "probabilities");
  return b.finish();
}

Result<Graph> build_encoder() {
  ModelBuilder b("tiny_encoder", /*seed=*/8);
  Var x = b.input("tokens", {2, 16, 64});
  b.output(transformer_encoder_layer(b, "layer0", x, /*num_heads=*/4, /*ffn_dim=*/128), "hidden");
  return b.finish();
}

Status compare(Graph graph) {
  Random rng(1);
  TensorMap inputs;
  for (const Value* in : graph.inputs()) {
    Tensor t = Tensor::zeros(in->dtype, *static_dims(*in->shape)).value();
    fill_uniform(t, rng, -1, 1);
    inputs[in->name()] = t;
  }
  SessionOptions eager;
  eager.mode = ExecutionMode::kEager;
  const std::string name = graph.name;
  const size_t nodes = graph.num_nodes();
  OPFUSE_ASSIGN_OR_RETURN(Session e, Session::create(graph.clone(), eager));
  SessionOptions o2;
  o2.level = OptLevel::kO2;
  OPFUSE_ASSIGN_OR_RETURN(Session g, Session::create(std::move(graph), o2));
  OPFUSE_ASSIGN_OR_RETURN(TensorMap want, e.run(inputs));
  OPFUSE_ASSIGN_OR_RETURN(TensorMap got, g.run(inputs));
  OPFUSE_ASSIGN_OR_RETURN(auto plan, g.plan_for(inputs));
  double worst = 0;
  for (const auto& [out, t] : want) worst = std::max(worst, max_relative_difference(got.at(out), t));
  std::printf("%-16s %4zu nodes -> %3zu kernels at O2, max rel diff vs eager %.2e\n", name.c_str(),
              nodes, plan->kernels_per_run(), worst);
  if (worst > 1e-4) return Status::internal_error(name + ": O2 differs from eager");
  return Status::ok();
}

}  // namespace

int main() {
  for (auto build : {build_classifier, build_encoder}) {
    Result<Graph> g = build();
    Status s = g.is_ok() ? compare(std::move(*g)) : g.status();
    if (!s.is_ok()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return 1;
    }
  }
  return 0;
}
