// Graph mode against eager mode on the model built in code, concurrency, arena reuse and the
// input checks every mode shares.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "core/random.h"
#include "frontend/builder/demo_model.h"
#include "pipelines/pipeline.h"
#include "runtime/session.h"
#include "runtime/compare.h"

namespace opfuse {
namespace {

Tensor random_image(int64_t size, uint64_t seed) {
  Tensor t = Tensor::zeros(DType::kF32, {1, 3, size, size}).value();
  Random rng(seed);
  fill_uniform(t, rng, -1, 1);
  return t;
}

Session make_session(ExecutionMode mode, OptLevel level, int64_t size = 64) {
  SessionOptions options;
  options.mode = mode;
  options.level = level;
  auto session = Session::create(build_demo_cnn(size).value(), options);
  EXPECT_TRUE(session.is_ok()) << session.status().message();
  return std::move(session).value();
}

TEST(GraphModeTest, EveryLevelMatchesEager) {
  const Session eager = make_session(ExecutionMode::kEager, OptLevel::kO0);
  const TensorMap inputs = {{"image", random_image(64, 1)}};
  const Tensor want = eager.run(inputs)->at("probabilities");
  for (OptLevel level : {OptLevel::kO0, OptLevel::kO1, OptLevel::kO2, OptLevel::kO3}) {
    const Session graph = make_session(ExecutionMode::kGraph, level);
    auto got = graph.run(inputs);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    EXPECT_LE(max_relative_difference(got->at("probabilities"), want), 1e-4) << opt_level_name(level);
  }
}

TEST(GraphModeTest, ArenaIsFarSmallerThanEagerIntermediates) {
  const Session graph = make_session(ExecutionMode::kGraph, OptLevel::kO1, 128);
  const TensorMap inputs = {{"image", random_image(128, 2)}};
  auto plan = graph.plan_for(inputs);
  ASSERT_TRUE(plan.is_ok());
  const Session eager = make_session(ExecutionMode::kEager, OptLevel::kO0, 128);
  EagerStats stats;
  ASSERT_TRUE(eager.run_eager_with_stats(inputs, stats).is_ok());
  EXPECT_GT(stats.allocated_bytes, 0);
  // The stem's output alone is a third of this small model's intermediates, so the ratio here
  // is about 1/3; on ResNet-50 the arena is 1/15 of eager's intermediates (see docs/benchmarks.md).
  EXPECT_LE((*plan)->arena_bytes() * 2, stats.allocated_bytes)
      << "arena " << (*plan)->arena_bytes() << " vs eager intermediates " << stats.allocated_bytes;
  // O1 folds the five BatchNormalization nodes and Flatten runs no kernel (a view).
  EXPECT_EQ((*plan)->kernels_per_run(), stats.kernels - 6);
}

TEST(GraphModeTest, ConcurrentRunsOnOneSessionMatchSingleThreadedResults) {
  const Session graph = make_session(ExecutionMode::kGraph, OptLevel::kO1);
  std::vector<TensorMap> inputs;
  std::vector<Tensor> expected;
  for (int i = 0; i < 8; ++i) {
    inputs.push_back({{"image", random_image(64, 100 + i)}});
    expected.push_back(graph.run(inputs.back())->at("probabilities"));
  }
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 10; ++round) {
        const int i = (t + round) % 8;
        auto out = graph.run(inputs[i]);
        if (!out.is_ok() || std::memcmp(out->at("probabilities").raw_data(), expected[i].raw_data(),
                                        expected[i].nbytes()) != 0) {
          ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

// A run writes its outputs into the previous run's output buffers when the caller has released
// them (large buffers would otherwise come from the OS afresh every run), never into ones the
// caller still holds.
TEST(GraphModeTest, ReleasedOutputsAreReusedAndHeldOnesAreNot) {
  const Session graph = make_session(ExecutionMode::kGraph, OptLevel::kO1);
  const TensorMap a = {{"image", random_image(64, 7)}}, b = {{"image", random_image(64, 8)}};
  const Tensor held = graph.run(a)->at("probabilities");
  const Tensor want_a = held.clone();
  const void* released = nullptr;
  {
    const Tensor second = graph.run(b)->at("probabilities");
    EXPECT_NE(second.raw_data(), held.raw_data());
    EXPECT_EQ(std::memcmp(held.raw_data(), want_a.raw_data(), want_a.nbytes()), 0) << "a held output was overwritten";
    EXPECT_NE(std::memcmp(second.raw_data(), want_a.raw_data(), want_a.nbytes()), 0);
    released = second.raw_data();
  }
  const Tensor third = graph.run(a)->at("probabilities");
  EXPECT_EQ(third.raw_data(), released);
  EXPECT_EQ(std::memcmp(third.raw_data(), want_a.raw_data(), want_a.nbytes()), 0);
}

TEST(GraphModeTest, WrongInputsAreRejectedBeforeRunning) {
  const Session graph = make_session(ExecutionMode::kGraph, OptLevel::kO1);
  auto wrong_shape = graph.run({{"image", random_image(32, 1)}});
  ASSERT_FALSE(wrong_shape.is_ok());
  EXPECT_NE(wrong_shape.status().message().find("f32[1,3,64,64]"), std::string::npos);
  EXPECT_NE(wrong_shape.status().message().find("f32[1,3,32,32]"), std::string::npos);
  auto wrong_dtype = graph.run({{"image", Tensor::zeros(DType::kF64, {1, 3, 64, 64}).value()}});
  ASSERT_FALSE(wrong_dtype.is_ok());
  EXPECT_NE(wrong_dtype.status().message().find("f64"), std::string::npos);
  auto unknown = graph.run({{"image", random_image(64, 1)}, {"extra", random_image(64, 1)}});
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("'extra'"), std::string::npos);
}

TEST(GraphModeTest, SymbolicDimsCompileOncePerShape) {
  // y = Relu(x) with x: f32[batch, 4]: each batch size gets its own plan, reused afterwards.
  Graph g;
  Value* x = g.add_input("x", DType::kF32, {Dim::symbol("batch"), Dim(4)});
  Node* relu = g.add_node("Relu", {x}, {"y"}).value();
  g.add_output(relu->output(0));
  auto session = Session::create(std::move(g));
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  for (int64_t batch : {1, 3, 1}) {
    Tensor in = Tensor::zeros(DType::kF32, {batch, 4}).value();
    for (int64_t i = 0; i < in.numel(); ++i) in.set_double(i, i % 2 ? 1.5 : -1.5);
    auto out = session->run({{"x", in}});
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    EXPECT_EQ(out->at("y").dims(), (std::vector<int64_t>{batch, 4}));
    EXPECT_EQ(out->at("y").get_double(1), 1.5);
    EXPECT_EQ(out->at("y").get_double(0), 0.0);
  }
  auto a = session->plan_for({{"x", Tensor::zeros(DType::kF32, {1, 4}).value()}});
  auto b = session->plan_for({{"x", Tensor::zeros(DType::kF32, {1, 4}).value()}});
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(a->get(), b->get());
}

}  // namespace
}  // namespace opfuse

namespace opfuse {
namespace {

// RunLimits stop a run between kernels: a deadline already past stops it after the first step, a
// cancel flag likewise; the error says where. The next run without limits is whole and right
// (the stopped run returned its arena).
TEST(GraphModeTest, RunLimitsStopARunBetweenSteps) {
  const Session graph = make_session(ExecutionMode::kGraph, OptLevel::kO1);
  const TensorMap inputs = {{"image", random_image(64, 3)}};
  const Tensor want = graph.run(inputs)->at("probabilities");
  const size_t steps = (*graph.plan_for(inputs))->kernels_per_run();
  ASSERT_GT(steps, 2u);

  RunLimits late;
  late.deadline = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
  auto stopped = graph.run(inputs, late);
  ASSERT_FALSE(stopped.is_ok());
  EXPECT_EQ(stopped.status().kind(), ErrorKind::kUser);
  EXPECT_NE(stopped.status().message().find(str_cat("stopped at its time limit after 1 of ", steps, " steps")),
            std::string::npos)
      << stopped.status().message();

  std::atomic<bool> cancel{true};
  auto cancelled = graph.run(inputs, RunLimits{std::nullopt, &cancel});
  ASSERT_FALSE(cancelled.is_ok());
  EXPECT_NE(cancelled.status().message().find("cancelled after 1 of"), std::string::npos);

  cancel = false;
  RunLimits generous{std::chrono::steady_clock::now() + std::chrono::hours(1), &cancel};
  auto whole = graph.run(inputs, generous);
  ASSERT_TRUE(whole.is_ok()) << whole.status().message();
  EXPECT_EQ(max_relative_difference(whole->at("probabilities"), want), 0.0);
}

}  // namespace
}  // namespace opfuse
