// The M = 1 kernel "cpu.gemv" (kernels/cpu/gemv_kernel.cc) against the reference kernels of
// MatMul / Gemm / FusedMatMul / FusedGemm: create_kernel must pick it for a single row with
// constant weights (and something else otherwise), and it must agree with the reference within
// 1e-5 of the reference's largest magnitude (only the summation order differs).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "kernels/cpu/gemv_kernel.h"
#include "kernels/cpu/hwy_kernels.h"
#include "kernels/cpu/onednn_gemm.h"
#include "kernels/cpu/packed_gemm_kernel.h"
#include "kernels/kernel.h"
#include "kernels/onednn_test_util.h"
#include "ops/fused.h"
#include "ops/infer_shapes.h"
#include "runtime/compare.h"

namespace opfuse {
namespace {

// Several rows with constant weights go to the packed GEMM where it wins, else to oneDNN.
std::string several_rows(std::string_view onednn_kernel) {
  return packed_gemm_wins(active_target()) ? "cpu.gemm" : std::string(onednn_kernel);
}

using Ints = std::vector<int64_t>;
using onednn_test::Arg;
using onednn_test::cst;
using onednn_test::in;
using onednn_test::make_node;
using onednn_test::OneNode;
using onednn_test::random_f32;

// Creates the node's kernel, checks its name, compares it with the reference kernel.
void check(const std::string& op, std::vector<Arg> args, const Attributes& attrs,
           std::string_view want_kernel, const std::string& what, double tolerance = 1e-5) {
  SCOPED_TRACE(str_cat(op, " ", what));
  auto n = make_node(op, std::move(args), attrs);
  ASSERT_NE(n, nullptr);
  auto kernel = create_kernel(KernelCompileContext{*n->node, n->constants, 1});
  ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();
  EXPECT_EQ((*kernel)->name(), want_kernel);
  const Tensor want = n->run(*make_reference_kernel(*n->node));
  const Tensor got = n->run(**kernel);
  EXPECT_LE(max_relative_difference(got, want), tolerance);
}

// K and N around the vector width (16 floats on AVX-512, 8 on AVX2) and the 64-column panel.
const std::vector<std::pair<int64_t, int64_t>> kShapes = {
    {1, 1},   {1, 7},   {3, 1},   {5, 15},  {16, 16}, {17, 33},  {31, 64},   {64, 65},
    {2, 100}, {7, 127}, {33, 128}, {100, 129}, {960, 1280}, {1280, 1000}, {257, 200}, {2048, 10},
};

TEST(GemvMatMul, ShapesAndRanksMatchTheReference) {
  std::mt19937 gen(1);
  for (const auto& [k, n] : kShapes) {
    const std::string s = str_cat("k", k, " n", n);
    check("MatMul", {in(random_f32({1, k}, gen)), cst(random_f32({k, n}, gen))}, {}, "cpu.gemv", s + " [1,K]");
    check("MatMul", {in(random_f32({k}, gen)), cst(random_f32({k, n}, gen))}, {}, "cpu.gemv", s + " [K]");
    check("MatMul", {in(random_f32({1, 1, k}, gen)), cst(random_f32({k, n}, gen))}, {}, "cpu.gemv",
          s + " [1,1,K]");
    check("MatMul", {in(random_f32({1, 1, 1, k}, gen)), cst(random_f32({1, k, n}, gen))}, {}, "cpu.gemv",
          s + " [1,1,1,K] x [1,K,N]");
  }
  check("MatMul", {in(random_f32({1, 37}, gen)), cst(random_f32({37}, gen))}, {}, "cpu.gemv", "B [K]: N = 1");
  check("MatMul", {in(random_f32({37}, gen)), cst(random_f32({37}, gen))}, {}, "cpu.gemv", "dot product");
}

TEST(GemvMatMul, DeclinesSeveralRowsOrComputedWeights) {
  std::mt19937 gen(2);
  check("MatMul", {in(random_f32({2, 40}, gen)), cst(random_f32({40, 30}, gen))}, {}, several_rows("onednn.matmul"),
        "M = 2");
  check("MatMul", {in(random_f32({3, 1, 40}, gen)), cst(random_f32({40, 30}, gen))}, {},
        several_rows("onednn.matmul"), "batch 3 x M 1");
  check("MatMul", {in(random_f32({1, 40}, gen)), in(random_f32({40, 30}, gen))}, {}, "onednn.matmul",
        "computed B");
  check("MatMul", {in(random_f32({1, 40}, gen)), cst(random_f32({2, 40, 30}, gen))}, {}, "onednn.matmul",
        "batched B");
  check("MatMul", {in(random_f32({1, 5}, gen).cast(DType::kF64).value()),
                   cst(random_f32({5, 3}, gen).cast(DType::kF64).value())},
        {}, "reference", "f64");
}

TEST(GemvGemm, AttributesAndBiasShapesMatchTheReference) {
  std::mt19937 gen(3);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); };
  for (int iter = 0; iter < 80; ++iter) {
    const auto [k, n] = kShapes[iter % kShapes.size()];
    const bool ta = pick(0, 1), tb = pick(0, 1), c_const = pick(0, 1);
    const float alpha = pick(0, 1) ? 1.0f : 0.5f;
    const float beta = std::vector<float>{1.0f, -1.5f, 0.0f}[pick(0, 2)];
    const std::vector<Ints> c_shapes = {{}, {n}, {1, n}, {1, 1}, {1}};
    const int c_kind = pick(-1, static_cast<int>(c_shapes.size()) - 1);  // -1: no C
    std::vector<Arg> args = {in(random_f32(ta ? Ints{k, 1} : Ints{1, k}, gen)),
                             cst(random_f32(tb ? Ints{n, k} : Ints{k, n}, gen))};
    if (c_kind >= 0) {
      Tensor c = random_f32(c_shapes[c_kind], gen);
      args.push_back(c_const ? cst(c) : in(c));
    }
    check("Gemm", std::move(args),
          {{"transA", int64_t{ta}}, {"transB", int64_t{tb}}, {"alpha", alpha}, {"beta", beta}}, "cpu.gemv",
          str_cat("#", iter, " k", k, " n", n, " ta", ta, " tb", tb, " alpha ", alpha, " beta ", beta, " C ",
                  c_kind < 0 ? "none" : dims_to_string(c_shapes[c_kind]), c_const ? " const" : ""));
  }
}

TEST(GemvGemm, DeclinesSeveralRowsComputedWeightsAndZeroAlpha) {
  std::mt19937 gen(4);
  check("Gemm", {in(random_f32({2, 40}, gen)), cst(random_f32({40, 30}, gen))}, {}, several_rows("onednn.gemm"),
        "M = 2");
  check("Gemm", {in(random_f32({40, 2}, gen)), cst(random_f32({40, 30}, gen))}, {{"transA", int64_t{1}}},
        "onednn.gemm", "transA M = 2");
  check("Gemm", {in(random_f32({1, 40}, gen)), in(random_f32({40, 30}, gen))}, {}, "onednn.gemm", "computed B");
  check("Gemm", {in(random_f32({1, 40}, gen)), cst(random_f32({40, 30}, gen))}, {{"alpha", 0.0f}}, "onednn.gemm",
        "alpha 0");
}

// A case worked by hand: a = [1, 2, -3], B = [[1, 0], [0, 1], [1, 1]] (transB: stored [[1,0,1],
// [0,1,1]]), alpha 2: 2 * a B = [-4, -2]; C = [10, 1] with beta 0.5 gives [1, -1.5]; relu: [1, 0].
TEST(GemvGemm, HandComputedFusedGemm) {
  auto n = make_node("FusedGemm",
                     {in(Tensor::from_vector<float>({1, 3}, {1, 2, -3})),
                      cst(Tensor::from_vector<float>({2, 3}, {1, 0, 1, 0, 1, 1})),
                      cst(Tensor::from_vector<float>({2}, {10, 1}))},
                     {{"transB", int64_t{1}}, {"alpha", 2.0f}, {"beta", 0.5f},
                      {"epilogue", std::vector<std::string>{"relu"}}});
  ASSERT_NE(n, nullptr);
  auto kernel = create_kernel(KernelCompileContext{*n->node, n->constants, 1});
  ASSERT_TRUE(kernel.is_ok());
  EXPECT_EQ((*kernel)->name(), "cpu.gemv");
  const Tensor y = n->run(**kernel);
  ASSERT_EQ(y.dims(), (Ints{1, 2}));
  EXPECT_FLOAT_EQ(y.data<float>()[0], 1.0f);
  EXPECT_FLOAT_EQ(y.data<float>()[1], 0.0f);
}

const std::vector<std::vector<std::string>> kEpilogues = {
    {},           {"relu"},        {"hardswish"},          {"gelu_erf"}, {"add"}, {"hardswish", "add"},
    {"add", "relu"}, {"sigmoid_mul"}, {"clip:0:6", "linear:0.5:1"}, {"gelu_tanh"},
};

TEST(GemvFused, EpiloguesBiasAndResidualMatchTheReference) {
  std::mt19937 gen(5);
  int iter = 0;
  for (const auto& epilogue : kEpilogues) {
    const bool residual = std::find(epilogue.begin(), epilogue.end(), "add") != epilogue.end();
    for (const auto& [k, n] : {std::pair<int64_t, int64_t>{960, 1280}, {13, 70}, {64, 5}}) {
      const std::string what = str_cat("k", k, " n", n, " epilogue ", epilogue.empty() ? "" : epilogue[0],
                                       epilogue.size() > 1 ? "," + epilogue[1] : "");
      const bool bias_const = ++iter % 2;
      Attributes gemm_attrs = {{"transB", int64_t{1}}, {"epilogue", epilogue}};
      std::vector<Arg> g = {in(random_f32({1, k}, gen)), cst(random_f32({n, k}, gen)),
                            bias_const ? cst(random_f32({n}, gen)) : in(random_f32({1, n}, gen))};
      if (residual) g.push_back(in(random_f32({1, n}, gen)));
      check("FusedGemm", std::move(g), gemm_attrs, "cpu.gemv", what);
      // FusedMatMul with A [1,1,K]: bias [N], residual of Y's shape [1,1,N].
      std::vector<Arg> m = {in(random_f32({1, 1, k}, gen)), cst(random_f32({k, n}, gen)),
                            bias_const ? cst(random_f32({n}, gen)) : in(random_f32({n}, gen))};
      if (residual) m.push_back(in(random_f32({1, 1, n}, gen)));
      check("FusedMatMul", std::move(m), {{"epilogue", epilogue}}, "cpu.gemv", what);
    }
  }
  // No bias, epilogue only.
  check("FusedMatMul",
        {in(random_f32({1, 300}, gen)), cst(random_f32({300, 90}, gen)), Arg{}, in(random_f32({1, 90}, gen))},
        {{"epilogue", std::vector<std::string>{"relu", "add"}}}, "cpu.gemv", "no bias, residual");
}

TEST(GemvFused, DeclinesSeveralRows) {
  std::mt19937 gen(6);
  check("FusedGemm", {in(random_f32({4, 50}, gen)), cst(random_f32({50, 20}, gen))},
        {{"epilogue", std::vector<std::string>{"relu"}}}, several_rows("onednn.fused_gemm"), "M = 4");
  check("FusedMatMul", {in(random_f32({2, 1, 50}, gen)), cst(random_f32({50, 20}, gen))},
        {{"epilogue", std::vector<std::string>{"relu"}}}, several_rows("onednn.fused_matmul"), "batch 2");
}

// Squeeze-excitation convs: a 1x1 kernel over a 1x1 map is the same product, in plain and
// blocked layouts (40 -> 20 channels: nChw16c pads both to 48 and 32 lanes).
TEST(GemvConv, SqueezeExcitationConvsMatchTheReference) {
  std::mt19937 gen(8);
  const Attributes k1 = {{"kernel_shape", Ints{1, 1}}};
  check("Conv", {in(random_f32({1, 40, 1, 1}, gen)), cst(random_f32({20, 40, 1, 1}, gen)), cst(random_f32({20}, gen))},
        k1, "cpu.gemv", "plain, bias");
  check("Conv", {in(random_f32({1, 40, 1, 1}, gen)), cst(random_f32({20, 40, 1, 1}, gen))}, k1, "cpu.gemv",
        "plain, no bias");
  Attributes silu = k1;
  silu["epilogue"] = std::vector<std::string>{"sigmoid_mul"};
  check("FusedConv", {in(random_f32({1, 1152, 1, 1}, gen)), cst(random_f32({48, 1152, 1, 1}, gen)), cst(random_f32({48}, gen))},
        silu, "cpu.gemv", "EfficientNet's squeeze, SiLU");
  Attributes one_d = {{"kernel_shape", Ints{1}}, {"epilogue", std::vector<std::string>{"sigmoid"}}};
  check("FusedConv", {in(random_f32({1, 64, 1}, gen)), cst(random_f32({1, 64, 1}, gen)), cst(random_f32({1}, gen))},
        one_d, "cpu.gemv", "1-d at one position (Silero VAD's decoder head), sigmoid");
  Attributes blocked = k1;
  blocked["block"] = int64_t{16};
  blocked["epilogue"] = std::vector<std::string>{"sigmoid"};
  for (int64_t x_block : {16, 0}) {
    // X blocked [1, Cb, 1, 1, 16] with arbitrary (finite) padding lanes, or channels-last [1, 1, 1, 1, C].
    const Ints x = x_block == 16 ? Ints{1, 3, 1, 1, 16} : Ints{1, 1, 1, 1, 40};
    if (x_block == 0) blocked["block"] = int64_t{0};
    const Ints y = x_block == 16 ? Ints{1, 2, 1, 1, 16} : Ints{1, 1, 1, 1, 20};
    auto n = make_node("BlockedConv", {in(random_f32(x, gen)), cst(random_f32({20, 40, 1, 1}, gen)), cst(random_f32({20}, gen))},
                       blocked);
    ASSERT_NE(n, nullptr);
    ASSERT_EQ(*hwy_cpu::static_dims_of(n->node->output(0)), y);
    auto kernel = create_kernel(KernelCompileContext{*n->node, n->constants, 1});
    ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();
    EXPECT_EQ((*kernel)->name(), "cpu.gemv");
    const Tensor want = n->run(*make_reference_kernel(*n->node));
    const Tensor got = n->run(**kernel);
    // Only the real channels are compared: the reference writes zeros on padding lanes, this
    // kernel sigmoid(0); both are finite, which is all a padding lane must be.
    const float* w = want.data<float>();
    const float* g = got.data<float>();
    for (int64_t c = 0; c < 20; ++c) EXPECT_NEAR(g[c], w[c], 1e-5) << "channel " << c;
    for (int64_t c = 20; c < got.numel(); ++c) EXPECT_TRUE(std::isfinite(g[c])) << "padding lane " << c;
  }
}

TEST(GemvConv, DeclinesBiggerMapsPaddingGroupsAndInputScales) {
  std::mt19937 gen(9);
  check("Conv", {in(random_f32({1, 8, 2, 2}, gen)), cst(random_f32({4, 8, 1, 1}, gen))},
        {{"kernel_shape", Ints{1, 1}}}, "onednn.conv", "a 2x2 map");
  check("Conv", {in(random_f32({2, 8, 1, 1}, gen)), cst(random_f32({4, 8, 1, 1}, gen))},
        {{"kernel_shape", Ints{1, 1}}}, "onednn.conv", "batch 2");
  check("Conv", {in(random_f32({1, 8, 1, 1}, gen)), cst(random_f32({4, 8, 3, 3}, gen))},
        {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}}, "onednn.conv", "3x3 with padding");
  check("Conv", {in(random_f32({1, 8, 1, 1}, gen)), cst(random_f32({8, 4, 1, 1}, gen))},
        {{"kernel_shape", Ints{1, 1}}, {"group", int64_t{2}}}, "onednn.conv", "grouped");
  check("FusedConv",
        {in(random_f32({1, 8, 1, 1}, gen)), cst(random_f32({4, 8, 1, 1}, gen)), Arg{}, Arg{}, in(random_f32({1, 8, 1, 1}, gen))},
        {{"kernel_shape", Ints{1, 1}}}, "onednn.fused_conv", "an input scale");
}

// Two threads split the panels; the result must not depend on the split.
TEST(GemvThreads, TwoThreadsMatchTheReference) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  std::mt19937 gen(7);
  for (const auto& [k, n] : {std::pair<int64_t, int64_t>{1280, 1000}, {2048, 1000}, {512, 130}, {4096, 65}}) {
    check("Gemm",
          {in(random_f32({1, k}, gen)), cst(random_f32({n, k}, gen)), cst(random_f32({n}, gen))},
          {{"transB", int64_t{1}}}, "cpu.gemv", str_cat("k", k, " n", n));
  }
  omp_set_num_threads(saved);
}

// Not a test: microseconds per run of the classifier shapes, weights hot and evicted (64 MB
// written before each run), cpu.gemv next to oneDNN's gemm. The two kernels alternate run by run
// so both see the same machine load. `--gtest_also_run_disabled_tests --gtest_filter='*GemvBench*'`.
TEST(GemvBench, DISABLED_ClassifierHeads) {
  omp_set_num_threads(2);
  std::mt19937 gen(8);
  std::vector<float> evict(size_t{64} << 20 >> 2, 1.0f);
  for (const auto& [k, n] : {std::pair<int64_t, int64_t>{960, 1280}, {1280, 1000}, {2048, 1000}}) {
    auto node = make_node("Gemm", {in(random_f32({1, k}, gen)), cst(random_f32({n, k}, gen)),
                                   cst(random_f32({n}, gen))},
                          {{"transB", int64_t{1}}});
    ASSERT_NE(node, nullptr);
    const KernelCompileContext ctx{*node->node, node->constants, 2};
    auto gemv = create_kernel(ctx);
    auto dnnl = onednn::onednn_gemm_kernel().create(ctx);
    ASSERT_TRUE(gemv.is_ok() && dnnl.is_ok());
    const Kernel* kernels[] = {gemv->get(), dnnl->get()};
    Tensor y = Tensor::zeros(DType::kF32, {1, n}).value();
    Tensor* out = &y;
    for (bool cold : {false, true}) {
      std::vector<double> us[2];
      for (int r = 0; r < 80; ++r) {
        for (int i = 0; i < 2; ++i) {
          if (cold) {
            for (float& v : evict) v += 1.0f;
          }
          const auto t0 = std::chrono::steady_clock::now();
          ASSERT_TRUE(kernels[i]->run(node->args(), {&out, 1}).is_ok());
          us[i].push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        }
      }
      for (int i = 0; i < 2; ++i) {
        std::sort(us[i].begin(), us[i].end());
        std::printf("%-12s k %5lld n %5lld %s: min %7.1f  p25 %7.1f  median %7.1f us\n",
                    std::string(kernels[i]->name()).c_str(), static_cast<long long>(k), static_cast<long long>(n),
                    cold ? "cold" : "hot ", us[i][0], us[i][us[i].size() / 4], us[i][us[i].size() / 2]);
      }
    }
  }
}

}  // namespace
}  // namespace opfuse
