// Reduce*, ArgMax/ArgMin, Softmax, LogSoftmax, LayerNormalization. Expected values are
// hand-computed or numpy/torch 1.13 output pasted as literals; the ONNX conformance data is run
// where installed; large inputs (the OpenMP path) are checked against plain loops written here.
#include <cmath>
#include <limits>

#include "reduction_onnx_case.h"
#include "reduction_test_util.h"
#include "ops/registry.h"

namespace opfuse {
namespace {

using testing_ops::contains;
using testing_ops::expect_values;
using testing_ops::i64s;
using testing_ops::infer_and_run;
using testing_ops::make_node;

Tensor sample_2x3x2() {
  return Tensor::from_vector<float>(
      {2, 3, 2}, {-2.0f, -1.5f, -1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f, 3.25f, 2.5f, 3.0f, 3.5f});
}

TEST(ReductionTest, ReduceSumAxesInputKeepdims) {
  Tensor x = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto n = make_node("ReduceSum", x, {i64s({1})});
  auto out = infer_and_run(*n);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{2, 1}));
  expect_values(out[0], {6, 15});
}

TEST(ReductionTest, ReduceSumNegativeAxisNoKeepdims) {
  Tensor x = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto n = make_node("ReduceSum", x, {i64s({-2})}, {{"keepdims", int64_t{0}}});
  auto out = infer_and_run(*n);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{3}));
  expect_values(out[0], {5, 7, 9});
}

TEST(ReductionTest, ReduceSumEmptyAxesReducesAllOrIsNoop) {
  Tensor x = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto all = make_node("ReduceSum", x);  // axes omitted
  auto out = infer_and_run(*all);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{1, 1}));
  expect_values(out[0], {21});

  auto empty = make_node("ReduceSum", x, {i64s({})}, {{"keepdims", int64_t{0}}});
  out = infer_and_run(*empty);
  EXPECT_EQ(out[0].rank(), 0);
  expect_values(out[0], {21});

  auto noop = make_node("ReduceSum", x, {i64s({})}, {{"noop_with_empty_axes", int64_t{1}}});
  out = infer_and_run(*noop);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{2, 3}));
  expect_values(out[0], {1, 2, 3, 4, 5, 6});
}

// numpy over axes (0, 2) of sample_2x3x2.
TEST(ReductionTest, AllReduceOpsMatchNumpy) {
  struct Case {
    const char* op;
    std::vector<double> want;
  };
  const Case cases[] = {
      {"ReduceMean", {-0.25, 1.0625, 1.75}},
      {"ReduceMax", {1.5, 3.25, 3.5}},
      {"ReduceMin", {-2.0, -1.0, 0.0}},
      {"ReduceProd", {4.5, 4.0625, 0.0}},
      {"ReduceL1", {6.0, 7.25, 7.0}},
      {"ReduceL2", {3.082207001484488, 4.25, 4.636809247747852}},
      {"ReduceSumSquare", {9.5, 18.0625, 21.5}},
      {"ReduceLogSum", {std::nan(""), std::log(4.25), std::log(7.0)}},
      {"ReduceLogSumExp", {2.0226643357538485, 3.6622080118872535, 4.0226643357538485}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    auto n = make_node(c.op, sample_2x3x2(), {}, {{"axes", std::vector<int64_t>{0, -1}}});
    auto out = infer_and_run(*n);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{1, 3, 1}));
    expect_values(out[0], c.want);
  }
}

TEST(ReductionTest, RecordsCarryReduceSpecAndKind) {
  const OpRegistry& r = OpRegistry::global();
  const OpDef* mean = r.find("", "ReduceMean");
  ASSERT_NE(mean, nullptr);
  EXPECT_EQ(mean->kind, FusionKind::kReduction);
  EXPECT_EQ(mean->reduce.combiner, ReduceCombiner::kSum);
  EXPECT_TRUE(mean->reduce.divide_by_count);
  const OpDef* mx = r.find("", "ReduceMax");
  EXPECT_EQ(mx->reduce.combiner, ReduceCombiner::kMax);
  EXPECT_EQ(mx->reduce.identity, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(r.find("", "ReduceProd")->reduce.identity, 1.0);
  EXPECT_EQ(r.find("", "ReduceL2")->reduce.combiner, ReduceCombiner::kNone);
  for (const char* op : {"Softmax", "LogSoftmax", "LayerNormalization", "ArgMax"}) {
    EXPECT_EQ(r.find("", op)->kind, FusionKind::kReduction) << op;
  }
  EXPECT_EQ(std::get<int64_t>(*r.find("", "Softmax")->find_attr("axis")->default_value), -1);
  EXPECT_EQ(std::get<float>(*r.find("", "LayerNormalization")->find_attr("epsilon")->default_value),
            1e-5f);
}

TEST(ReductionTest, MaxPropagatesNanAndIntegersStayExact) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = Tensor::from_vector<float>({2, 2}, {1.0f, static_cast<float>(nan), 3.0f, 2.0f});
  auto n = make_node("ReduceMax", x, {}, {{"axes", std::vector<int64_t>{1}}});
  auto out = infer_and_run(*n);
  EXPECT_TRUE(std::isnan(out[0].get_double(0)));
  EXPECT_EQ(out[0].get_double(1), 3.0);

  // 2^53 + 1 is not representable in double: an int64 sum must not go through it.
  const int64_t big = (int64_t{1} << 53) + 1;
  Tensor xi = Tensor::from_vector<int64_t>({3}, {big, 2, -1});
  auto s = make_node("ReduceSum", xi, {}, {{"keepdims", int64_t{0}}});
  out = infer_and_run(*s);
  EXPECT_EQ(out[0].dtype(), DType::kI64);
  EXPECT_EQ(out[0].data<int64_t>()[0], big + 1);
}

TEST(ReductionTest, OutOfRangeAxisIsUserErrorNamingNodeAxisRank) {
  auto n = make_node("ReduceMean", sample_2x3x2(), {}, {{"axes", std::vector<int64_t>{3}}});
  Status s = infer_shapes(n->g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.kind(), ErrorKind::kUser);
  EXPECT_TRUE(contains(s.message(), "node_under_test")) << s.message();
  EXPECT_TRUE(contains(s.message(), "axis 3")) << s.message();
  EXPECT_TRUE(contains(s.message(), "rank 3")) << s.message();
  // The kernel checks too (eager mode may run without inference).
  auto r = testing_ops::run(*n);
  ASSERT_FALSE(r.is_ok());
  EXPECT_TRUE(contains(r.status().message(), "axis 3"));

  auto neg = make_node("ReduceSum", sample_2x3x2(), {i64s({-4})});
  s = infer_shapes(neg->g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "axis -4")) << s.message();

  auto dup = make_node("ReduceMax", sample_2x3x2(), {}, {{"axes", std::vector<int64_t>{1, -2}}});
  s = infer_shapes(dup->g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "repeated")) << s.message();

  auto sm = make_node("Softmax", sample_2x3x2(), {}, {{"axis", int64_t{-4}}});
  s = infer_shapes(sm->g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "axis -4") && contains(s.message(), "rank 3")) << s.message();

  auto am = make_node("ArgMax", sample_2x3x2(), {}, {{"axis", int64_t{5}}});
  EXPECT_FALSE(infer_shapes(am->g).is_ok());
}

TEST(ReductionTest, SymbolicAndUnknownDimsFlow) {
  const Shape in = {Dim::symbol("batch"), Dim::symbol("seq"), Dim(768)};
  Tensor dummy = Tensor::from_vector<float>({1, 1, 768}, {});
  auto keep = make_node("ReduceMean", dummy, {}, {{"axes", std::vector<int64_t>{-1}}}, 1, in);
  ASSERT_TRUE(infer_shapes(keep->g).is_ok());
  EXPECT_EQ(*keep->node->output(0)->shape, (Shape{Dim::symbol("batch"), Dim::symbol("seq"), Dim(1)}));

  auto drop = make_node("ReduceMax", dummy, {},
                        {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{0}}}, 1,
                        Shape{Dim::symbol("batch"), Dim::unknown(), Dim(768)});
  ASSERT_TRUE(infer_shapes(drop->g).is_ok());
  EXPECT_EQ(*drop->node->output(0)->shape, (Shape{Dim::unknown(), Dim(768)}));

  auto arg = make_node("ArgMin", dummy, {}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}}, 1, in);
  ASSERT_TRUE(infer_shapes(arg->g).is_ok());
  EXPECT_EQ(arg->node->output(0)->dtype, DType::kI64);
  EXPECT_EQ(*arg->node->output(0)->shape, (Shape{Dim::symbol("batch"), Dim(768)}));

  auto sm = make_node("Softmax", dummy, {}, {}, 1, in);
  ASSERT_TRUE(infer_shapes(sm->g).is_ok());
  EXPECT_EQ(*sm->node->output(0)->shape, in);

  Tensor scale = Tensor::from_vector<float>({768}, {});
  auto ln = make_node("LayerNormalization", dummy, {scale}, {}, 3, in);
  ASSERT_TRUE(infer_shapes(ln->g).is_ok());
  EXPECT_EQ(*ln->node->output(0)->shape, in);
  EXPECT_EQ(*ln->node->output(1)->shape, (Shape{Dim::symbol("batch"), Dim::symbol("seq"), Dim(1)}));
  EXPECT_EQ(ln->node->output(2)->dtype, DType::kF32);
}

TEST(ReductionTest, ReduceSumWithRuntimeAxesInfersWhatItCan) {
  Graph g;
  Value* x = g.add_input("x", DType::kF32, {Dim::symbol("n"), Dim(4), Dim(5)});
  Value* axes = g.add_input("axes", DType::kI64, make_shape({2}));
  auto keep = g.add_node("ReduceSum", {x, axes}, {"k"});
  auto drop = g.add_node("ReduceSum", {x, axes}, {"d"}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(keep.is_ok() && drop.is_ok());
  ASSERT_TRUE(infer_shapes(g).is_ok());
  EXPECT_EQ(*(*keep)->output(0)->shape, Shape(3, Dim::unknown()));
  EXPECT_EQ(*(*drop)->output(0)->shape, Shape(1, Dim::unknown()));

  // Run it with axes [0, 2] supplied at run time.
  Tensor xt = Tensor::from_vector<float>({2, 4, 5}, std::vector<float>(40, 0.5f));
  Tensor at = i64s({0, 2});
  auto r = run_reference(**drop, {&xt, &at});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ((*r)[0].dims(), (std::vector<int64_t>{4}));
  expect_values((*r)[0], {5, 5, 5, 5});
}

TEST(ReductionTest, RejectsBoolInput) {
  Tensor x = Tensor::from_vector<bool>({2}, {true, false});
  auto n = make_node("ReduceSum", x);
  Status s = infer_shapes(n->g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "bool"));
}

TEST(ReductionTest, ArgMaxArgMinTiesNegativeAxisAndSelectLast) {
  Tensor x = Tensor::from_vector<float>({2, 4}, {1, 5, 5, 0, -2, -2, 7, -2});
  auto first = make_node("ArgMax", x, {}, {{"axis", int64_t{-1}}});
  auto out = infer_and_run(*first);
  EXPECT_EQ(out[0].dtype(), DType::kI64);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(out[0].to_int_vector(), (std::vector<int64_t>{1, 2}));

  auto last = make_node("ArgMax", x, {},
                        {{"axis", int64_t{1}}, {"select_last_index", int64_t{1}}, {"keepdims", int64_t{0}}});
  out = infer_and_run(*last);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{2}));
  EXPECT_EQ(out[0].to_int_vector(), (std::vector<int64_t>{2, 2}));

  auto amin = make_node("ArgMin", x, {}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}});
  EXPECT_EQ(infer_and_run(*amin)[0].to_int_vector(), (std::vector<int64_t>{3, 0}));
  auto amin_last = make_node("ArgMin", x, {},
                             {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}, {"select_last_index", int64_t{1}}});
  EXPECT_EQ(infer_and_run(*amin_last)[0].to_int_vector(), (std::vector<int64_t>{3, 3}));

  auto axis0 = make_node("ArgMin", x, {}, {{"axis", int64_t{0}}});
  EXPECT_EQ(infer_and_run(*axis0)[0].to_int_vector(), (std::vector<int64_t>{1, 1, 0, 1}));

  // int64 values that collide when rounded to double.
  const int64_t big = int64_t{1} << 53;
  Tensor xi = Tensor::from_vector<int64_t>({3}, {big, big + 1, big});
  auto ai = make_node("ArgMax", xi, {}, {{"keepdims", int64_t{0}}});
  EXPECT_EQ(infer_and_run(*ai)[0].to_int_vector(), (std::vector<int64_t>{1}));
}

// torch.softmax / torch.log_softmax of [[1,2,3,4],[-1,.5,.5,10]].
TEST(ReductionTest, SoftmaxAndLogSoftmaxMatchTorch) {
  Tensor x = Tensor::from_vector<float>({2, 4}, {1, 2, 3, 4, -1, 0.5f, 0.5f, 10});
  auto sm = make_node("Softmax", x);
  expect_values(infer_and_run(*sm)[0],
                {0.032058604061603546, 0.08714432269334793, 0.23688283562660217, 0.6439142823219299,
                 1.669892117206473e-05, 7.483937224606052e-05, 7.483937224606052e-05,
                 0.9998335838317871},
                1e-6);
  auto sm0 = make_node("Softmax", x, {}, {{"axis", int64_t{0}}});
  expect_values(infer_and_run(*sm0)[0],
                {0.8807970285415649, 0.8175744414329529, 0.9241418242454529, 0.0024726232513785362,
                 0.11920291930437088, 0.18242551386356354, 0.07585817575454712, 0.9975274205207825},
                1e-6);
  auto lsm = make_node("LogSoftmax", x);
  expect_values(infer_and_run(*lsm)[0],
                {-3.4401895999908447, -2.4401895999908447, -1.4401897192001343, -0.4401896893978119,
                 -11.000165939331055, -9.500165939331055, -9.500165939331055,
                 -0.00016640232934150845},
                1e-6);
}

TEST(ReductionTest, SoftmaxIsStableForLargeInputs) {
  Tensor x = Tensor::from_vector<float>({1, 4}, {1000, 1001, 1002, 1003});
  auto sm = make_node("Softmax", x);
  expect_values(infer_and_run(*sm)[0],
                {0.032058604061603546, 0.08714432269334793, 0.23688283562660217, 0.6439142823219299},
                1e-6);
  auto lsm = make_node("LogSoftmax", x);
  expect_values(infer_and_run(*lsm)[0],
                {-3.4401895999908447, -2.4401895999908447, -1.4401897192001343, -0.4401896893978119},
                1e-5);
}

// torch.nn.functional.layer_norm.
TEST(ReductionTest, LayerNormalizationMatchesTorch) {
  Tensor x = Tensor::from_vector<float>({2, 2, 3},
                                        {0.5f, -1, 2, 3, 3.5f, -0.25f, 1, 1, 1, 10, -10, 0});
  Tensor w = Tensor::from_vector<float>({3}, {1.5f, -0.5f, 2});
  Tensor b = Tensor::from_vector<float>({3}, {0.1f, 0.2f, -0.3f});
  auto n = make_node("LayerNormalization", x, {w, b}, {}, 3);
  auto out = infer_and_run(*n);
  ASSERT_EQ(out.size(), 3u);
  expect_values(out[0],
                {0.10000000149011612, 0.8123703598976135, 2.1494815349578857, 0.9270685315132141,
                 -0.22606562077999115, -3.1070210933685303, 0.10000000149011612,
                 0.20000000298023224, -0.30000001192092896, 1.9371172189712524, 0.8123723864555359,
                 -0.30000001192092896});
  EXPECT_EQ(out[1].dims(), (std::vector<int64_t>{2, 2, 1}));
  expect_values(out[1], {0.5, 2.0833332538604736, 1.0, 0.0});
  expect_values(out[2], {0.8164938688278198, 0.6015045642852783, 316.227783203125, 0.12247447669506073});

  // Normalising the last two dims, no bias, only Y requested.
  Tensor w2 = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 0.5f, 0.5f, 0.5f});
  auto n2 = make_node("LayerNormalization", x, {w2}, {{"axis", int64_t{1}}});
  expect_values(infer_and_run(*n2)[0],
                {-0.4766404628753662, -2.7594971656799316, 1.2794032096862793, 0.5142699480056763,
                 0.6647879481315613, -0.464097261428833, 0.08627959340810776, 0.17255918681621552,
                 0.2588387727737427, 0.8196560144424438, -0.9059355854988098,
                 -0.043139781802892685});
}

TEST(ReductionTest, LayerNormalizationRejectsBadScaleAndStashType) {
  Tensor x = Tensor::from_vector<float>({2, 3}, {});
  auto bad = make_node("LayerNormalization", x, {Tensor::from_vector<float>({4}, {})});
  Status s = infer_shapes(bad->g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "Scale")) << s.message();
  auto stash = make_node("LayerNormalization", x, {Tensor::from_vector<float>({3}, {})},
                         {{"stash_type", int64_t{7}}});
  s = infer_shapes(stash->g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "stash_type 7")) << s.message();
}

// Deterministic pseudo-random data without a library RNG.
std::vector<float> wave(int64_t n, double freq) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(3.0 * std::sin(freq * i) + 0.001 * (i % 97));
  return v;
}

// BERT attention shape (12 heads x 128 x 128) takes the OpenMP path; compare with a plain loop.
TEST(ReductionTest, LargeSoftmaxMatchesPlainLoop) {
  const int64_t rows = 12 * 128, n = 128;
  Tensor x = Tensor::from_vector<float>({12, 128, 128}, wave(rows * n, 0.37));
  auto node = make_node("Softmax", x);
  auto out = infer_and_run(*node);
  const float* xv = x.data<float>();
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double m = -1e300, sum = 0;
    for (int64_t j = 0; j < n; ++j) m = std::max(m, double(xv[r * n + j]));
    for (int64_t j = 0; j < n; ++j) sum += std::exp(double(xv[r * n + j]) - m);
    for (int64_t j = 0; j < n; ++j) {
      const double want = std::exp(double(xv[r * n + j]) - m) / sum;
      worst = std::max(worst, std::fabs(out[0].data<float>()[r * n + j] - want) / want);
    }
  }
  EXPECT_LT(worst, 1e-5);
}

TEST(ReductionTest, LargeLayerNormMatchesPlainLoop) {
  const int64_t rows = 128, d = 768;
  Tensor x = Tensor::from_vector<float>({1, rows, d}, wave(rows * d, 0.011));
  Tensor w = Tensor::from_vector<float>({d}, wave(d, 1.3));
  Tensor b = Tensor::from_vector<float>({d}, wave(d, 0.7));
  auto node = make_node("LayerNormalization", x, {w, b});
  auto out = infer_and_run(*node);
  const float* xv = x.data<float>();
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < d; ++j) mean += xv[r * d + j];
    mean /= d;
    for (int64_t j = 0; j < d; ++j) var += (xv[r * d + j] - mean) * (xv[r * d + j] - mean);
    var /= d;
    for (int64_t j = 0; j < d; ++j) {
      const double want =
          (xv[r * d + j] - mean) / std::sqrt(var + 1e-5f) * w.data<float>()[j] + b.data<float>()[j];
      worst = std::max(worst, std::fabs(out[0].data<float>()[r * d + j] - want));
    }
  }
  EXPECT_LT(worst, 1e-4);
}

TEST(ReductionTest, LargeReduceOverOuterAndMixedAxesMatchesPlainLoop) {
  const int64_t a = 64, b = 33, c = 40;  // 84k elements: parallel path
  Tensor x = Tensor::from_vector<float>({a, b, c}, wave(a * b * c, 0.05));
  auto node = make_node("ReduceSum", x, {i64s({0, 2})}, {{"keepdims", int64_t{0}}});
  auto out = infer_and_run(*node);
  ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{b}));
  for (int64_t j = 0; j < b; ++j) {
    double want = 0;
    for (int64_t i = 0; i < a; ++i)
      for (int64_t k = 0; k < c; ++k) want += x.data<float>()[(i * b + j) * c + k];
    EXPECT_NEAR(out[0].get_double(j), want, 1e-3) << j;
  }
  auto mx = make_node("ReduceMax", x, {}, {{"axes", std::vector<int64_t>{1}}});
  out = infer_and_run(*mx);
  for (int64_t i = 0; i < a; ++i) {
    for (int64_t k = 0; k < c; ++k) {
      float want = -1e30f;
      for (int64_t j = 0; j < b; ++j) want = std::max(want, x.data<float>()[(i * b + j) * c + k]);
      ASSERT_EQ(out[0].data<float>()[i * c + k], want);
    }
  }
}

TEST(ReductionTest, FlopsFromStaticShapes) {
  auto n = make_node("Softmax", Tensor::from_vector<float>({2, 8}, {}));
  EXPECT_EQ(n->node->def().flops(*n->node), 5 * 16);
  auto r = make_node("ReduceSum", Tensor::from_vector<float>({2, 8}, {}));
  EXPECT_EQ(r->node->def().flops(*r->node), 16);
}

TEST(ReductionTest, OnnxConformance) {
  int ran = 0;
  for (const char* prefix :
       {"test_reduce_sum", "test_reduce_mean", "test_reduce_max", "test_reduce_min",
        "test_reduce_prod", "test_reduce_l1", "test_reduce_l2", "test_reduce_log_sum",
        "test_argmax", "test_argmin", "test_softmax", "test_logsoftmax",
        "test_layer_normalization"}) {
    for (const std::string& name : testing_onnx::onnx_cases(prefix)) {
      ran += testing_onnx::run_onnx_node_case(name) ? 1 : 0;
    }
  }
  if (ran == 0) GTEST_SKIP() << "ONNX conformance data not installed";
  EXPECT_GE(ran, 100);
}

}  // namespace
}  // namespace opfuse
