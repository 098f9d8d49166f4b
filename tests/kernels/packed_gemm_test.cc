// The packed-panel GEMM "cpu.gemm" (kernels/cpu/packed_gemm_kernel.cc) against the reference
// kernels of MatMul / Gemm / FusedMatMul / FusedGemm and 1x1 BlockedConv (nChw8c / nChw16c /
// channels-last). The kernel is created directly, so it is
// tested on every target (this file's avx2. copy runs the 6x16 AVX2 micro-kernel, the native copy
// the host's); shapes cross the tile rows (6 or 12), the panel width (16 or 32 columns), the K
// block (gemm_blocking.h) and the thread split. Selection is tested separately: create_kernel picks
// it exactly where packed_gemm_wins says so for the active target.
#include <gtest/gtest.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "kernels/cpu/gemm_blocking.h"
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
  if (op == "BlockedConv") return packed_blocked_conv_kernel();
  return packed_fused_gemm_kernel();
}

// Creates cpu.gemm for the node and compares it with the reference (2e-5 of the largest
// magnitude: only the summation order differs, and a bounded activation after K = 768 sums of
// magnitude ~30 keeps their ~1e-5 rounding while its own largest value is 1: tanh read 9.5e-6 on
// AVX2, 1.2e-5 at the SSE4 tier; NaN must meet NaN).
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
  EXPECT_LE(max_relative_difference(got, want), 2e-5);
}

TEST(PackedGemm, ShapesMatchTheReference) {
  std::mt19937 gen(11);
  for (int64_t m : {2, 5, 6, 7, 12, 13, 64, 100}) {
    for (int64_t k : {1, 3, 17, 200, 1000}) {
      // 16 (AVX-512) and 24 (AVX2) end on a panel of exactly one vector (its own tile).
      for (int64_t n : {1, 7, 16, 17, 24, 33, 100}) {
        const std::string s = str_cat("m", m, " k", k, " n", n);
        check("MatMul", {in(random_f32({m, k}, gen)), cst(random_f32({k, n}, gen))}, {}, s,
              (m + k + n) % 2 ? 1 : 2);
      }
    }
  }
}

TEST(PackedGemm, BatchDimsFoldIntoRowsAndDeepProductsSplitK) {
  std::mt19937 gen(12);
  check("MatMul", {in(random_f32({2, 3, 40}, gen)), cst(random_f32({40, 30}, gen))}, {}, "[2,3,K] x [K,N]");
  check("MatMul", {in(random_f32({1, 128, 96}, gen)), cst(random_f32({1, 96, 80}, gen))}, {}, "[1,M,K] x [1,K,N]");
  check("MatMul", {in(random_f32({700, 900}, gen)), cst(random_f32({900, 40}, gen))}, {}, "tall");
  // K beyond one block (an eighth of L2 per panel: at most 4096 floats up to a 2 MiB L2), so
  // Y holds partial sums between blocks; the epilogue comes once, after the last.
  check("FusedMatMul", {in(random_f32({13, 9000}, gen)), cst(random_f32({9000, 40}, gen)), cst(random_f32({40}, gen))},
        {{"epilogue", std::vector<std::string>{"relu"}}}, "deep");
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
      {"clip:0:6", "linear:0.5:1"}, {"gelu_tanh"}, {"tanh"}, {"leaky_relu:0.1"}, {"elu:1"}, {"sigmoid"},
      // No hand-written form: the expression program over the tile, with and without the residual.
      {"celu:0.5"}, {"add", "celu:0.5"}};
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

// The channel block the micro-kernel takes in place: one vector (8 floats at AVX2, 16 at
// AVX-512); below AVX2 no blocked layout matches and only channels-last is a product.
int64_t kernel_block() {
  const IsaTier isa = active_target().isa;
  return isa >= IsaTier::kAvx512Core ? 16 : isa == IsaTier::kAvx2 ? 8 : -1;
}

// [N, C, H, W] in a BlockedConv layout: [N, C/b, H, W, b], or [N, 1, H, W, C] channels-last.
Ints blocked_dims(int64_t n, int64_t c, int64_t h, int64_t w, int64_t block) {
  return block == 0 ? Ints{n, 1, h, w, c} : Ints{n, c / block, h, w, block};
}

// A 1x1 BlockedConv is a product over the pixels, read in place from nChw8c / nChw16c (each
// channel group its own [pixels, lanes] matrix) or channels-last; shapes cross the tile rows,
// the narrow last panel (N = 8 at AVX2 is half a panel), the K block and several images.
TEST(PackedGemm, PointwiseBlockedConvsMatchTheReference) {
  std::mt19937 gen(17);
  struct Case {
    int64_t n, c, m, h, w;
  };
  // Output channels of an odd number of vectors (48, 80, 400 on nChw16c; 24 on nChw8c) end on
  // a one-vector panel.
  const std::vector<Case> cases = {{1, 16, 32, 1, 7}, {1, 64, 48, 7, 7}, {2, 32, 16, 5, 3},
                                   {1, 1024, 80, 4, 4}, {1, 48, 400, 2, 9}, {3, 16, 16, 1, 1},
                                   {1, 16, 24, 4, 7}};
  const std::vector<std::vector<std::string>> epilogues = {{}, {"relu"}, {"add", "relu"}, {"hardswish"}, {"clip:0:6"}};
  int tested = 0;
  for (int64_t block : {int64_t{0}, int64_t{8}, int64_t{16}}) {
    for (const Case& c : cases) {
      if (block != 0 && (c.c % block != 0 || c.m % block != 0)) continue;
      for (const auto& epilogue : epilogues) {
        const bool residual = !epilogue.empty() && epilogue[0] == "add";
        std::vector<Arg> args = {in(random_f32(blocked_dims(c.n, c.c, c.h, c.w, block), gen)),
                                 cst(random_f32({c.m, c.c, 1, 1}, gen, 0.2f)), cst(random_f32({c.m}, gen))};
        if (residual) args.push_back(in(random_f32(blocked_dims(c.n, c.m, c.h, c.w, block), gen)));
        const Attributes attrs = {{"epilogue", epilogue}, {"block", block}};
        const std::string what = str_cat("block ", block, " n", c.n, " c", c.c, " m", c.m, " ", c.h, "x", c.w, " ",
                                          epilogue.empty() ? "" : epilogue[0]);
        auto n = make_node("BlockedConv", args, attrs);
        ASSERT_NE(n, nullptr);
        const bool supported = packed_blocked_conv_kernel().supports(n->context());
        // One pixel: [N, C/b, 1, 1, b] is row-major [N, C] whatever the block.
        EXPECT_EQ(supported, block == 0 || block == kernel_block() || c.h * c.w == 1) << what;
        if (!supported) continue;
        check("BlockedConv", std::move(args), attrs, what, tested % 2 ? 1 : 2);
        ++tested;
      }
    }
  }
  EXPECT_GT(tested, 0);
  // NaN, Inf and denormals in the activations reach the output as in the reference, relu and
  // clip included.
  for (int64_t block : {int64_t{0}, kernel_block()}) {
    if (block < 0) continue;
    Tensor x = random_f32(blocked_dims(1, 32, 3, 5, block), gen);
    float* xv = x.data<float>();
    xv[5] = std::numeric_limits<float>::quiet_NaN();
    xv[77] = std::numeric_limits<float>::infinity();
    xv[301] = -std::numeric_limits<float>::infinity();
    for (int i = 400; i < 440; ++i) xv[i] = 1e-40f;
    for (const char* post : {"relu", "clip:0:6"}) {
      check("BlockedConv", {in(x), cst(random_f32({16, 32, 1, 1}, gen)), cst(random_f32({16}, gen))},
            {{"epilogue", std::vector<std::string>{post}}, {"block", block}}, str_cat("non-finite, block ", block, " ", post));
    }
  }
}

// Not a product: a 3x3 window, padding, groups, a stride that drops pixels, an input scale.
TEST(PackedGemm, OtherBlockedConvsAreDeclined) {
  std::mt19937 gen(18);
  const int64_t b = 0;  // channels-last: a product on every tier
  const auto supported = [&](Ints x, Ints w, Attributes attrs, bool scale = false) {
    attrs["block"] = b;
    std::vector<Arg> args = {in(random_f32(x, gen)), cst(random_f32(w, gen)), cst(random_f32({w[0]}, gen))};
    if (scale) {
      args.push_back(Arg{});
      args.push_back(cst(random_f32({1, x[4], 1, 1}, gen)));
    }
    auto n = make_node("BlockedConv", args, attrs);
    EXPECT_NE(n, nullptr);
    return n != nullptr && packed_blocked_conv_kernel().supports(n->context());
  };
  EXPECT_TRUE(supported({1, 1, 6, 6, 16}, {8, 16, 1, 1}, {}));
  EXPECT_FALSE(supported({1, 1, 6, 6, 16}, {8, 16, 3, 3}, {{"pads", Ints{1, 1, 1, 1}}}));
  EXPECT_FALSE(supported({1, 1, 6, 6, 16}, {8, 16, 1, 1}, {{"pads", Ints{1, 1, 1, 1}}}));
  EXPECT_FALSE(supported({1, 1, 6, 6, 16}, {16, 8, 1, 1}, {{"group", int64_t{2}}}));
  EXPECT_FALSE(supported({1, 1, 6, 6, 16}, {8, 16, 1, 1}, {{"strides", Ints{2, 2}}}));
  EXPECT_FALSE(supported({1, 1, 6, 6, 16}, {8, 16, 1, 1}, {}, /*scale=*/true));
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
  // A 1x1 conv stays on oneDNN by default (packed_gemm_wins_conv); a tuning record may choose cpu.gemm.
  auto conv = make_node("BlockedConv", {in(random_f32({1, 1, 7, 7, 32}, gen)), cst(random_f32({16, 32, 1, 1}, gen))},
                        {{"block", int64_t{0}}});
  ASSERT_NE(conv, nullptr);
  ASSERT_TRUE(packed_blocked_conv_kernel().supports(conv->context()));
  auto default_kernel = create_kernel(conv->context());
  ASSERT_TRUE(default_kernel.is_ok());
  EXPECT_EQ((*default_kernel)->name(), "onednn.blocked_conv");
  KernelCompileContext tuned = conv->context();
  tuned.kernel = "cpu.gemm";
  auto tuned_kernel = create_kernel(tuned);
  ASSERT_TRUE(tuned_kernel.is_ok());
  EXPECT_EQ((*tuned_kernel)->name(), "cpu.gemm");
  const auto alternatives = kernel_alternatives(conv->context());
  EXPECT_NE(std::find(alternatives.begin(), alternatives.end(), "cpu.gemm"), alternatives.end());
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

// The blocks are a function of the target's caches: a panel's K block an eighth of L2, M cut
// only when A's block would pass half the thread's share of L3 (so B streams from memory once
// per M block), K cut into equal blocks of whole `k_multiple`s; but when a thread's panels fit in
// half of L2 (a 1x1 conv's weights), M is cut so that A's block fills a quarter of L2.
TEST(PackedGemm, BlocksFollowTheTargetsCaches) {
  Target zen3;
  zen3.cores = 2;
  zen3.l1d_bytes = 32 << 10;
  zen3.l2_bytes = 512 << 10;
  zen3.l3_bytes = 32 << 20;
  GemmBlocks b = gemm_blocks(zen3, 768, 48, 16, 6, 4, 1);  // BERT-base's 768 x 768 products: one block
  EXPECT_EQ(b.kc, 768);
  EXPECT_GE(b.mc, 128);
  b = gemm_blocks(zen3, 3072, 48, 16, 6, 4, 1);  // its 3072-deep one: three of 1024
  EXPECT_EQ(b.kc, 1024);
  EXPECT_EQ(b.mc, 2046);  // 8 MiB of A rows, a multiple of 6
  b = gemm_blocks(zen3, 3000, 48, 16, 6, 2, 2);  // int16 pairs: two blocks of 1500
  EXPECT_EQ(b.kc, 1500);
  Target small = zen3;
  small.l3_bytes = 2 << 20;  // 1 MiB per core: A's block of 1024-deep rows holds 126 of them
  b = gemm_blocks(small, 3072, 48, 16, 6, 4, 1);
  EXPECT_EQ(b.mc, 126);
  Target unknown;  // no cache sizes: 512 KiB of L2 and 2 MiB of L3 assumed
  b = gemm_blocks(unknown, 3072, 48, 16, 6, 4, 1);
  EXPECT_EQ(b.kc, 1024);
  EXPECT_EQ(b.mc, 252);
  // A 1x1 conv 256 -> 512: 32 panels, 16 a thread of 256 x 16 floats, 256 KiB: A's block of
  // 256-deep rows fills 128 KiB, 126 of them; with 33 panels (17 a thread) B no longer fits.
  b = gemm_blocks(zen3, 256, 32, 16, 6, 4, 8);
  EXPECT_EQ(b.kc, 256);
  EXPECT_EQ(b.mc, 126);
  b = gemm_blocks(zen3, 256, 33, 16, 6, 4, 8);
  EXPECT_EQ(b.mc, 8190);
}

// Threads split the panels when each share is within a tenth of the average work (a half panel,
// one vector wide, counting half), else the rows in whole tiles; too few rows for every thread
// leave the panels split however uneven.
TEST(PackedGemm, SharesSplitRowsWhenPanelsWouldNotBalance) {
  const auto share = [](int64_t panels, int64_t m, int64_t t, bool half) { return gemm_share(panels, m, 12, t, 2, half); };
  GemmShare s = share(96, 128, 1, false);  // BERT's 3072 columns: 48 panels each
  EXPECT_EQ(s.p0, 48);
  EXPECT_EQ(s.p1, 96);
  EXPECT_EQ(s.r1 - s.r0, 128);
  s = share(95, 128, 0, true);  // 47 of 94.5 panels' work against 47.5: still by panels
  EXPECT_EQ(s.p1 - s.p0, 47);
  s = share(4, 196, 0, true);  // 672 -> 112 channels at 14x14: 2 against 1.5 panels, so rows
  EXPECT_EQ(s.p0, 0);
  EXPECT_EQ(s.p1, 4);
  EXPECT_EQ(s.r0, 0);
  EXPECT_EQ(s.r1, 96);  // 8 of the 17 tiles
  EXPECT_EQ(share(4, 196, 1, true).r0, 96);
  EXPECT_EQ(share(4, 196, 1, true).r1, 196);
  s = share(4, 196, 0, false);  // four whole panels balance
  EXPECT_EQ(s.p1, 2);
  EXPECT_EQ(s.r1, 196);
  s = share(5, 196, 0, false);  // 2 against 3 panels: rows
  EXPECT_EQ(s.p1, 5);
  s = share(5, 12, 1, false);  // one tile of rows: the panels, uneven
  EXPECT_EQ(s.p0, 2);
  EXPECT_EQ(s.p1, 5);
}

// Not a test: GFLOP/s of cpu.gemm next to the kernel create_kernel picks by default (oneDNN on
// AVX-512) on BERT-base's and mlp_blocks' products. Each shape runs as a chain of products with
// distinct weights, GEMM_BYTES in all (64 MiB by default, so that they stream from memory as in
// the models; a few MiB keeps them in L3), on one shared A (in cache, as a model's activations),
// with 1 and 2 threads, the two kernels alternating over 15 rounds. GEMM_SHAPE=MxKxN times that
// shape alone. Compare with `opfuse_fma_peak` run just before:
//   ./build/tests/opfuse_tests --gtest_also_run_disabled_tests --gtest_filter='PackedGemmBench*'
TEST(PackedGemmBench, DISABLED_BertAndMlpShapes) {
  std::mt19937 gen(17);
  struct Shape {
    long long m, k, n;
  };
  std::vector<Shape> shapes = {{128, 768, 768}, {128, 768, 3072}, {128, 3072, 768}, {64, 1024, 2048},
                               {64, 2048, 1024}};
  if (const char* e = std::getenv("GEMM_SHAPE")) {
    Shape one{};
    ASSERT_EQ(std::sscanf(e, "%lldx%lldx%lld", &one.m, &one.k, &one.n), 3) << "GEMM_SHAPE=MxKxN";
    shapes = {one};
  }
  const long long bytes = std::getenv("GEMM_BYTES") ? std::atoll(std::getenv("GEMM_BYTES")) : 64ll << 20;
  const int saved = omp_get_max_threads();
  for (const Shape& s : shapes) {
    const long long copies = std::max(2ll, bytes / (s.k * s.n * 4));
    const Tensor a = random_f32({s.m, s.k}, gen);  // one storage, shared by every node
    std::vector<std::unique_ptr<onednn_test::OneNode>> nodes;
    std::vector<std::unique_ptr<Kernel>> ours, theirs;
    for (long long i = 0; i < copies; ++i) {
      auto n = make_node("MatMul", {in(a), cst(random_f32({s.k, s.n}, gen))});
      ASSERT_NE(n, nullptr);
      auto packed = packed_matmul_kernel().create(n->context());
      auto chosen = create_kernel(n->context());
      ASSERT_TRUE(packed.is_ok() && chosen.is_ok());
      ours.push_back(std::move(*packed));
      theirs.push_back(std::move(*chosen));
      nodes.push_back(std::move(n));
    }
    std::vector<std::vector<Tensor>> outs;
    for (const auto& n : nodes) outs.push_back(n->make_outputs());
    // Seconds per product of running the whole chain once.
    auto chain = [&](const std::vector<std::unique_ptr<Kernel>>& ks) {
      const auto t0 = std::chrono::steady_clock::now();
      for (size_t i = 0; i < ks.size(); ++i) {
        Tensor* y = &outs[i][0];
        EXPECT_TRUE(ks[i]->run(nodes[i]->args(), {&y, 1}).is_ok());
      }
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / ks.size();
    };
    const double flops = 2.0 * s.m * s.k * s.n;
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      chain(ours), chain(theirs);  // warm-up
      std::vector<double> a_times, b_times;
      for (int round = 0; round < 15; ++round) a_times.push_back(chain(ours)), b_times.push_back(chain(theirs));
      std::sort(a_times.begin(), a_times.end());
      std::sort(b_times.begin(), b_times.end());
      std::printf("%d thr  %4lldx%4lldx%4lld x%-3lld cpu.gemm %6.1f GFLOP/s (%s) | %s %6.1f GFLOP/s (%s)\n", threads,
                  s.m, s.k, s.n, copies, flops / a_times[7] / 1e9, ours[0]->implementation().c_str(),
                  std::string(theirs[0]->name()).c_str(), flops / b_times[7] / 1e9, theirs[0]->implementation().c_str());
    }
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace opfuse
