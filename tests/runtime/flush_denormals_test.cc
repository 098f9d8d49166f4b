// SessionOptions::flush_denormals (runtime/flush_denormals.h): a graph-mode run computes with
// denormals flushed to zero, and every thread's floating-point modes are as before afterwards.
#include <omp.h>
#include <xmmintrin.h>

#include <cmath>
#include <limits>

#include "graph_test_util.h"

namespace opfuse::testing_graphs {
namespace {

// x * 1e-20 * 1e-20: a normal input times two normal constants makes a denormal result; the
// 4096 elements are enough for the elementwise kernel to use every thread.
const char* kDenormalResult = R"(
graph @main (%x: f32[4096]) {
  %k: f32[] = const [1e-20]
  %a = Mul(%x, %k)
  %y = Mul(%a, %k)
  return %y
}
)";

// Each OpenMP thread's control bits (rounding, masks, FTZ, DAZ), without the sticky exception
// flags that any arithmetic raises (0x3f).
std::vector<unsigned> thread_modes() {
  std::vector<unsigned> modes(static_cast<size_t>(omp_get_max_threads()), 0);
#pragma omp parallel num_threads(static_cast<int>(modes.size()))
  modes[static_cast<size_t>(omp_get_thread_num())] = _mm_getcsr() & ~0x3fu;
  return modes;
}

float run_once(bool flush) {
  auto g = parse_graph(kDenormalResult);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  SessionOptions options;
  options.level = OptLevel::kO2;
  options.flush_denormals = flush;
  auto session = Session::create(std::move(*g), options);
  EXPECT_TRUE(session.is_ok()) << session.status().message();
  TensorMap in;
  in["x"] = Tensor::from_vector<float>({4096}, std::vector<float>(4096, 1.0f));
  auto out = session->run(in);
  EXPECT_TRUE(out.is_ok()) << out.status().message();
  const Tensor& y = out->at("y");
  for (int64_t i = 1; i < y.numel(); ++i) EXPECT_EQ(y.data<float>()[i], y.data<float>()[0]) << i;
  return y.data<float>()[0];
}

TEST(FlushDenormals, DenormalResultsAreZeroOnlyWhenAskedAndModesAreRestored) {
  const std::vector<unsigned> before = thread_modes();
  const float exact = run_once(false);
  EXPECT_GT(exact, 0.0f);
  EXPECT_LT(exact, std::numeric_limits<float>::min()) << "1e-40 is denormal";
  EXPECT_EQ(run_once(true), 0.0f);
  EXPECT_EQ(thread_modes(), before);
}

}  // namespace
}  // namespace opfuse::testing_graphs
