// Weights held once: a compiled plan drops the graph's copy of the weights its kernels packed
// (Kernel::reads_input), and a session whose model came from a file releases them too, reading
// them back from the file for its next compile (Session::graph).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/file_io.h"
#include "core/random.h"
#include "frontend/onnx/exporter.h"
#include "frontend/onnx/importer.h"
#include "runtime/compare.h"
#include "runtime/session.h"

namespace opfuse {
namespace {

namespace fs = std::filesystem;

Tensor random_tensor(std::vector<int64_t> dims, uint64_t seed) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(dims)).value();
  Random rng(seed);
  fill_uniform(t, rng, -1, 1);
  return t;
}

// y = Relu(x W + b) and x + c, with x: f32[batch, 32]; `seed` picks the weights.
Graph dense_model(uint64_t seed) {
  Graph g;
  Value* x = g.add_input("x", DType::kF32, {Dim::symbol("batch"), Dim(32)});
  Value* w = g.add_constant("w", random_tensor({32, 48}, seed));
  Value* b = g.add_constant("b", random_tensor({48}, seed + 1));
  Value* c = g.add_constant("c", random_tensor({32}, seed + 2));
  Value* xw = g.add_node("MatMul", {x, w}, {"xw"}).value()->output(0);
  Value* z = g.add_node("Add", {xw, b}, {"z"}).value()->output(0);
  g.add_output(g.add_node("Relu", {z}, {"y"}).value()->output(0));
  g.add_output(g.add_node("Add", {x, c}, {"x_plus_c"}).value()->output(0));
  return g;
}

class ReleasedWeights : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::path(::testing::TempDir()) /
             str_cat("released_weights_", ::testing::UnitTest::GetInstance()->current_test_info()->name(), ".onnx"))
                .string();
    write_model(1);
  }
  void TearDown() override { fs::remove(path_); }

  // Writes the model over path_'s own file (the same inode), as an editor saving in place would.
  void write_model(uint64_t seed) {
    const std::string bytes = export_onnx(dense_model(seed)).value();
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  Session session(OptLevel level = OptLevel::kO3) const {
    SessionOptions options;
    options.level = level;
    auto graph = load_onnx_file(path_);
    EXPECT_TRUE(graph.is_ok()) << graph.status().message();
    return Session::create(std::move(graph).value(), options).value();
  }
  // Eager mode on the weights of `seed`.
  static TensorMap want(const Tensor& x, uint64_t seed) {
    SessionOptions eager;
    eager.mode = ExecutionMode::kEager;
    return Session::create(dense_model(seed), eager).value().run({{"x", x}}).value();
  }

  std::string path_;
};

bool has_data(const Graph& g, const std::string& name) { return g.find_value(name)->constant()->raw_data() != nullptr; }

TEST_F(ReleasedWeights, PlansHoldPackedWeightsOnceAndTheSessionReadsThemBack) {
  for (OptLevel level : {OptLevel::kO1, OptLevel::kO3}) {
    const Session s = session(level);
    // Batch 1 runs cpu.gemv, 4 cpu.gemm, and NaN inputs get a plan of their own: three compiles,
    // each after the previous one released the weights.
    Tensor nan_x = random_tensor({4, 32}, 9);
    nan_x.data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
    for (const Tensor& x : {random_tensor({1, 32}, 7), random_tensor({4, 32}, 8), nan_x}) {
      auto got = s.run({{"x", x}});
      ASSERT_TRUE(got.is_ok()) << got.status().message();
      EXPECT_LE(max_relative_difference(*got, want(x, 1)), 1e-5) << opt_level_name(level);
      const bool has_nan = x.dims()[0] == 4 && std::isnan(x.data<float>()[5]);
      if (has_nan) EXPECT_TRUE(std::isnan(got->at("y").data<float>()[0])) << "row 0 holds the NaN";
      EXPECT_FALSE(has_data(s.graph(), "w")) << opt_level_name(level) << ": the session still holds the weights";
      auto plan = s.plan_for({{"x", x}});
      ASSERT_TRUE(plan.is_ok());
      // c is read when the plan runs: the session shares the plan's copy.
      ASSERT_TRUE(has_data(s.graph(), "c"));
      EXPECT_EQ(s.graph().find_value("c")->constant()->raw_data(),
                (*plan)->graph().find_value("c")->constant()->raw_data());
      int released = 0;
      for (const Value* v : (*plan)->graph().values()) released += v->is_constant() && v->constant()->raw_data() == nullptr;
      EXPECT_GE(released, 1) << opt_level_name(level) << ": the plan's graph still holds the packed weights";
    }
    EXPECT_EQ(s.compile_count(), 3);
    // The model with every weight, read again from the file.
    auto model = s.model();
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    EXPECT_EQ(max_relative_difference(*model->find_value("w")->constant(), *dense_model(1).find_value("w")->constant()), 0.0);
  }
}

TEST_F(ReleasedWeights, TheFileStaysReadableAfterItsPathIsDeleted) {
  const Session s = session();
  ASSERT_TRUE(s.run({{"x", random_tensor({1, 32}, 7)}}).is_ok());
  fs::remove(path_);
  const Tensor x = random_tensor({3, 32}, 8);
  auto got = s.run({{"x", x}});
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_LE(max_relative_difference(*got, want(x, 1)), 1e-5);
}

TEST_F(ReleasedWeights, AFileRewrittenInPlaceIsNamedNotRead) {
  const Session s = session();
  const Tensor one = random_tensor({1, 32}, 7);
  ASSERT_TRUE(s.run({{"x", one}}).is_ok());
  write_model(2);  // other weights, same file
  auto got = s.run({{"x", random_tensor({3, 32}, 8)}});
  ASSERT_FALSE(got.is_ok());
  EXPECT_EQ(got.status().kind(), ErrorKind::kUser);
  EXPECT_NE(got.status().message().find("'w'"), std::string::npos) << got.status().message();
  EXPECT_NE(got.status().message().find("changed since the session loaded them"), std::string::npos);
  // The plan compiled before still runs on the weights it packed.
  auto again = s.run({{"x", one}});
  ASSERT_TRUE(again.is_ok()) << again.status().message();
  EXPECT_LE(max_relative_difference(*again, want(one, 1)), 1e-5);
}

TEST_F(ReleasedWeights, AGraphBuiltInCodeOrEditedKeepsItsWeights) {
  Graph edited = load_onnx_file(path_).value();
  edited.set_constant(edited.find_value("b"), random_tensor({48}, 3));  // the file no longer holds the graph's weights
  std::vector<Graph> graphs;
  graphs.push_back(dense_model(1));  // no file to read them back from
  graphs.push_back(std::move(edited));
  for (Graph& g : graphs) {
    const Session s = Session::create(std::move(g)).value();
    ASSERT_TRUE(s.run({{"x", random_tensor({2, 32}, 7)}}).is_ok());
    EXPECT_TRUE(has_data(s.graph(), "w"));
  }
}

TEST_F(ReleasedWeights, WeightsTheCallerHoldsAreKeptNotReadAgain) {
  const Graph loaded = load_onnx_file(path_).value();
  const Session s = Session::create(loaded.clone()).value();
  ASSERT_TRUE(s.run({{"x", random_tensor({2, 32}, 7)}}).is_ok());
  EXPECT_TRUE(has_data(s.graph(), "w"));
  write_model(2);  // a compile reading the file would now fail
  const Tensor x = random_tensor({3, 32}, 8);
  auto got = s.run({{"x", x}});
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_LE(max_relative_difference(*got, want(x, 1)), 1e-5);
}

}  // namespace
}  // namespace opfuse
