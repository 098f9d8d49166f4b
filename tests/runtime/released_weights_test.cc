// Weights held once: a compiled plan drops the graph's copy of the weights its kernels packed
// (Kernel::reads_input), and a session whose model came from a file releases them too, reading
// them back from the file for its next compile (Session::graph).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <atomic>
#include <limits>

#include <onnx/onnx_pb.h>

#include "core/file_io.h"
#include "core/random.h"
#include "frontend/onnx/exporter.h"
#include "frontend/onnx/importer.h"
#include "runtime/compare.h"
#include "runtime/session.h"
#include "testing/onnx_builders.h"

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
Graph dense_model(uint64_t seed, Dim batch = Dim::symbol("batch")) {
  Graph g;
  Value* x = g.add_input("x", DType::kF32, {batch, Dim(32)});
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
  void write_model(uint64_t seed, Dim batch = Dim::symbol("batch")) {
    write_bytes(export_onnx(dense_model(seed, batch)).value());
  }
  void write_bytes(const std::string& bytes) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  // A session releasing every weight it can: the model's are small, which a session compiling
  // per input shape would otherwise keep (SessionOptions::keep_weights_bytes).
  Session session(OptLevel level = OptLevel::kO3) const {
    SessionOptions options;
    options.level = level;
    options.keep_weights_bytes = 0;
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

// Counts how a session reads its released weights back.
class CountingSource final : public ConstantSource {
 public:
  explicit CountingSource(std::shared_ptr<const ConstantSource> file) : file_(std::move(file)) {}
  Result<Graph> reload() const override {
    ++reloads;
    return file_->reload();
  }
  std::unordered_set<std::string> constants_read_alone() const override { return file_->constants_read_alone(); }
  std::unordered_map<std::string, Tensor> read_constants(const std::vector<std::string>& names) const override {
    ++reads;
    return file_->read_constants(names);
  }
  std::string describe() const override { return file_->describe(); }

  mutable std::atomic<int> reloads{0};
  mutable std::atomic<int> reads{0};

 private:
  std::shared_ptr<const ConstantSource> file_;
};

// y = Clip(x W, -0.5, 0.5) at opset 10, x: f32[batch, 32]: W a Constant node (as Paddle exports
// weights), Clip's bounds attributes, which the importer turns into constants of its own.
onnx::ModelProto constant_node_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(10);
  testing_onnx::add_symbolic_value_info(m.mutable_graph()->mutable_input(), "x", {"batch", int64_t{32}});
  auto* value = testing_onnx::add_node(m, "Constant", {}, {"W"})->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  const Tensor w = random_tensor({32, 48}, 4);
  value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : w.dims()) value->mutable_t()->add_dims(d);
  value->mutable_t()->set_raw_data(w.raw_data(), w.nbytes());
  testing_onnx::add_node(m, "MatMul", {"x", "W"}, {"xw"});
  auto* clip = testing_onnx::add_node(m, "Clip", {"xw"}, {"y"}, "clip");
  for (auto [name, bound] : {std::pair{"min", -0.5f}, std::pair{"max", 0.5f}}) {
    auto* a = clip->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(bound);
  }
  m.mutable_graph()->add_output()->set_name("y");
  return m;
}

TEST_F(ReleasedWeights, PlansHoldPackedWeightsOnceAndTheSessionReadsThemBack) {
  for (OptLevel level : {OptLevel::kO1, OptLevel::kO3}) {
    const Session s = session(level);
    // Batch 1 runs cpu.gemv, 4 and 3 cpu.gemm: three compiles, each after the previous one
    // released the weights. (The NaN in batch 3 needs no plan of its own: no kernel here would
    // differ for it, CompiledPlan::same_for_any_finiteness.)
    Tensor nan_x = random_tensor({3, 32}, 9);
    nan_x.data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
    for (const Tensor& x : {random_tensor({1, 32}, 7), random_tensor({4, 32}, 8), nan_x}) {
      auto got = s.run({{"x", x}});
      ASSERT_TRUE(got.is_ok()) << got.status().message();
      EXPECT_LE(max_relative_difference(*got, want(x, 1)), 1e-5) << opt_level_name(level);
      const bool has_nan = x.dims()[0] == 3 && std::isnan(x.data<float>()[5]);
      if (has_nan) {
        EXPECT_TRUE(std::isnan(got->at("y").data<float>()[0])) << "row 0 holds the NaN";
      }
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

TEST_F(ReleasedWeights, LaterCompilesReadEachWeightAloneNotTheWholeModel) {
  onnx::ModelProto model = constant_node_model();
  write_bytes(model.SerializeAsString());
  Graph graph = load_onnx_file(path_).value();
  auto counting = std::make_shared<CountingSource>(graph.constant_source);
  graph.constant_source = counting;
  SessionOptions options;
  options.level = OptLevel::kO3;
  options.keep_weights_bytes = 0;
  const Session s = Session::create(std::move(graph), options).value();
  SessionOptions eager_options;
  eager_options.mode = ExecutionMode::kEager;
  const Session eager = Session::create(load_onnx_file(path_).value(), eager_options).value();
  auto run_batch = [&](int64_t batch) {
    const Tensor x = random_tensor({batch, 32}, 10 + batch);
    auto got = s.run({{"x", x}});
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    EXPECT_LE(max_relative_difference(*got, eager.run({{"x", x}}).value()), 1e-5) << "batch " << batch;
  };
  for (int64_t batch : {1, 4, 3}) run_batch(batch);
  EXPECT_EQ(s.compile_count(), 3);
  EXPECT_EQ(counting->reads, 2) << "the second and third compiles read W back";
  EXPECT_EQ(counting->reloads, 0) << "nothing needed the model parsed again";
  for (const Value* v : s.graph().values()) {
    if (!v->is_constant()) continue;
    // W is packed in the plans; Clip's bounds, made by the importer, cannot be read alone.
    EXPECT_EQ(has_data(s.graph(), v->name()), v->name() != "W") << v->name();
  }
  // The same weights at other offsets (a longer doc string before the graph) are found there.
  model.set_doc_string(std::string(1000, 'd'));
  write_bytes(model.SerializeAsString());
  run_batch(5);
  EXPECT_EQ(counting->reloads, 0);
}

TEST_F(ReleasedWeights, SmallWeightsOfAModelCompiledPerShapeAreKept) {
  // The model's weights: w, b and c, 6464 bytes.
  for (size_t keep : {size_t{6464}, size_t{6463}}) {
    Graph graph = load_onnx_file(path_).value();
    auto counting = std::make_shared<CountingSource>(graph.constant_source);
    graph.constant_source = counting;
    SessionOptions options;
    options.level = OptLevel::kO3;
    options.keep_weights_bytes = keep;
    const Session s = Session::create(std::move(graph), options).value();
    for (int64_t batch : {1, 4, 3}) {
      const Tensor x = random_tensor({batch, 32}, 20 + batch);
      auto got = s.run({{"x", x}});
      ASSERT_TRUE(got.is_ok()) << got.status().message();
      EXPECT_LE(max_relative_difference(*got, want(x, 1)), 1e-5) << "batch " << batch;
    }
    EXPECT_EQ(s.compile_count(), 3);
    const bool kept = keep == 6464;
    EXPECT_EQ(has_data(s.graph(), "w"), kept) << "keep " << keep;
    EXPECT_EQ(counting->reads, kept ? 0 : 2) << "keep " << keep;
    EXPECT_EQ(counting->reloads, 0);
  }
  // A model of static shapes is compiled once: its weights go to the plan whatever their size.
  write_model(1, Dim(2));
  SessionOptions options;
  options.level = OptLevel::kO3;
  const Session s = Session::create(load_onnx_file(path_).value(), options).value();
  const Tensor x = random_tensor({2, 32}, 7);
  auto got = s.run({{"x", x}});
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_LE(max_relative_difference(*got, want(x, 1)), 1e-5);
  EXPECT_FALSE(has_data(s.graph(), "w"));
}

// A session's plans (another batch, here also holding a NaN) take the weights packed by the first
// from the session's cache (kernels/packed_weight_cache.h), whether the session read them back or
// kept them.
TEST_F(ReleasedWeights, PlansOfOneSessionShareTheirPackedWeights) {
  for (size_t keep : {size_t{0}, size_t{1} << 20}) {
    SessionOptions options;
    options.level = OptLevel::kO1;
    options.keep_weights_bytes = keep;
    const Session s = Session::create(load_onnx_file(path_).value(), options).value();
    Tensor nan_x = random_tensor({3, 32}, 9);
    nan_x.data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
    for (const Tensor& x : {random_tensor({4, 32}, 8), nan_x, random_tensor({4, 32}, 10)}) {
      auto got = s.run({{"x", x}});
      ASSERT_TRUE(got.is_ok()) << got.status().message();
      EXPECT_LE(max_relative_difference(*got, want(x, 1)), 1e-5);
    }
    EXPECT_EQ(s.compile_count(), 2);
    EXPECT_GE(s.packed_weights_reused(), 1) << "keep " << keep << ": the NaN plan packed w again";
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
