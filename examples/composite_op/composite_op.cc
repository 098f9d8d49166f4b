// A composite op: MyOp(x, y) = (x - y) * x, defined in C++ as a subgraph of primitives, used in
// a net that first computes pow(x * 2, 3). Eager mode runs MyOp's body node by node; graph mode
// inlines it before optimising, so at O2 the fuser sees Mul, Pow, Sub, Mul as one chain.
#include <cmath>
#include <cstdio>

#include "core/random.h"
#include "frontend/builder/composite.h"
#include "pipelines/pipeline.h"
#include "runtime/compare.h"
#include "runtime/session.h"

using namespace opfuse;

namespace {

Status register_my_op() {
  CompositeOpDef my_op;
  my_op.name = "MyOp";
  my_op.domain = "com.example.composite";
  my_op.min_inputs = my_op.max_inputs = 2;
  my_op.summary = "(x - y) * x";
  my_op.body = [](ModelBuilder& b, const std::vector<Var>& in, const AttrReader&) {
    return std::vector<Var>{(in[0] - in[1]) * in[0]};
  };
  return register_composite_op(std::move(my_op));
}

Status run() {
  OPFUSE_TRY(register_my_op());
  ModelBuilder b("composite_example", 0);
  Var x = b.input("x", {4, 256});
  Var y = b.input("y", {4, 256});
  Var a = b.pow(x * 2.0, 3.0);
  b.output(b.op("MyOp", {a, y}, {}, "my_op", "com.example.composite"), "z");
  OPFUSE_ASSIGN_OR_RETURN(Graph graph, b.finish());

  Tensor tx = Tensor::zeros(DType::kF32, {4, 256}).value();
  Tensor ty = Tensor::zeros(DType::kF32, {4, 256}).value();
  Random rng(3);
  fill_uniform(tx, rng, -1, 1);
  fill_uniform(ty, rng, -1, 1);
  const TensorMap inputs = {{"x", tx}, {"y", ty}};

  SessionOptions eager;
  eager.mode = ExecutionMode::kEager;
  OPFUSE_ASSIGN_OR_RETURN(Session e, Session::create(graph.clone(), eager));
  OPFUSE_ASSIGN_OR_RETURN(TensorMap want, e.run(inputs));
  SessionOptions o2;
  o2.level = OptLevel::kO2;
  OPFUSE_ASSIGN_OR_RETURN(Session g, Session::create(graph.clone(), o2));
  OPFUSE_ASSIGN_OR_RETURN(TensorMap got, g.run(inputs));
  OPFUSE_ASSIGN_OR_RETURN(auto plan, g.plan_for(inputs));

  // The first element by hand: a = (2x)^3, z = (a - y) * a.
  const double x0 = tx.get_double(0), y0 = ty.get_double(0), a0 = std::pow(2 * x0, 3);
  const double by_hand = (a0 - y0) * a0;
  const double diff = max_relative_difference(got.at("z"), want.at("z"));
  std::printf("MyOp(x, y) = (x - y) * x inside pow(x * 2, 3): %zu nodes before, %zu kernels at O2\n",
              graph.num_nodes(), plan->kernels_per_run());
  std::printf("z[0] = %.6f (by hand %.6f); O2 vs eager max rel diff %.2e\n", got.at("z").get_double(0),
              by_hand, diff);
  if (diff > 1e-5 || std::abs(got.at("z").get_double(0) - by_hand) > 1e-4 * std::max(1.0, std::abs(by_hand))) {
    return Status::internal_error("graph mode disagrees with eager or with the hand computation");
  }
  return Status::ok();
}

}  // namespace

int main() {
  Status s = run();
  if (!s.is_ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 1;
  }
  return 0;
}
