// Run-time checks of Session: inputs against the signature (names, dtypes, ranks, known dims,
// symbolic dims bound consistently) in both modes, and shapes bound at run time that would need
// more memory than the allocation cap.
#include <gtest/gtest.h>

#include "core/tensor.h"
#include "pipelines/pipeline.h"
#include "runtime/session.h"

namespace opfuse {
namespace {

// y = Relu(MatMul(x, w)) + b, x: f32[batch, 4], w: f32[4, n], b: f32[batch, n] (so two inputs
// share the symbol "batch").
Graph matmul_graph(int64_t n) {
  Graph g;
  Value* x = g.add_input("x", DType::kF32, Shape{Dim::symbol("batch"), Dim(4)});
  Value* b = g.add_input("b", DType::kF32, Shape{Dim::symbol("batch"), Dim(n)});
  Value* w = g.add_constant("w", Tensor::zeros(DType::kF32, {4, n}).value());
  Node* mm = g.add_node("MatMul", {x, w}, {"m"}, {}, "mm").value();
  Node* relu = g.add_node("Relu", {mm->output(0)}, {"r"}, {}, "relu").value();
  Node* add = g.add_node("Add", {relu->output(0), b}, {"y"}, {}, "add").value();
  g.add_output(add->output(0));
  return g;
}

Tensor filled(std::vector<int64_t> dims, float v, DType dtype = DType::kF32) {
  Tensor t = Tensor::zeros(dtype, std::move(dims)).value();
  for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, v);
  return t;
}

void expect_user_error(const Status& s, const std::vector<std::string>& parts) {
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.kind(), ErrorKind::kUser) << s.message();
  for (const std::string& p : parts) {
    EXPECT_NE(s.message().find(p), std::string::npos) << "'" << p << "' not in: " << s.message();
  }
}

class RuntimeLimitsTest : public testing::TestWithParam<ExecutionMode> {
 protected:
  Session session(int64_t n = 3) {
    SessionOptions options;
    options.mode = GetParam();
    options.level = OptLevel::kO3;
    options.threads = 1;
    Result<Session> s = Session::create(matmul_graph(n), options);
    EXPECT_TRUE(s.is_ok()) << s.status().message();
    return std::move(*s);
  }
};

TEST_P(RuntimeLimitsTest, InputsAreCheckedAgainstTheSignature) {
  Session s = session();
  // Correct inputs: y = Relu(x @ 0) + b = b.
  auto ok = s.run({{"x", filled({2, 4}, 1)}, {"b", filled({2, 3}, 0.5f)}});
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(ok->at("y").to_float_vector(), std::vector<float>(6, 0.5f));

  expect_user_error(s.run({{"x", filled({2, 4}, 1)}}).status(), {"missing input 'b'", "f32[batch,3]"});
  expect_user_error(
      s.run({{"x", filled({2, 4}, 1)}, {"b", filled({2, 3}, 0)}, {"z", filled({1}, 0)}}).status(),
      {"unknown input 'z'", "x: f32[batch,4]"});
  expect_user_error(s.run({{"x", filled({2, 4}, 1, DType::kF64)}, {"b", filled({2, 3}, 0)}}).status(),
                    {"input 'x'", "dtype", "expected f32[batch,4], given f64[2,4]"});
  expect_user_error(s.run({{"x", filled({2, 4, 1}, 1)}, {"b", filled({2, 3}, 0)}}).status(),
                    {"input 'x'", "rank", "given f32[2,4,1]"});
  expect_user_error(s.run({{"x", filled({2, 5}, 1)}, {"b", filled({2, 3}, 0)}}).status(),
                    {"input 'x'", "dim 1", "given f32[2,5]"});
  // "batch" is 2 for x and 7 for b.
  expect_user_error(s.run({{"x", filled({2, 4}, 1)}, {"b", filled({7, 3}, 0)}}).status(),
                    {"input 'b' dim 0 ('batch') is 7", "input 'x' bound 'batch' to 2"});
  expect_user_error(s.run({{"x", Tensor()}, {"b", filled({2, 3}, 0)}}).status(), {"input 'x'", "empty"});
}

// x: f32[batch, 4] is small, but MatMul by w: f32[4, 2^18] makes a [batch, 2^18] intermediate:
// with batch = 2^16 that is 64 GiB, above the default 16 GiB cap. A clear error, and nothing
// allocated on the way.
TEST_P(RuntimeLimitsTest, HugeSymbolicBatchIsAClearErrorNotAnAllocation) {
  const int64_t n = int64_t{1} << 18;
  Session s = session(n);
  const int64_t batch = int64_t{1} << 16;
  Tensor x = filled({batch, 4}, 1);
  const size_t cap = max_allocation_bytes();
  // b would itself be 64 GiB; a view of a small buffer stands in for it (never read: the run
  // must fail before any kernel runs).
  Tensor small = filled({1}, 0);
  Tensor b = Tensor::wrap(DType::kF32, {batch, n}, small.raw_data(), nullptr);
  Result<TensorMap> out = s.run({{"x", x}, {"b", b}});
  // Which value is named depends on the level's fusions (at O3 MatMul, Relu and Add may be one
  // kernel writing straight into y); its type is in the message either way.
  expect_user_error(out.status(), {"allocation cap", "f32[65536,262144]"});
  EXPECT_EQ(max_allocation_bytes(), cap);
}

// The same model within a lowered cap: fits at batch 4, refused at batch 64.
TEST_P(RuntimeLimitsTest, LoweredCapAppliesToRunTimeShapes) {
  Session s = session(256);
  const size_t cap = max_allocation_bytes();
  set_max_allocation_bytes(16 * 1024);  // 16 KiB: [4,256] f32 is 4 KiB, [64,256] is 64 KiB
  Tensor x4 = filled({4, 4}, 1), b4 = filled({4, 256}, 2);
  auto fits = s.run({{"x", x4}, {"b", b4}});
  Tensor small = filled({1}, 0);
  Tensor x64 = filled({64, 4}, 1);
  auto refused = s.run({{"x", x64}, {"b", Tensor::wrap(DType::kF32, {64, 256}, small.raw_data(), nullptr)}});
  set_max_allocation_bytes(cap);
  ASSERT_TRUE(fits.is_ok()) << fits.status().message();
  EXPECT_EQ(fits->at("y").to_float_vector(), std::vector<float>(4 * 256, 2.0f));
  expect_user_error(refused.status(), {"allocation cap of 16384"});
}

// An Expand to [2^40, 2^40, 4] returned as a graph output: refused with a clear error before any
// kernel is created for it (under UBSan, creating hwy.expand's move plan first overflowed a
// signed multiply).
TEST(RuntimeLimitsCompileTest, HugeGraphOutputIsRefusedBeforeItsKernelIsCreated) {
  Graph g;
  Value* x = g.add_input("x", DType::kF32, Shape{Dim(1)});
  const int64_t big = int64_t{1} << 40;
  Value* shape = g.add_constant("shape", Tensor::from_vector<int64_t>({3}, {big, big, 4}));
  Node* expand = g.add_node("Expand", {x, shape}, {"y"}, {}, "expand").value();
  g.add_output(expand->output(0));
  SessionOptions options;
  options.level = OptLevel::kO3;
  Result<Session> s = Session::create(std::move(g), options);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.status().kind(), ErrorKind::kUser) << s.status().message();
  EXPECT_NE(s.status().message().find("'y'"), std::string::npos) << s.status().message();
}

INSTANTIATE_TEST_SUITE_P(Modes, RuntimeLimitsTest,
                         testing::Values(ExecutionMode::kEager, ExecutionMode::kGraph),
                         [](const testing::TestParamInfo<ExecutionMode>& info) {
                           return std::string(execution_mode_name(info.param));
                         });

}  // namespace
}  // namespace opfuse
