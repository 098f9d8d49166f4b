// Conv, ConvTranspose, MatMul and Gemm against naive loops written straight from the ONNX
// definitions, on random data and shapes chosen to hit every kernel path: strides, asymmetric
// pads, dilations, groups, depthwise, odd sizes, batches, 1-d/3-d, the 1x1 fast path, GEMM
// blocking edges (M > 72, N > 256, K > 256), im2col chunking, and f64.
#include "nn_test_util.h"

namespace opfuse {
namespace {

using namespace nn_test;
using Ints = std::vector<int64_t>;

// Pads spatial vectors to 3 dims (leading unit dims) so the naive loops are written once.
struct Spec3 {
  int64_t in[3], k[3], s[3], d[3], pb[3], pe[3];
};
Spec3 spec3(const Ints& in, const Ints& k, const Ints& s, const Ints& d, const Ints& pads) {
  const size_t n = in.size(), off = 3 - n;
  Spec3 r;
  for (size_t i = 0; i < 3; ++i) {
    const bool real = i >= off;
    const size_t j = i - off;
    r.in[i] = real ? in[j] : 1;
    r.k[i] = real ? k[j] : 1;
    r.s[i] = real ? s[j] : 1;
    r.d[i] = real ? d[j] : 1;
    r.pb[i] = real ? pads[j] : 0;
    r.pe[i] = real ? pads[j + n] : 0;
  }
  return r;
}

// y[n, m, o] = b[m] + sum_{c, k} x[n, g*Cg + c, o*s - pb + k*d] * w[m, c, k]
std::vector<double> naive_conv(const Tensor& x, const Tensor& w, const Tensor* b, int64_t group,
                               const Spec3& p, Ints& out_dims) {
  const int64_t batch = x.dim(0), c_in = x.dim(1), m_out = w.dim(0), cg = c_in / group;
  const int64_t mg = m_out / group;
  int64_t o[3];
  for (int i = 0; i < 3; ++i) o[i] = (p.in[i] + p.pb[i] + p.pe[i] - p.d[i] * (p.k[i] - 1) - 1) / p.s[i] + 1;
  out_dims = {batch, m_out};
  for (int i = 3 - static_cast<int>(x.rank() - 2); i < 3; ++i) out_dims.push_back(o[i]);
  std::vector<double> y(batch * m_out * o[0] * o[1] * o[2]);
  const float* xd = x.data<float>();
  const float* wd = w.data<float>();
  size_t at = 0;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t m = 0; m < m_out; ++m)
      for (int64_t o0 = 0; o0 < o[0]; ++o0)
        for (int64_t o1 = 0; o1 < o[1]; ++o1)
          for (int64_t o2 = 0; o2 < o[2]; ++o2) {
            double acc = b ? b->data<float>()[m] : 0.0;
            const int64_t g = m / mg;
            for (int64_t c = 0; c < cg; ++c)
              for (int64_t k0 = 0; k0 < p.k[0]; ++k0)
                for (int64_t k1 = 0; k1 < p.k[1]; ++k1)
                  for (int64_t k2 = 0; k2 < p.k[2]; ++k2) {
                    const int64_t i0 = o0 * p.s[0] - p.pb[0] + k0 * p.d[0];
                    const int64_t i1 = o1 * p.s[1] - p.pb[1] + k1 * p.d[1];
                    const int64_t i2 = o2 * p.s[2] - p.pb[2] + k2 * p.d[2];
                    if (i0 < 0 || i0 >= p.in[0] || i1 < 0 || i1 >= p.in[1] || i2 < 0 || i2 >= p.in[2]) continue;
                    const double xv = xd[(((n * c_in + g * cg + c) * p.in[0] + i0) * p.in[1] + i1) * p.in[2] + i2];
                    const double wv = wd[(((m * cg + c) * p.k[0] + k0) * p.k[1] + k1) * p.k[2] + k2];
                    acc += xv * wv;
                  }
            y[at++] = acc;
          }
  return y;
}

// y[n, g*Mg + m, i*s - pb + k*d] += x[n, g*Cg + c, i] * w[g*Cg + c, m, k]
std::vector<double> naive_conv_transpose(const Tensor& x, const Tensor& w, const Tensor* b,
                                         int64_t group, const Spec3& p, const Ints& out_pad,
                                         Ints& out_dims) {
  const int64_t batch = x.dim(0), c_in = x.dim(1), mg = w.dim(1), cg = c_in / group;
  const int64_t m_out = mg * group;
  const size_t spatial = static_cast<size_t>(x.rank() - 2);
  int64_t o[3];
  for (int i = 0; i < 3; ++i) {
    const int64_t j = i - (3 - static_cast<int64_t>(spatial));
    const int64_t adj = j >= 0 ? out_pad[j] : 0;
    o[i] = p.s[i] * (p.in[i] - 1) + adj + (p.k[i] - 1) * p.d[i] + 1 - p.pb[i] - p.pe[i];
  }
  out_dims = {batch, m_out};
  for (size_t i = 3 - spatial; i < 3; ++i) out_dims.push_back(o[i]);
  const int64_t osize = o[0] * o[1] * o[2];
  std::vector<double> y(batch * m_out * osize, 0.0);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t m = 0; m < m_out; ++m)
      for (int64_t i = 0; i < osize; ++i) y[(n * m_out + m) * osize + i] = b ? b->data<float>()[m] : 0.0;
  const float* xd = x.data<float>();
  const float* wd = w.data<float>();
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t ci = 0; ci < c_in; ++ci)
      for (int64_t i0 = 0; i0 < p.in[0]; ++i0)
        for (int64_t i1 = 0; i1 < p.in[1]; ++i1)
          for (int64_t i2 = 0; i2 < p.in[2]; ++i2) {
            const double xv = xd[(((n * c_in + ci) * p.in[0] + i0) * p.in[1] + i1) * p.in[2] + i2];
            const int64_t g = ci / cg;
            for (int64_t m = 0; m < mg; ++m)
              for (int64_t k0 = 0; k0 < p.k[0]; ++k0)
                for (int64_t k1 = 0; k1 < p.k[1]; ++k1)
                  for (int64_t k2 = 0; k2 < p.k[2]; ++k2) {
                    const int64_t q0 = i0 * p.s[0] - p.pb[0] + k0 * p.d[0];
                    const int64_t q1 = i1 * p.s[1] - p.pb[1] + k1 * p.d[1];
                    const int64_t q2 = i2 * p.s[2] - p.pb[2] + k2 * p.d[2];
                    if (q0 < 0 || q0 >= o[0] || q1 < 0 || q1 >= o[1] || q2 < 0 || q2 >= o[2]) continue;
                    const double wv = wd[(((ci * mg + m) * p.k[0] + k0) * p.k[1] + k1) * p.k[2] + k2];
                    y[(((n * m_out + g * mg + m) * o[0] + q0) * o[1] + q1) * o[2] + q2] += xv * wv;
                  }
          }
  return y;
}

void expect_close(const Tensor& actual, const Ints& dims, const std::vector<double>& expected,
                  double tol) {
  ASSERT_EQ(actual.dims(), dims);
  int bad = 0;
  for (int64_t i = 0; i < actual.numel() && bad < 5; ++i) {
    if (std::abs(actual.get_double(i) - expected[i]) > tol * (1 + std::abs(expected[i]))) {
      ADD_FAILURE() << "element " << i << ": got " << actual.get_double(i) << ", want " << expected[i];
      ++bad;
    }
  }
}

struct ConvCase {
  const char* name;
  Ints x, w;  // x: [N, C, spatial...], w: [M, C/group, k...]
  int64_t group;
  Ints strides, dilations, pads;
  bool bias;
};

class NnConvRandom : public ::testing::TestWithParam<ConvCase> {};

TEST_P(NnConvRandom, MatchesNaiveLoops) {
  const ConvCase& c = GetParam();
  Tensor x = random_tensor(c.x, 1);
  Tensor w = random_tensor(c.w, 2);
  Tensor b = c.bias ? random_tensor({c.w[0]}, 3) : Tensor();
  const Ints in(c.x.begin() + 2, c.x.end()), k(c.w.begin() + 2, c.w.end());
  Ints out_dims;
  const auto want = naive_conv(x, w, c.bias ? &b : nullptr, c.group,
                               spec3(in, k, c.strides, c.dilations, c.pads), out_dims);
  Attributes attrs = {{"group", c.group}, {"strides", c.strides}, {"dilations", c.dilations},
                      {"pads", c.pads}};
  OpRun r = run_op("Conv", {x, w, b}, attrs);
  ASSERT_TRUE(r.status.is_ok()) << r.status.message();
  EXPECT_EQ(shape_to_string(r.inferred[0]), dims_to_string(out_dims));
  expect_close(r.outputs[0], out_dims, want, 1e-4);
  // The same in double precision, to a much tighter tolerance.
  OpRun r64 = run_op("Conv", {x.cast(DType::kF64).value(), w.cast(DType::kF64).value(),
                              c.bias ? b.cast(DType::kF64).value() : Tensor()},
                     attrs);
  ASSERT_TRUE(r64.status.is_ok()) << r64.status.message();
  EXPECT_EQ(r64.outputs[0].dtype(), DType::kF64);
  expect_close(r64.outputs[0], out_dims, want, 1e-10);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, NnConvRandom,
    ::testing::Values(
        ConvCase{"conv1d_stride_dilation_asym_pads", {2, 3, 11}, {4, 3, 3}, 1, {2}, {2}, {1, 2}, true},
        ConvCase{"conv2d_groups_mixed", {2, 4, 9, 7}, {6, 2, 3, 2}, 2, {2, 1}, {1, 2}, {1, 0, 2, 1}, true},
        ConvCase{"conv2d_depthwise_multiplier", {3, 5, 8, 8}, {10, 1, 3, 3}, 5, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
        ConvCase{"conv2d_depthwise_strided", {1, 6, 7, 9}, {6, 1, 3, 3}, 6, {2, 2}, {1, 1}, {0, 1, 1, 0}, false},
        ConvCase{"conv2d_pointwise_blocked_gemm", {1, 300, 10, 30}, {80, 300, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, false},
        ConvCase{"conv2d_pointwise_strided", {2, 5, 7, 7}, {3, 5, 1, 1}, 1, {2, 2}, {1, 1}, {0, 0, 0, 0}, true},
        ConvCase{"conv2d_big_kernel_stride3_pads", {1, 1, 5, 5}, {2, 1, 4, 4}, 1, {3, 3}, {1, 1}, {2, 2, 2, 2}, true},
        ConvCase{"conv2d_im2col_chunks", {1, 64, 130, 130}, {8, 64, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
        ConvCase{"conv2d_batch_outer_parallel", {5, 3, 12, 11}, {7, 3, 3, 3}, 1, {1, 2}, {1, 1}, {1, 1, 0, 0}, false},
        ConvCase{"conv3d_mixed", {1, 2, 5, 6, 7}, {3, 2, 2, 3, 2}, 1, {1, 2, 1}, {2, 1, 1}, {1, 0, 1, 0, 1, 1}, true},
        ConvCase{"conv3d_groups", {2, 4, 4, 4, 4}, {4, 2, 3, 3, 3}, 2, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, true}),
    [](const auto& info) { return std::string(info.param.name); });

struct ConvTransposeCase {
  const char* name;
  Ints x, w;  // x: [N, C, spatial...], w: [C, M/group, k...]
  int64_t group;
  Ints strides, dilations, pads, output_padding;
  bool bias;
};

class NnConvTransposeRandom : public ::testing::TestWithParam<ConvTransposeCase> {};

TEST_P(NnConvTransposeRandom, MatchesNaiveLoops) {
  const ConvTransposeCase& c = GetParam();
  Tensor x = random_tensor(c.x, 4);
  Tensor w = random_tensor(c.w, 5);
  Tensor b = c.bias ? random_tensor({c.w[1] * c.group}, 6) : Tensor();
  const Ints in(c.x.begin() + 2, c.x.end()), k(c.w.begin() + 2, c.w.end());
  Ints out_dims;
  const auto want = naive_conv_transpose(x, w, c.bias ? &b : nullptr, c.group,
                                         spec3(in, k, c.strides, c.dilations, c.pads),
                                         c.output_padding, out_dims);
  OpRun r = run_op("ConvTranspose", {x, w, b},
                   {{"group", c.group}, {"strides", c.strides}, {"dilations", c.dilations},
                    {"pads", c.pads}, {"output_padding", c.output_padding}});
  ASSERT_TRUE(r.status.is_ok()) << r.status.message();
  EXPECT_EQ(shape_to_string(r.inferred[0]), dims_to_string(out_dims));
  expect_close(r.outputs[0], out_dims, want, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, NnConvTransposeRandom,
    ::testing::Values(
        ConvTransposeCase{"convt1d", {1, 3, 5}, {3, 2, 4}, 1, {2}, {1}, {1, 1}, {0}, true},
        ConvTransposeCase{"convt2d_groups_everything", {2, 4, 3, 4}, {4, 3, 3, 2}, 2, {2, 3}, {1, 2}, {1, 0, 0, 1}, {1, 2}, true},
        ConvTransposeCase{"convt2d_depthwise", {1, 6, 5, 5}, {6, 1, 3, 3}, 6, {2, 2}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false},
        ConvTransposeCase{"convt2d_big_channels", {1, 300, 6, 6}, {300, 20, 2, 2}, 1, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}, true},
        ConvTransposeCase{"convt3d", {1, 2, 3, 4, 3}, {2, 3, 2, 3, 2}, 1, {2, 1, 2}, {1, 2, 1}, {0, 1, 1, 1, 0, 0}, {1, 0, 0}, true}),
    [](const auto& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------- MatMul / Gemm

std::vector<double> naive_matmul(const Tensor& a, int64_t a_off, const Tensor& b, int64_t b_off,
                                 int64_t m, int64_t k, int64_t n) {
  std::vector<double> y(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p)
        y[i * n + j] += static_cast<double>(a.data<float>()[a_off + i * k + p]) *
                        b.data<float>()[b_off + p * n + j];
  return y;
}

TEST(NnMatMulRandom, BroadcastBatchesAcrossGemmBlockEdges) {
  // a [2,1,75,300] x b [3,300,263] -> [2,3,75,263]: M, N, K all cross the GEMM block sizes,
  // and the 6 products run one per thread.
  const int64_t m = 75, k = 300, n = 263;
  Tensor a = random_tensor({2, 1, m, k}, 7);
  Tensor b = random_tensor({3, k, n}, 8);
  OpRun r = run_op("MatMul", {a, b});
  ASSERT_TRUE(r.status.is_ok()) << r.status.message();
  ASSERT_EQ(r.outputs[0].dims(), (Ints{2, 3, m, n}));
  std::vector<double> want;
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      auto part = naive_matmul(a, i * m * k, b, j * k * n, m, k, n);
      want.insert(want.end(), part.begin(), part.end());
    }
  }
  expect_close(r.outputs[0], {2, 3, m, n}, want, 1e-4);
}

TEST(NnMatMulRandom, SharedWeightFoldsBatchIntoRows) {
  // [3,40,33] x [33,260]: one B for all batches (the BERT linear-layer shape).
  Tensor a = random_tensor({3, 40, 33}, 9);
  Tensor b = random_tensor({33, 260}, 10);
  OpRun r = run_op("MatMul", {a, b});
  ASSERT_TRUE(r.status.is_ok()) << r.status.message();
  expect_close(r.outputs[0], {3, 40, 260}, naive_matmul(a, 0, b, 0, 120, 33, 260), 1e-4);
}

TEST(NnGemmRandom, TransposedOperandsAlphaBetaAndRowBias) {
  const int64_t m = 75, n = 270, k = 260;
  Tensor at = random_tensor({k, m}, 11);  // transA: stored [K, M]
  Tensor bt = random_tensor({n, k}, 12);  // transB: stored [N, K]
  Tensor c = random_tensor({n}, 13);
  OpRun r = run_op("Gemm", {at, bt, c},
                   {{"transA", int64_t{1}}, {"transB", int64_t{1}}, {"alpha", 0.5f}, {"beta", -2.0f}});
  ASSERT_TRUE(r.status.is_ok()) << r.status.message();
  std::vector<double> want(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        acc += static_cast<double>(at.data<float>()[p * m + i]) * bt.data<float>()[j * k + p];
      }
      want[i * n + j] = 0.5 * acc - 2.0 * c.data<float>()[j];
    }
  }
  expect_close(r.outputs[0], {m, n}, want, 1e-4);
}

}  // namespace
}  // namespace opfuse
