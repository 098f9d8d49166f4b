// Inputs the fuzzers found (fuzz/, docs/robustness.md), each reduced to the smallest model that
// shows the problem, with the answer it must get now.
#include <gtest/gtest.h>

#include <limits>

#include "frontend/onnx/importer.h"
#include "pipelines/pipeline.h"
#include "robustness/hostile_models.h"
#include "runtime/session.h"

namespace opfuse {
namespace {

Result<Session> graph_session(const onnx::ModelProto& m) {
  OPFUSE_ASSIGN_OR_RETURN(Graph g, load_onnx_bytes(hostile::serialize(m), "", {}, "fuzz.onnx"));
  SessionOptions options;
  options.level = OptLevel::kO3;
  options.threads = 1;
  return Session::create(std::move(g), options);
}

// fuzz_compile, seed test_tile_precomputed with random repeats: Tile's repeats are a graph input,
// so graph mode plans the output from the model's declared shape f32[4,4]. Repeats [1, 2] make
// f32[2,4]: that contradicts the model's declaration (a user error naming the node and both
// shapes), where it used to be reported as an internal error.
TEST(FuzzRegressionTest, ValueDependentOutputShapeContradictingTheDeclarationIsAUserError) {
  onnx::ModelProto m = hostile::base_model();
  hostile::add_value_info(m.mutable_graph()->mutable_input(), "x", {2, 2});
  hostile::add_value_info(m.mutable_graph()->mutable_input(), "repeats", {2}, onnx::TensorProto::INT64);
  hostile::add_node(m, "Tile", {"x", "repeats"}, {"z"}, "tile");
  hostile::add_value_info(m.mutable_graph()->mutable_output(), "z", {4, 4});
  Result<Session> s = graph_session(m);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  const Tensor x = Tensor::from_vector<float>({2, 2}, {1, 2, 3, 4});

  Result<TensorMap> ok = s->run({{"x", x}, {"repeats", Tensor::from_vector<int64_t>({2}, {2, 2})}});
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(ok->at("z").to_float_vector(),
            (std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4, 1, 2, 1, 2, 3, 4, 3, 4}));

  Result<TensorMap> bad = s->run({{"x", x}, {"repeats", Tensor::from_vector<int64_t>({2}, {1, 2})}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().kind(), ErrorKind::kUser) << bad.status().message();
  for (const char* part : {"'tile'", "output 'z'", "f32[2,4]", "declares it f32[4,4]"}) {
    EXPECT_NE(bad.status().message().find(part), std::string::npos) << bad.status().message();
  }
}

// fuzz_compile: a Slice step of INT64_MAX made the element count (end - start + step - 1) / step
// overflow (UBSan: signed integer overflow in shape inference). Now any int64 step is valid:
// INT64_MAX takes the first element, INT64_MIN (|step| beyond int64) the last.
TEST(FuzzRegressionTest, SliceStepsAtTheInt64LimitsTakeOneElement) {
  for (const int64_t step : {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    SCOPED_TRACE(step);
    const bool forward = step > 0;
    onnx::ModelProto m = hostile::base_model();
    hostile::add_value_info(m.mutable_graph()->mutable_input(), "x", {2, 5});
    auto ints = [&](const std::string& name, int64_t v) {
      auto* t = m.mutable_graph()->add_initializer();
      t->set_name(name);
      t->set_data_type(onnx::TensorProto::INT64);
      t->add_dims(1);
      t->add_int64_data(v);
    };
    ints("starts", forward ? 0 : -1);
    ints("ends", forward ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min());
    ints("axes", 1);
    ints("steps", step);
    hostile::add_node(m, "Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"}, "slice");
    hostile::add_value_info(m.mutable_graph()->mutable_output(), "y", {2, 1});
    Result<Session> s = graph_session(m);
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    Result<TensorMap> got = s->run({{"x", Tensor::from_vector<float>({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})}});
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    EXPECT_EQ(got->at("y").to_float_vector(), forward ? (std::vector<float>{0, 5}) : (std::vector<float>{4, 9}));
  }
}

}  // namespace
}  // namespace opfuse
