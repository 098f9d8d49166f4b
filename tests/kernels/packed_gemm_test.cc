// The packed-panel GEMM "cpu.gemm" (kernels/cpu/packed_gemm_kernel.cc) against the reference
// kernels of MatMul / Gemm / FusedMatMul / FusedGemm. The kernel is created directly, so it is
// tested on every target (this file's avx2. copy runs the 6x16 AVX2 micro-kernel, the native copy
// the host's); shapes cross the tile rows (6 or 12), the panel width (16 or 32 columns), the K
// block (a few hundred) and the thread split. Selection is tested separately: create_kernel picks
// it exactly where packed_gemm_wins says so for the active target.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernels/cpu/packed_gemm_kernel.h"
#include "kernels/kernel.h"
#include "kernels/target_caps.h"
#include "kernels/onednn_test_util.h"
#include "runtime/compare.h"

namespace opfuse {
namespace {

using Ints = std::vector<int64_t>;
using onednn_test::Arg;
using onednn_test::cst;
using onednn_test::in;
using onednn_test::make_node;
using onednn_test::random_f32;

KernelImpl impl_for(std::string_view op) {
  if (op == "MatMul") return packed_matmul_kernel();
  if (op == "Gemm") return packed_gemm_kernel();
  if (op == "FusedMatMul") return packed_fused_matmul_kernel();
  return packed_fused_gemm_kernel();
}

// Creates cpu.gemm for the node and compares it with the reference (1e-5 of the largest
// magnitude: only the summation order differs; NaN must meet NaN).
void check(const std::string& op, std::vector<Arg> args, const Attributes& attrs, const std::string& what,
           int threads = 2) {
  SCOPED_TRACE(str_cat(op, " ", what));
  auto n = make_node(op, std::move(args), attrs);
  ASSERT_NE(n, nullptr);
  auto kernel = impl_for(op).create(KernelCompileContext{*n->node, n->constants, threads});
  ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();
  EXPECT_EQ((*kernel)->name(), "cpu.gemm");
  const Tensor want = n->run(*make_reference_kernel(*n->node));
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  const Tensor got = n->run(**kernel);
  omp_set_num_threads(saved);
  EXPECT_LE(max_relative_difference(got, want), 1e-5);
}

TEST(PackedGemm, ShapesMatchTheReference) {
  std::mt19937 gen(11);
  for (int64_t m : {2, 5, 6, 7, 12, 13, 64, 100}) {
    for (int64_t k : {1, 3, 17, 200, 1000}) {
      for (int64_t n : {1, 7, 16, 17, 33, 100}) {
        const std::string s = str_cat("m", m, " k", k, " n", n);
        check("MatMul", {in(random_f32({m, k}, gen)), cst(random_f32({k, n}, gen))}, {}, s,
              (m + k + n) % 2 ? 1 : 2);
      }
    }
  }
}

TEST(PackedGemm, BatchDimsFoldIntoRowsAndTallBlocksSplit) {
  std::mt19937 gen(12);
  check("MatMul", {in(random_f32({2, 3, 40}, gen)), cst(random_f32({40, 30}, gen))}, {}, "[2,3,K] x [K,N]");
  check("MatMul", {in(random_f32({1, 128, 96}, gen)), cst(random_f32({1, 96, 80}, gen))}, {}, "[1,M,K] x [1,K,N]");
  // Rows beyond one L2 block of A (several hundred) and K beyond one L1 block of B.
  check("MatMul", {in(random_f32({700, 900}, gen)), cst(random_f32({900, 40}, gen))}, {}, "tall, deep");
  // Few panels, many rows: the threads split the rows instead.
  check("MatMul", {in(random_f32({301, 64}, gen)), cst(random_f32({64, 16}, gen))}, {}, "rows split");
}

TEST(PackedGemm, GemmAttributesAndBiasShapesMatchTheReference) {
  std::mt19937 gen(13);
  int iter = 0;
  for (bool tb : {false, true}) {
    for (float alpha : {1.0f, -0.75f}) {
      for (const Ints& c : std::vector<Ints>{{}, {50}, {1, 50}, {1, 1}, {1}}) {
        for (float beta : {1.0f, 0.5f, 0.0f}) {
          std::vector<Arg> args = {in(random_f32({23, 300}, gen)), cst(random_f32(tb ? Ints{50, 300} : Ints{300, 50}, gen)),
                                   cst(random_f32(c, gen))};
          check("Gemm", std::move(args), {{"transB", int64_t{tb}}, {"alpha", alpha}, {"beta", beta}},
                str_cat("#", ++iter, " tb", tb, " alpha ", alpha, " beta ", beta, " C ", dims_to_string(c)));
        }
      }
    }
  }
}

TEST(PackedGemm, EpiloguesBiasAndResidualMatchTheReference) {
  const std::vector<std::vector<std::string>> epilogues = {
      {}, {"relu"}, {"gelu_erf"}, {"add"}, {"add", "relu"}, {"hardswish", "add"}, {"sigmoid_mul"},
      {"clip:0:6", "linear:0.5:1"}, {"gelu_tanh"}, {"tanh"}, {"leaky_relu:0.1"}, {"elu:1"}, {"sigmoid"}};
  std::mt19937 gen(14);
  for (const auto& epilogue : epilogues) {
    const bool residual = std::find(epilogue.begin(), epilogue.end(), "add") != epilogue.end();
    for (const auto& [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{64, 768, 70}, {7, 13, 33}}) {
      const std::string what = str_cat("m", m, " k", k, " n", n, " ", epilogue.empty() ? "" : epilogue[0]);
      std::vector<Arg> g = {in(random_f32({m, k}, gen)), cst(random_f32({n, k}, gen)), cst(random_f32({n}, gen))};
      if (residual) g.push_back(in(random_f32({m, n}, gen)));
      check("FusedGemm", std::move(g), {{"transB", int64_t{1}}, {"epilogue", epilogue}}, what);
      std::vector<Arg> mm = {in(random_f32({1, m, k}, gen)), cst(random_f32({k, n}, gen)), cst(random_f32({n}, gen))};
      if (residual) mm.push_back(in(random_f32({1, m, n}, gen)));
      check("FusedMatMul", std::move(mm), {{"epilogue", epilogue}}, what);
    }
  }
  check("FusedMatMul", {in(random_f32({9, 300}, gen)), cst(random_f32({300, 90}, gen)), Arg{}, in(random_f32({9, 90}, gen))},
        {{"epilogue", std::vector<std::string>{"relu", "add"}}}, "no bias, residual");
}

// NaN and Inf in A reach the output as in the reference, through every epilogue that keeps them
// (relu and clip must not turn NaN into a number); denormal inputs are plain numbers.
TEST(PackedGemm, NonFiniteAndDenormalInputsMatchTheReference) {
  std::mt19937 gen(15);
  for (const char* post : {"relu", "clip:0:6", "gelu_erf", "hardswish"}) {
    Tensor a = random_f32({20, 40}, gen);
    float* av = a.data<float>();
    av[3] = std::numeric_limits<float>::quiet_NaN();
    av[45] = std::numeric_limits<float>::infinity();
    av[130] = -std::numeric_limits<float>::infinity();
    for (int i = 200; i < 240; ++i) av[i] = 1e-40f;  // a row of denormals
    check("FusedMatMul", {in(a), cst(random_f32({40, 37}, gen)), cst(random_f32({37}, gen))},
          {{"epilogue", std::vector<std::string>{post}}}, post);
  }
}

TEST(PackedGemm, SelectedExactlyWhereItWinsOnTheTarget) {
  std::mt19937 gen(16);
  const bool wins = packed_gemm_wins(active_target());
  auto chosen = [&](const std::string& op, std::vector<Arg> args, const Attributes& attrs) {
    auto n = make_node(op, std::move(args), attrs);
    EXPECT_NE(n, nullptr);
    auto kernel = create_kernel(KernelCompileContext{*n->node, n->constants, 1});
    EXPECT_TRUE(kernel.is_ok());
    return std::string((*kernel)->name());
  };
  EXPECT_EQ(chosen("MatMul", {in(random_f32({8, 40}, gen)), cst(random_f32({40, 30}, gen))}, {}),
            wins ? "cpu.gemm" : "onednn.matmul");
  EXPECT_EQ(chosen("FusedGemm", {in(random_f32({8, 40}, gen)), cst(random_f32({30, 40}, gen)), cst(random_f32({30}, gen))},
                   {{"transB", int64_t{1}}, {"epilogue", std::vector<std::string>{"gelu_erf"}}}),
            wins ? "cpu.gemm" : "onednn.fused_gemm");
  // Never: one row (cpu.gemv), computed weights, A transposed, a computed bias.
  EXPECT_EQ(chosen("MatMul", {in(random_f32({1, 40}, gen)), cst(random_f32({40, 30}, gen))}, {}), "cpu.gemv");
  EXPECT_EQ(chosen("MatMul", {in(random_f32({8, 40}, gen)), in(random_f32({40, 30}, gen))}, {}), "onednn.matmul");
  EXPECT_EQ(chosen("Gemm", {in(random_f32({40, 8}, gen)), cst(random_f32({40, 30}, gen))}, {{"transA", int64_t{1}}}),
            "onednn.gemm");
  EXPECT_EQ(chosen("Gemm", {in(random_f32({8, 40}, gen)), cst(random_f32({40, 30}, gen)), in(random_f32({30}, gen))}, {}),
            "onednn.gemm");
  // The AVX2 tier gets the 6x16 tile, AVX-512 the 12x32 one; asking Highway which target it
  // dispatches to must not undo the cap (Highway 1.0.3 resets its dispatch when asked).
  (void)highway_dispatch_target();
  auto n = make_node("MatMul", {in(random_f32({8, 40}, gen)), cst(random_f32({40, 30}, gen))}, {});
  ASSERT_NE(n, nullptr);
  auto kernel = packed_matmul_kernel().create(KernelCompileContext{*n->node, n->constants, 1});
  ASSERT_TRUE(kernel.is_ok());
  const IsaTier isa = active_target().isa;
  const char* tile = isa >= IsaTier::kAvx512Core ? " 12x32 " : isa == IsaTier::kAvx2 ? " 6x16 " : " 6x8 ";
  EXPECT_NE((*kernel)->implementation().find(tile), std::string::npos)
      << (*kernel)->implementation();
}

}  // namespace
}  // namespace opfuse
