// The oneDNN kernels (kernels/cpu/onednn_*.cc) against the reference kernels on random and
// model-shaped cases: create_kernel must pick the oneDNN kernel for what it handles (and the
// reference for what it does not), and both must agree within 1e-4 of the reference's largest
// magnitude. The reference kernels are tested against hand/PyTorch values in tests/ops.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <random>
#include <thread>

#include "frontend/onnx/importer.h"
#include "frontend/onnx/tensor_proto.h"
#include "kernels/cpu/onednn_common.h"
#include "kernels/cpu/packed_gemm_kernel.h"
#include "kernels/kernel.h"
#include "kernels/onednn_test_util.h"
#include "ops/infer_shapes.h"
#include "runtime/compare.h"

namespace opfuse {
namespace {

using onednn_test::Arg;
using onednn_test::cst;
using onednn_test::in;
using onednn_test::make_node;
using onednn_test::OneNode;

using Ints = std::vector<int64_t>;

Tensor random_tensor(const Ints& dims, std::mt19937& gen, DType dtype = DType::kF32) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor t = Tensor::zeros(DType::kF32, dims).value();
  for (float& v : t.values<float>()) v = dist(gen);
  return dtype == DType::kF32 ? t : t.cast(dtype).value();
}

// The worst max |a - r| / max |r| over the outputs the reference produced.
double max_rel_diff(const std::vector<Tensor>& actual, const std::vector<Tensor>& expected) {
  double worst = 0;
  for (size_t o = 0; o < expected.size(); ++o) {
    if (expected[o].defined()) worst = std::max(worst, max_relative_difference(actual[o], expected[o]));
  }
  return worst;
}

std::vector<Tensor> run_kernel(const Kernel& k, const OneNode& n) {
  std::vector<Tensor> out = n.make_outputs();
  std::vector<Tensor*> out_ptrs;
  for (Tensor& t : out) out_ptrs.push_back(t.defined() ? &t : nullptr);
  const std::vector<const Tensor*> args = n.args();
  const Status s = k.run(args, out_ptrs);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return out;
}

// The kernel a node gets where a test names oneDNN's: below AVX-512 a product with constant
// weights runs the packed cpu.gemm instead (packed_gemm_wins), and oneDNN keeps the rest.
std::string_view expected_kernel(std::string_view want_kernel, const OneNode& n) {
  if (!packed_gemm_wins(active_target())) return want_kernel;
  for (const KernelImpl& packed : {packed_matmul_kernel(), packed_gemm_kernel()}) {
    if (packed.op_type == n.node->op_type() && packed.supports(n.context())) return packed.name;
  }
  return want_kernel;
}

// Creates the node's kernel, checks which implementation was picked (unless `want_kernel` is
// empty), and compares its output with the reference kernel's.
void check(const std::string& op, const std::vector<Arg>& args, const Attributes& attrs,
           std::string_view want_kernel, const std::string& what, int num_outputs = 1) {
  SCOPED_TRACE(str_cat(op, " ", what));
  auto n = make_node(op, args, attrs, num_outputs);
  ASSERT_NE(n, nullptr);
  auto kernel = create_kernel(n->context());
  ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();
  if (!want_kernel.empty()) {
    EXPECT_EQ((*kernel)->name(), expected_kernel(want_kernel, *n));
  }
  const std::vector<Tensor> expected = run_kernel(*make_reference_kernel(*n->node), *n);
  const std::vector<Tensor> actual = run_kernel(**kernel, *n);
  EXPECT_LE(max_rel_diff(actual, expected), 1e-4);
}

Attributes conv_attrs(const Ints& strides, const Ints& dilations, const Ints& pads,
                      int64_t group) {
  return {{"strides", strides}, {"dilations", dilations}, {"pads", pads}, {"group", group}};
}

// A 2D conv without bias of random input x and constant weights w (group: x's channels over w's
// input channels), square stride and padding: the shapes the thread-count tests ask about.
std::unique_ptr<OneNode> plain_conv(const Ints& x, const Ints& w, int64_t stride, int64_t pad, std::mt19937& gen) {
  return make_node("Conv", {in(random_tensor(x, gen)), cst(random_tensor(w, gen))},
                   conv_attrs({stride, stride}, {1, 1}, {pad, pad, pad, pad}, x[1] / w[1]));
}

// ------------------------------------------------------------------------------------- Conv

TEST(OneDnnConv, RandomShapes) {
  std::mt19937 gen(1234);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); };
  for (int iter = 0; iter < 60; ++iter) {
    const int spatial = std::vector<int>{1, 2, 2, 2, 3}[pick(0, 4)];
    const int kind = pick(0, 3);  // 0: group 1, 1: group 2-3, 2: depthwise, 3: depthwise x2
    int64_t group = 1, cg = pick(1, 6), mg = pick(1, 7);
    if (kind == 1) group = pick(2, 3);
    if (kind >= 2) group = pick(2, 8), cg = 1, mg = kind == 2 ? 1 : 2;
    const int64_t batch = pick(1, 3);
    Ints x = {batch, group * cg}, w = {group * mg, cg}, strides, dilations, pads(2 * spatial);
    for (int i = 0; i < spatial; ++i) {
      const int64_t k = pick(1, spatial == 3 ? 3 : 5), s = pick(1, 3), d = pick(1, 2);
      const int64_t pb = pick(0, 2), pe = pick(0, 2), extent = (k - 1) * d + 1;
      x.push_back(std::max<int64_t>(1, extent - pb - pe) + pick(0, spatial == 3 ? 4 : 9));
      w.push_back(k);
      strides.push_back(s), dilations.push_back(d);
      pads[i] = pb, pads[i + spatial] = pe;
    }
    Attributes attrs = conv_attrs(strides, dilations, pads, group);
    const int pad_mode = pick(0, 5);
    if (pad_mode >= 3) {
      attrs.erase("pads");
      attrs["auto_pad"] = std::string(pad_mode == 3 ? "SAME_UPPER" : pad_mode == 4 ? "SAME_LOWER"
                                                                                    : "VALID");
      if (pad_mode == 5) {  // VALID needs the unpadded input to hold the kernel
        for (int i = 0; i < spatial; ++i) {
          x[2 + i] = std::max(x[2 + i], (w[2 + i] - 1) * dilations[i] + 1);
        }
      }
    }
    std::vector<Arg> args = {in(random_tensor(x, gen)), cst(random_tensor(w, gen))};
    if (pick(0, 1)) args.push_back(pick(0, 1) ? cst(random_tensor({group * mg}, gen))
                                             : in(random_tensor({group * mg}, gen)));
    check("Conv", args, attrs, "onednn.conv",
          str_cat("#", iter, " x", dims_to_string(x), " w", dims_to_string(w), " s",
                  dims_to_string(strides), " d", dims_to_string(dilations), " p",
                  dims_to_string(pads), " g", group, " pad_mode ", pad_mode));
  }
}

// A 1-d conv runs as a 2-d one of height 1: oneDNN 2.6 has only its GEMM implementation for 1-d
// convs, one tiny GEMM per group for grouped ones (Silero VAD's 258-channel depthwise conv over
// 8 positions: 72 us on gemm:jit).
TEST(OneDnnConv, OneDimensionalConvsRunDirectKernels) {
  // oneDNN 2.6 has no direct kernel for these plain-layout convs below AVX2 (its sse41 tier runs
  // them as gemm: `OPFUSE_TARGET=sse41`).
  if (active_target().isa < IsaTier::kAvx2) GTEST_SKIP() << "no direct oneDNN kernel below AVX2";
  std::mt19937 gen(9);
  struct Case {
    const char* name;
    Ints x, w;
    int64_t group;
  };
  for (const Case& c : {Case{"depthwise k5", {1, 258, 8}, {258, 1, 5}, 258}, Case{"dense k5", {1, 32, 16}, {32, 32, 5}, 1}}) {
    SCOPED_TRACE(c.name);
    auto n = make_node("Conv", {in(random_tensor(c.x, gen)), cst(random_tensor(c.w, gen)), cst(random_tensor({c.w[0]}, gen))},
                       conv_attrs({1}, {1}, {2, 2}, c.group));
    auto k = create_kernel(n->context());
    ASSERT_TRUE(k.is_ok()) << k.status().message();
    EXPECT_EQ((*k)->name(), "onednn.conv");
    EXPECT_EQ((*k)->implementation().find("gemm"), std::string::npos) << (*k)->implementation();
    const std::vector<Tensor> expected = run_kernel(*make_reference_kernel(*n->node), *n);
    EXPECT_LE(max_rel_diff(run_kernel(**k, *n), expected), 1e-5);
  }
}

TEST(OneDnnConv, ModelShapes) {
  std::mt19937 gen(7);
  struct Case {
    const char* name;
    Ints x, w;
    Ints strides, pads;
    int64_t group;
  };
  const Case cases[] = {
      {"resnet stem 7x7/2", {1, 3, 224, 224}, {64, 3, 7, 7}, {2, 2}, {3, 3, 3, 3}, 1},
      {"resnet 3x3", {1, 64, 56, 56}, {64, 64, 3, 3}, {1, 1}, {1, 1, 1, 1}, 1},
      {"resnet 1x1", {1, 256, 56, 56}, {64, 256, 1, 1}, {1, 1}, {0, 0, 0, 0}, 1},
      {"resnet 1x1/2", {2, 256, 28, 28}, {128, 256, 1, 1}, {2, 2}, {0, 0, 0, 0}, 1},
      {"mobilenet dw 3x3/2", {1, 32, 112, 112}, {32, 1, 3, 3}, {2, 2}, {0, 0, 1, 1}, 32},
      {"mobilenet dw 3x3", {2, 96, 28, 28}, {96, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, 96},
      {"mobilenet pw", {1, 32, 112, 112}, {16, 32, 1, 1}, {1, 1}, {0, 0, 0, 0}, 1},
  };
  for (const Case& c : cases) {
    check("Conv",
          {in(random_tensor(c.x, gen)), cst(random_tensor(c.w, gen)),
           cst(random_tensor({c.w[0]}, gen))},
          conv_attrs(c.strides, {1, 1}, c.pads, c.group), "onednn.conv", c.name);
  }
}

TEST(OneDnnConv, UnsupportedFallsBackToReference) {
  std::mt19937 gen(3);
  const Attributes attrs = conv_attrs({1, 1}, {1, 1}, {1, 1, 1, 1}, 1);
  // Weights computed at run time.
  check("Conv", {in(random_tensor({1, 4, 8, 8}, gen)), in(random_tensor({5, 4, 3, 3}, gen))},
        attrs, "reference", "runtime weights");
  // f64.
  check("Conv",
        {in(random_tensor({1, 4, 8, 8}, gen, DType::kF64)),
         cst(random_tensor({5, 4, 3, 3}, gen, DType::kF64))},
        attrs, "reference", "f64");
}

// ----------------------------------------------------------------------------- ConvTranspose

TEST(OneDnnConvTranspose, RandomShapes) {
  std::mt19937 gen(99);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); };
  for (int iter = 0; iter < 40; ++iter) {
    const int spatial = std::vector<int>{1, 2, 2, 3}[pick(0, 3)];
    const int64_t group = pick(0, 2) == 0 ? pick(2, 3) : 1, cg = pick(1, 5), mg = pick(1, 5);
    const int64_t batch = pick(1, 2);
    Ints x = {batch, group * cg}, w = {group * cg, mg}, strides, dilations, pads(2 * spatial),
         out_pad;
    bool negative_pad = false;
    for (int i = 0; i < spatial; ++i) {
      const int64_t k = pick(1, 4), s = pick(1, 3), d = pick(1, 2);
      const int64_t pb = pick(0, 2), pe = pick(0, 2);
      // output_padding must be below the stride or the dilation (ONNX). Beyond the end pad it
      // becomes a negative end pad for oneDNN, which it accepts for some geometries only (the
      // others go to the reference kernel); either way the result must be right.
      const int64_t op = pick(0, static_cast<int>(std::max(s, d) - 1));
      x.push_back(pick(2, spatial == 3 ? 4 : 8));
      w.push_back(k);
      strides.push_back(s), dilations.push_back(d), out_pad.push_back(op);
      pads[i] = pb, pads[i + spatial] = pe;
      // Keep the output non-empty.
      if (s * (x.back() - 1) + op + (k - 1) * d + 1 - pb - pe <= 0) pads[i] = pads[i + spatial] = 0;
      if (op > pads[i + spatial]) negative_pad = true;
    }
    Attributes attrs = conv_attrs(strides, dilations, pads, group);
    attrs["output_padding"] = out_pad;
    std::vector<Arg> args = {in(random_tensor(x, gen)), cst(random_tensor(w, gen))};
    if (pick(0, 1)) args.push_back(cst(random_tensor({group * mg}, gen)));
    check("ConvTranspose", args, attrs, negative_pad ? "" : "onednn.conv_transpose",
          str_cat("#", iter, " x", dims_to_string(x), " w", dims_to_string(w), " s",
                  dims_to_string(strides), " d", dims_to_string(dilations), " p",
                  dims_to_string(pads), " op", dims_to_string(out_pad), " g", group));
  }
}

TEST(OneDnnConvTranspose, OutputShapeAndAutoPad) {
  std::mt19937 gen(5);
  const Tensor x = random_tensor({1, 8, 7, 7}, gen), w = random_tensor({8, 4, 3, 3}, gen);
  // output_shape 14x14 from 7x7 at stride 2: the full output is 15, one element cropped.
  check("ConvTranspose", {in(x), cst(w)},
        {{"strides", Ints{2, 2}}, {"output_shape", Ints{14, 14}}}, "onednn.conv_transpose",
        "output_shape");
  check("ConvTranspose", {in(x), cst(w)},
        {{"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_LOWER")}},
        "onednn.conv_transpose", "SAME_LOWER");
  // A requested size beyond the full output (16 > 15): an extra element at the end, which
  // holds only the bias (a negative end pad for oneDNN).
  check("ConvTranspose", {in(x), cst(w), cst(random_tensor({4}, gen))},
        {{"strides", Ints{2, 2}}, {"output_shape", Ints{16, 16}}}, "onednn.conv_transpose",
        "output_shape larger than full");
  check("ConvTranspose", {in(x), cst(w), in(random_tensor({4}, gen))},
        {{"strides", Ints{2, 2}}, {"output_padding", Ints{1, 1}}}, "onednn.conv_transpose",
        "output_padding without pads");
  // The classic decoder upsampler: k4 s2 p1 doubles the size.
  check("ConvTranspose", {in(x), cst(random_tensor({8, 16, 4, 4}, gen))},
        {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}, "onednn.conv_transpose",
        "k4 s2 p1");
}

// ------------------------------------------------------------------------------------ MatMul

TEST(OneDnnMatMul, RandomBroadcastShapes) {
  std::mt19937 gen(2024);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); };
  for (int iter = 0; iter < 60; ++iter) {
    const int64_t m = pick(1, 40), k = pick(1, 70), n = pick(1, 50);
    const int ra = pick(1, 4), rb = pick(1, 4);
    const int batch_rank = std::max(ra, rb) - 2;
    Ints batch;
    for (int i = 0; i < batch_rank; ++i) batch.push_back(pick(1, 4));
    auto batch_of = [&](int rank) {
      Ints b;
      for (int i = batch_rank - (rank - 2); i < batch_rank; ++i) {
        b.push_back(pick(0, 2) == 0 ? 1 : batch[i]);  // broadcast some dims
      }
      return b;
    };
    Ints a = ra == 1 ? Ints{k} : batch_of(ra), b = rb == 1 ? Ints{k} : batch_of(rb);
    if (ra > 1) a.insert(a.end(), {m, k});
    if (rb > 1) b.insert(b.end(), {k, n});
    const bool b_const = pick(0, 1);
    // A single row (after folding A's batch dims) times constant weights goes to cpu.gemv.
    auto numel = [](const Ints& d) { return std::accumulate(d.begin(), d.end(), int64_t{1}, std::multiplies<>()); };
    const bool gemv = b_const && numel(a) == k && numel(b) == k * (rb == 1 ? 1 : n);
    check("MatMul", {in(random_tensor(a, gen)), b_const ? cst(random_tensor(b, gen))
                                                        : in(random_tensor(b, gen))},
          {}, gemv ? "cpu.gemv" : "onednn.matmul",
          str_cat("#", iter, " ", dims_to_string(a), " x ", dims_to_string(b),
                  b_const ? " const" : ""));
  }
}

TEST(OneDnnMatMul, BertShapes) {
  std::mt19937 gen(11);
  check("MatMul", {in(random_tensor({1, 128, 768}, gen)), cst(random_tensor({768, 768}, gen))},
        {}, "onednn.matmul", "qkv projection");
  check("MatMul", {in(random_tensor({128, 768}, gen)), cst(random_tensor({768, 3072}, gen))},
        {}, "onednn.matmul", "ffn up");
  check("MatMul",
        {in(random_tensor({1, 12, 128, 64}, gen)), in(random_tensor({1, 12, 64, 128}, gen))},
        {}, "onednn.matmul", "Q*K^T");
  check("MatMul",
        {in(random_tensor({1, 12, 128, 128}, gen)), in(random_tensor({1, 12, 128, 64}, gen))},
        {}, "onednn.matmul", "P*V");
}

TEST(OneDnnMatMul, UnsupportedFallsBackToReference) {
  std::mt19937 gen(12);
  check("MatMul",
        {in(random_tensor({4, 5}, gen, DType::kF64)), in(random_tensor({5, 3}, gen, DType::kF64))},
        {}, "reference", "f64");
  check("MatMul", {in(random_tensor({4, 0}, gen)), in(random_tensor({0, 3}, gen))}, {},
        "reference", "empty K");
}

// -------------------------------------------------------------------------------------- Gemm

TEST(OneDnnGemm, RandomAttributes) {
  std::mt19937 gen(77);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); };
  for (int iter = 0; iter < 60; ++iter) {
    const int64_t m = pick(1, 40), k = pick(1, 60), n = pick(1, 40);
    const bool ta = pick(0, 1), tb = pick(0, 1), b_const = pick(0, 1), c_const = pick(0, 1);
    const float alpha = pick(0, 1) ? 1.0f : 0.5f, beta = pick(0, 1) ? 1.0f : -1.5f;
    const std::vector<Ints> c_shapes = {{}, {n}, {1, n}, {m, 1}, {m, n}, {1, 1}, {1}};
    const int c_kind = pick(-1, static_cast<int>(c_shapes.size()) - 1);  // -1: no C
    std::vector<Arg> args = {
        in(random_tensor(ta ? Ints{k, m} : Ints{m, k}, gen)),
        b_const ? cst(random_tensor(tb ? Ints{n, k} : Ints{k, n}, gen))
                : in(random_tensor(tb ? Ints{n, k} : Ints{k, n}, gen))};
    if (c_kind >= 0) {
      Tensor c = random_tensor(c_shapes[c_kind], gen);
      args.push_back(c_const ? cst(c) : in(c));
    }
    // oneDNN 2.6's matmul adds a bias only along N ([N], [1, N]); any other C shape gets its
    // reference loops, which the kernel refuses (is_reference_impl), so our reference runs.
    Ints c2 = c_kind < 0 ? Ints{} : c_shapes[c_kind];
    while (c2.size() < 2) c2.insert(c2.begin(), 1);
    const bool c_along_n = c_kind < 0 || (c2[0] == 1 && c2[1] == n);
    const bool supported = (alpha == 1.0f || b_const) && (c_kind < 0 || beta == 1.0f || c_const) && c_along_n;
    check("Gemm", args,
          {{"transA", int64_t{ta}}, {"transB", int64_t{tb}}, {"alpha", alpha}, {"beta", beta}},
          supported ? "onednn.gemm" : "reference",
          str_cat("#", iter, " m", m, " k", k, " n", n, " ta", ta, " tb", tb, " alpha ", alpha,
                  " beta ", beta, " C ", c_kind < 0 ? "none" : dims_to_string(c_shapes[c_kind]),
                  b_const ? " B const" : "", c_const ? " C const" : ""));
  }
}

TEST(OneDnnGemm, ClassifierShape) {
  std::mt19937 gen(8);
  check("Gemm",
        {in(random_tensor({2, 2048}, gen)), cst(random_tensor({1000, 2048}, gen)),
         cst(random_tensor({1000}, gen))},
        {{"transB", int64_t{1}}}, "onednn.gemm", "resnet fc");
}

// ------------------------------------------------------------------------------------- Pools

TEST(OneDnnPool, RandomWindows) {
  std::mt19937 gen(555);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); };
  for (int iter = 0; iter < 60; ++iter) {
    const bool is_max = pick(0, 1);
    const int spatial = std::vector<int>{1, 2, 2, 3}[pick(0, 3)];
    Ints x = {pick(1, 2), pick(1, 5)}, kernel, strides, dilations, pads(2 * spatial);
    for (int i = 0; i < spatial; ++i) {
      const int64_t k = pick(1, 4), s = pick(1, 3), d = is_max ? pick(1, 2) : 1;
      // Pads below half the window keep every window over some input.
      const int64_t p_max = ((k - 1) * d + 1) / 2;
      kernel.push_back(k), strides.push_back(s), dilations.push_back(d);
      pads[i] = pick(0, static_cast<int>(p_max)), pads[i + spatial] = pick(0, static_cast<int>(p_max));
      x.push_back((k - 1) * d + 1 + pick(0, 8));
    }
    const bool ceil_mode = pick(0, 1);
    Attributes attrs = {{"kernel_shape", kernel}, {"strides", strides}, {"pads", pads},
                        {"ceil_mode", int64_t{ceil_mode}}};
    if (is_max) {
      attrs["dilations"] = dilations;
    } else if (!ceil_mode) {  // count_include_pad with a ceil overhang is a reference case
      attrs["count_include_pad"] = int64_t{pick(0, 1)};
    }
    // oneDNN 2.6 pools a dilated window only with its reference loops, which are refused; a 2-d
    // max pool then runs cpu.max_pool, as a 2-d pool does where oneDNN has only its scalar
    // simple_nchw (cpu.max_pool / cpu.avg_pool; which oneDNN picks depends on the CPU: either
    // kernel name is right there).
    const bool dilated = std::any_of(dilations.begin(), dilations.end(), [](int64_t d) { return d > 1; });
    const bool plain_2d = spatial == 2 && (is_max || !dilated);
    const char* want = plain_2d ? (dilated ? "cpu.max_pool" : "") : dilated ? "reference" : "onednn.pool";
    check(is_max ? "MaxPool" : "AveragePool", {in(random_tensor(x, gen))}, attrs, want,
          str_cat("#", iter, " x", dims_to_string(x), " k", dims_to_string(kernel), " s",
                  dims_to_string(strides), " d", dims_to_string(dilations), " p",
                  dims_to_string(pads), " ceil ", ceil_mode));
  }
}

TEST(OneDnnPool, ModelShapesAndGlobalPools) {
  std::mt19937 gen(556);
  check("MaxPool", {in(random_tensor({1, 64, 112, 112}, gen))},
        {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}},
        "", "resnet stem maxpool");  // onednn.pool where it has a jit kernel for NCHW, else cpu.max_pool
  check("MaxPool", {in(random_tensor({1, 8, 13, 13}, gen))},
        {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}},
         {"auto_pad", std::string("SAME_UPPER")}},
        "", "SAME_UPPER");
  check("AveragePool", {in(random_tensor({1, 8, 7, 7}, gen))},
        {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}},
         {"pads", Ints{1, 1, 1, 1}}, {"count_include_pad", int64_t{1}}},
        "", "ceil_mode without overhang, count_include_pad");  // onednn.pool or cpu.avg_pool
  // Means over whole axes run as a ReduceMean (hwy_reduce.cc), not as oneDNN pooling.
  check("GlobalAveragePool", {in(random_tensor({2, 2048, 7, 7}, gen))}, {}, "hwy.reduce",
        "resnet head");
  check("GlobalAveragePool", {in(random_tensor({3, 5, 9}, gen))}, {}, "hwy.reduce", "1-d");
  check("AveragePool", {in(random_tensor({1, 8, 7, 7}, gen))}, {{"kernel_shape", Ints{7, 7}}},
        "hwy.reduce", "window covering the whole map");
  check("AveragePool", {in(random_tensor({2, 8, 7, 5}, gen))}, {{"kernel_shape", Ints{7, 1}}},
        "hwy.reduce", "window covering H only, W kept");
  check("AveragePool", {in(random_tensor({1, 8, 7, 7}, gen))},
        {{"kernel_shape", Ints{7, 7}}, {"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{3, 3}}}, "",
        "whole-map window with padding: a windowed pool");  // onednn.pool or cpu.avg_pool
  check("GlobalMaxPool", {in(random_tensor({2, 6, 3, 4, 5}, gen))}, {}, "onednn.pool", "3-d");
}

TEST(OneDnnPool, UnsupportedFallsBackToReference) {
  std::mt19937 gen(557);
  const Tensor x = random_tensor({1, 3, 6, 6}, gen);
  check("MaxPool", {in(x)}, {{"kernel_shape", Ints{2, 2}}}, "reference", "Indices output", 2);
  // The ceil_mode window hangs past the end pad; oneDNN would count it, the reference and
  // cpu.avg_pool do not.
  check("AveragePool", {in(x)},
        {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}},
         {"count_include_pad", int64_t{1}}},
        "cpu.avg_pool", "count_include_pad with ceil overhang");
  // pads as large as the kernel: the first window is all padding, which oneDNN leaves undefined;
  // cpu.max_pool gives -Inf there, as the reference does.
  check("MaxPool", {in(x)}, {{"kernel_shape", Ints{2, 2}}, {"pads", Ints{2, 2, 2, 2}}},
        "cpu.max_pool", "window in padding");
  check("AveragePool", {in(random_tensor({1, 3, 6, 6}, gen, DType::kF64))},
        {{"kernel_shape", Ints{2, 2}}}, "reference", "f64");
}

// ------------------------------------------------------------------------------- concurrency

// One kernel run from 4 threads at once on different buffers: every thread's result must
// equal what a lone run produces for its input.
void check_concurrent(const std::string& op, const std::vector<Arg>& args, const Attributes& attrs,
                      const std::vector<size_t>& per_thread_inputs) {
  SCOPED_TRACE(op);
  constexpr int kThreads = 4;
  std::mt19937 gen(42);
  std::vector<std::unique_ptr<OneNode>> nodes;
  for (int t = 0; t < kThreads; ++t) {
    std::vector<Arg> a = args;
    for (size_t i : per_thread_inputs) a[i].tensor = random_tensor(a[i].tensor.dims(), gen);
    nodes.push_back(make_node(op, a, attrs));
    ASSERT_NE(nodes.back(), nullptr);
  }
  // One kernel, compiled from the first node; the others only supply their buffers.
  auto kernel = create_kernel(nodes[0]->context());
  ASSERT_TRUE(kernel.is_ok());
  EXPECT_NE((*kernel)->name(), "reference");
  std::vector<std::vector<Tensor>> alone;
  for (const auto& n : nodes) alone.push_back(run_kernel(**kernel, *n));
  std::vector<std::vector<Tensor>> together(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep) together[t] = run_kernel(**kernel, *nodes[t]);
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(together[t][0].numel(), alone[t][0].numel());
    const auto a = together[t][0].values<float>(), b = alone[t][0].values<float>();
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << "thread " << t;
    // Different inputs really gave different outputs (the threads did not share buffers).
    if (t > 0) {
      EXPECT_NE(alone[t][0].get_double(0), alone[0][0].get_double(0));
    }
  }
}

TEST(OneDnnConcurrency, FourThreadsOneKernel) {
  std::mt19937 gen(43);
  // A spatial conv: runs the blocked kernel with internal reorders and a scratchpad.
  check_concurrent("Conv",
                   {in(random_tensor({1, 32, 28, 28}, gen)), cst(random_tensor({48, 32, 3, 3}, gen)),
                    cst(random_tensor({48}, gen))},
                   conv_attrs({1, 1}, {1, 1}, {1, 1, 1, 1}, 1), {0});
  check_concurrent("MatMul",
                   {in(random_tensor({2, 64, 96}, gen)), in(random_tensor({2, 96, 80}, gen))}, {},
                   {0, 1});
  check_concurrent("MatMul", {in(random_tensor({64, 256}, gen)), cst(random_tensor({256, 320}, gen))},
                   {}, {0});
  check_concurrent("MaxPool", {in(random_tensor({2, 16, 30, 30}, gen))},
                   {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}}, {0});
}

// A primitive too small to pay for waking a second thread is created and run on one; larger ones
// use the caller's count. Either way its result is the reference's.
TEST(OneDnnThreads, SmallWorkRunsOnOneThread) {
  std::mt19937 gen(44);
  // 2*8*8*4*4*9 = 18 kFLOP, and 2*64*64*56*56*9 = 231 MFLOP: on either side of the limit on
  // every tier (1.5-3 MFLOP).
  auto small = plain_conv({1, 8, 4, 4}, {8, 8, 3, 3}, 1, 1, gen);
  auto large = plain_conv({1, 64, 56, 56}, {64, 64, 3, 3}, 1, 1, gen);
  // A depthwise conv of few FLOPs (192 x 28 x 28, 3x3 stride 2: 0.7 MFLOP) but 750 KB of input
  // and output runs at memory speed (~30 us on one core): every thread.
  auto depthwise = plain_conv({1, 192, 28, 28}, {192, 1, 3, 3}, 2, 1, gen);
  EXPECT_EQ(onednn::threads_for_work(*small->node), 1);
  EXPECT_EQ(onednn::threads_for_work(*large->node), 0);
  EXPECT_EQ(onednn::threads_for_work(*depthwise->node), 0);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  for (const auto* n : {small.get(), large.get(), depthwise.get()}) {
    auto k = create_kernel(n->context());
    ASSERT_TRUE(k.is_ok()) << k.status().message();
    EXPECT_EQ((*k)->name(), "onednn.conv");
    const std::vector<Tensor> expected = run_kernel(*make_reference_kernel(*n->node), *n);
    EXPECT_LE(max_rel_diff(run_kernel(**k, *n), expected), 1e-5);
    EXPECT_EQ(omp_get_max_threads(), 2) << "the caller's thread count is restored";
  }
  omp_set_num_threads(saved);
}

// Cores that share a cache hand data over cheaply, so kernels a few times smaller already gain from
// a second thread there; the decision reads the target's measured distance, never the host's. The
// limits scale with the vector width, so the target's tier is fixed too (avx2: 32-byte vectors;
// only the decision is asked, no kernel is created).
TEST(OneDnnThreads, NearCoresTakeSmallerWorkToEveryThread) {
  std::mt19937 gen(45);
  // A 1x1 conv of 2*64*32*16*16 = 1 MFLOP and 96 KB of input and output: on AVX2 under the far
  // limit (1.5 MFLOP), above the near one (0.45).
  auto pointwise = plain_conv({1, 64, 16, 16}, {32, 64, 1, 1}, 1, 0, gen);
  // One of fr_eye's convs: 0.2 MFLOP and 50 KB, ~2 us on one core; a second one costs ~1.5 us.
  auto tiny = plain_conv({1, 16, 20, 20}, {16, 16, 1, 1}, 1, 0, gen);
  // A depthwise conv of 0.3 MFLOP but 128 KB, memory-bound: over the near byte limit (77 KB), under
  // the far one (256 KB).
  auto depthwise = plain_conv({1, 64, 16, 16}, {64, 1, 3, 3}, 1, 1, gen);
  const Target saved = active_target();
  Target t = saved;
  t.isa = IsaTier::kAvx2;
  for (const double ns : {470.0, 0.0}) {  // across Zen 5 CCDs; unknown (one CPU, no measurement)
    t.core_round_trip_ns = ns;
    set_active_target(t);
    EXPECT_EQ(onednn::threads_for_work(*pointwise->node), 1) << ns << " ns";
    EXPECT_EQ(onednn::threads_for_work(*tiny->node), 1) << ns << " ns";
    EXPECT_EQ(onednn::threads_for_work(*depthwise->node), 1) << ns << " ns";
  }
  t.core_round_trip_ns = 55;  // one Zen 4 CCD
  set_active_target(t);
  EXPECT_EQ(onednn::threads_for_work(*pointwise->node), 0);
  EXPECT_EQ(onednn::threads_for_work(*tiny->node), 1);
  EXPECT_EQ(onednn::threads_for_work(*depthwise->node), 0);
  set_active_target(saved);
}

// ------------------------------------------------------------------ ONNX backend node tests

// The ONNX conformance cases of these ops, with every input after X given as compile-time
// constant (as weights are in real models), against the expected outputs shipped with them.
TEST(OneDnnOnnxNodeTests, MatchExpectedOutputs) {
  namespace fs = std::filesystem;
  const fs::path root = "/usr/share/libonnx-testdata/data/node";
  if (!fs::exists(root)) GTEST_SKIP() << "no ONNX test data";
  const std::vector<std::string> prefixes = {"test_conv_", "test_convtranspose", "test_maxpool_",
                                             "test_averagepool_", "test_globalaveragepool",
                                             "test_globalmaxpool", "test_matmul_", "test_gemm_"};
  int onednn_runs = 0, cases = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename();
    if (std::none_of(prefixes.begin(), prefixes.end(),
                     [&](const std::string& p) { return name.rfind(p, 0) == 0; })) {
      continue;
    }
    SCOPED_TRACE(name);
    auto graph = load_onnx_file((entry.path() / "model.onnx").string());
    // Models at opsets before 11 are refused by the importer (as in the conformance runner).
    if (!graph.is_ok() && graph.status().message().find("opfuse implements opsets") !=
                              std::string::npos) {
      continue;
    }
    ASSERT_TRUE(graph.is_ok()) << graph.status().message();
    ASSERT_TRUE(infer_shapes(*graph).is_ok());
    const std::vector<Node*> nodes = graph->nodes();
    ASSERT_EQ(nodes.size(), 1u);
    const Node& node = *nodes[0];
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < node.inputs().size(); ++i) {
      auto t = onnx_import::read_tensor_file((entry.path() / str_cat("test_data_set_0/input_", i, ".pb")).string());
      ASSERT_TRUE(t.is_ok()) << t.status().message();
      inputs.push_back(*t);
    }
    std::vector<const Tensor*> args, constants;
    for (size_t i = 0; i < inputs.size(); ++i) {
      args.push_back(&inputs[i]);
      constants.push_back(i > 0 ? &inputs[i] : nullptr);
    }
    auto kernel = create_kernel(KernelCompileContext{node, constants, 1});
    ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();
    std::vector<Tensor> expected, actual;
    std::vector<Tensor*> outs;
    for (size_t o = 0; o < node.outputs().size(); ++o) {
      auto t = onnx_import::read_tensor_file((entry.path() / str_cat("test_data_set_0/output_", o, ".pb")).string());
      ASSERT_TRUE(t.is_ok()) << t.status().message();
      expected.push_back(*t);
      actual.push_back(Tensor::zeros(t->dtype(), t->dims()).value());
    }
    for (Tensor& t : actual) outs.push_back(&t);
    const Status s = (*kernel)->run(args, outs);
    ASSERT_TRUE(s.is_ok()) << s.message();
    EXPECT_LE(max_rel_diff(actual, expected), 1e-4) << (*kernel)->name();
    ++cases;
    if ((*kernel)->name() != "reference") ++onednn_runs;
    // No oneDNN kernel runs its reference loops (OneDnnKernel::implementation says which runs).
    EXPECT_EQ((*kernel)->implementation().find("ref"), std::string::npos) << (*kernel)->implementation();
  }
  // All but at most 6 are f32 cases an optimised kernel handles: not MaxPool's Indices output,
  // nor u8, nor the dilated pools that oneDNN 2.6 has only reference loops for (except the 2-d
  // max pool that cpu.max_pool takes), nor Gemm's scalar-shaped biases, which below AVX-512
  // cpu.gemm handles too (packed_gemm_wins).
  EXPECT_GE(cases, 59);
  EXPECT_GE(onednn_runs, cases - 6);
}

// ---------------------------------------------------------------------------------- benchmark

// Not a test: GFLOP/s of the oneDNN Conv and MatMul kernels next to the reference kernel on
// ResNet-50 and BERT shapes, with 1 and 2 OpenMP threads. Run with
//   OMP_WAIT_POLICY=passive ./build/tests/opfuse_tests --gtest_also_run_disabled_tests
//     --gtest_filter='OneDnnBench*'
double median_seconds(const Kernel& k, const OneNode& n, int runs) {
  std::vector<Tensor> out = n.make_outputs();
  std::vector<Tensor*> out_ptrs = {&out[0]};
  const std::vector<const Tensor*> args = n.args();
  EXPECT_TRUE(k.run(args, out_ptrs).is_ok());  // warm-up (JIT, page faults)
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(k.run(args, out_ptrs).is_ok());
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

TEST(OneDnnBench, DISABLED_ConvAndMatMul) {
  std::mt19937 gen(1);
  struct Case {
    std::string name, op;
    std::vector<Arg> args;
    Attributes attrs;
    double flops;
  };
  auto conv = [&](const char* name, Ints x, Ints w, int64_t s, int64_t p) {
    const int64_t out = (x[2] + 2 * p - w[2]) / s + 1;
    return Case{name, "Conv", {in(random_tensor(x, gen)), cst(random_tensor(w, gen))},
                conv_attrs({s, s}, {1, 1}, {p, p, p, p}, 1),
                2.0 * w[0] * w[1] * w[2] * w[3] * out * out * x[0]};
  };
  std::vector<Case> cases = {
      conv("conv 1x64x56x56 3x3->64", {1, 64, 56, 56}, {64, 64, 3, 3}, 1, 1),
      conv("conv 1x256x56x56 1x1->64", {1, 256, 56, 56}, {64, 256, 1, 1}, 1, 0),
      conv("conv 1x512x28x28 1x1->128", {1, 512, 28, 28}, {128, 512, 1, 1}, 1, 0),
      conv("conv 1x3x224x224 7x7/2->64", {1, 3, 224, 224}, {64, 3, 7, 7}, 2, 3),
      {"matmul [128,768]x[768,768]", "MatMul",
       {in(random_tensor({128, 768}, gen)), cst(random_tensor({768, 768}, gen))}, {},
       2.0 * 128 * 768 * 768},
      {"matmul [128,768]x[768,3072]", "MatMul",
       {in(random_tensor({128, 768}, gen)), cst(random_tensor({768, 3072}, gen))}, {},
       2.0 * 128 * 768 * 3072},
      {"matmul [12,128,64]x[12,64,128]", "MatMul",
       {in(random_tensor({12, 128, 64}, gen)), in(random_tensor({12, 64, 128}, gen))}, {},
       2.0 * 12 * 128 * 64 * 128},
  };
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (const Case& c : cases) {
      auto n = make_node(c.op, c.args, c.attrs);
      ASSERT_NE(n, nullptr);
      auto k = create_kernel(n->context());
      ASSERT_TRUE(k.is_ok());
      const double fast = median_seconds(**k, *n, 20);
      const double ref = median_seconds(*make_reference_kernel(*n->node), *n, 20);
      const auto* onednn_kernel = dynamic_cast<const onednn::OneDnnKernel*>(k->get());
      std::printf("%d thr  %-32s %-24s %8.3f ms %6.1f GFLOP/s | reference %8.3f ms %6.1f GFLOP/s\n",
                  threads, c.name.c_str(),
                  onednn_kernel ? onednn_kernel->impl_info().c_str() : "reference", fast * 1e3,
                  c.flops / fast / 1e9, ref * 1e3, c.flops / ref / 1e9);
    }
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace opfuse
