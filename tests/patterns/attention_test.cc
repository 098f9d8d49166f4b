// The attention fusion numerically: a BERT-style attention graph (head split by Reshape +
// Transpose, scale, optional mask, Softmax, head merge) run unfused (eager, ONNX reference
// kernels), after fuse_patterns run eagerly (FusedAttention's reference kernel) and in graph
// mode at O2 (the streaming cpu.attention kernel), max relative difference <= 1e-4, on shapes
// chosen to hit the kernel's edges: Sq != Sk, lengths that are not multiples of the query block
// (64), more keys than one key block (512: the online-softmax rescaling), S = 1, every mask
// shape the op accepts, -1e4 masks and rows masked entirely with -inf (NaN where the unfused
// graph gives NaN, equal elsewhere). Plus FusedAttention's reference on values computed with
// NumPy.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/random.h"
#include "ir/text_format.h"
#include "ops/infer_shapes.h"
#include "passes/pass.h"
#include "runtime/compare.h"
#include "runtime/compiled_plan.h"
#include "ops/eager.h"
#include "pipelines/pipeline.h"
#include "runtime/session.h"
#include "testing/pattern_fusion.h"
#include "graph_test_util.h"

namespace opfuse {
namespace {

using testing_graphs::count_op;

struct Case {
  int64_t batch = 1, q_len = 4, kv_len = 4, heads = 2, head_dim = 4, v_head_dim = 4;
  std::vector<int64_t> mask;  // empty: no mask
  enum class Scale { kDivScores, kMulScoresLeft, kMulQ } scale = Scale::kDivScores;
};

std::string dims_text(const std::vector<int64_t>& d) {
  std::string out = "[";
  for (size_t i = 0; i < d.size(); ++i) out += str_cat(i == 0 ? "" : ",", d[i]);
  return out + "]";
}

// The graph a PyTorch BERT export has after O1, for one attention.
std::string attention_text(const Case& c) {
  const int64_t b = c.batch, sq = c.q_len, sk = c.kv_len, h = c.heads, d = c.head_dim, dv = c.v_head_dim;
  std::string t = str_cat("graph @main opset 13 (%q: f32", dims_text({b, sq, h * d}), ", %k: f32",
                          dims_text({b, sk, h * d}), ", %v: f32", dims_text({b, sk, h * dv}));
  if (!c.mask.empty()) t += ", %mask: f32" + dims_text(c.mask);
  t += ") {\n";
  t += str_cat("  %qs: i64[4] = const ", dims_text({b, sq, h, d}), "\n");
  t += str_cat("  %ks: i64[4] = const ", dims_text({b, sk, h, d}), "\n");
  t += str_cat("  %vs: i64[4] = const ", dims_text({b, sk, h, dv}), "\n");
  t += str_cat("  %ys: i64[3] = const ", dims_text({b, sq, h * dv}), "\n");
  t += str_cat("  %c: f32[] = const [", c.scale == Case::Scale::kDivScores ? std::sqrt(double(d)) : 1 / std::sqrt(double(d)), "]\n");
  t += str_cat("  %q4: f32", dims_text({b, sq, h, d}), " = Reshape(%q, %qs)\n");
  t += str_cat("  %qh: f32", dims_text({b, h, sq, d}), " = Transpose(%q4) {perm = [0, 2, 1, 3]}\n");
  std::string qh = "%qh";
  if (c.scale == Case::Scale::kMulQ) {
    t += str_cat("  %qc: f32", dims_text({b, h, sq, d}), " = Mul(%qh, %c)\n");
    qh = "%qc";
  }
  t += str_cat("  %k4: f32", dims_text({b, sk, h, d}), " = Reshape(%k, %ks)\n");
  t += str_cat("  %kt: f32", dims_text({b, h, d, sk}), " = Transpose(%k4) {perm = [0, 2, 3, 1]}\n");
  t += str_cat("  %v4: f32", dims_text({b, sk, h, dv}), " = Reshape(%v, %vs)\n");
  t += str_cat("  %vh: f32", dims_text({b, h, sk, dv}), " = Transpose(%v4) {perm = [0, 2, 1, 3]}\n");
  const std::string sd = dims_text({b, h, sq, sk});
  t += str_cat("  %s: f32", sd, " = MatMul(", qh, ", %kt)\n");
  std::string s = "%s";
  if (c.scale == Case::Scale::kDivScores) t += str_cat("  %s1: f32", sd, " = Div(%s, %c)\n"), s = "%s1";
  if (c.scale == Case::Scale::kMulScoresLeft) t += str_cat("  %s1: f32", sd, " = Mul(%c, %s)\n"), s = "%s1";
  if (!c.mask.empty()) t += str_cat("  %s2: f32", sd, " = Add(", s, ", %mask)\n"), s = "%s2";
  t += str_cat("  %p: f32", sd, " = Softmax(", s, ") {axis = -1}\n");
  t += str_cat("  %o: f32", dims_text({b, h, sq, dv}), " = MatMul(%p, %vh)\n");
  t += str_cat("  %ot: f32", dims_text({b, sq, h, dv}), " = Transpose(%o) {perm = [0, 2, 1, 3]}\n");
  t += str_cat("  %y: f32", dims_text({b, sq, h * dv}), " = Reshape(%ot, %ys)\n");
  return t + "  return %y\n}\n";
}

Tensor random_tensor(const std::vector<int64_t>& dims, uint64_t seed, float lo = -1, float hi = 1) {
  Tensor t = Tensor::zeros(DType::kF32, dims).value();
  Random rng(seed);
  fill_uniform(t, rng, lo, hi);
  return t;
}

// What each mask element becomes: kRandom keeps U(-1, 1); kPadding -1e4 on a quarter of the
// keys; kInfRows -inf on some keys and on every key of some (b, i) rows; kInfFirstBlock -inf on
// the first 512 keys (the kernel's first key block) of every other row.
enum class MaskFill { kRandom, kPadding, kInfRows, kInfFirstBlock };

TensorMap inputs_for(const Case& c, MaskFill fill) {
  TensorMap in;
  in["q"] = random_tensor({c.batch, c.q_len, c.heads * c.head_dim}, 11, -2, 2);
  in["k"] = random_tensor({c.batch, c.kv_len, c.heads * c.head_dim}, 12, -2, 2);
  in["v"] = random_tensor({c.batch, c.kv_len, c.heads * c.v_head_dim}, 13);
  if (!c.mask.empty()) {
    Tensor m = random_tensor(c.mask, 14);
    float* p = m.data<float>();
    const int64_t last = c.mask.back();
    for (int64_t i = 0; i < m.numel(); ++i) {
      const int64_t j = i % last, row = i / last;
      if (fill == MaskFill::kPadding && j % 4 == 3) p[i] = -1e4f;
      if (fill == MaskFill::kInfRows && (j % 3 == 1 || row % 3 == 2)) p[i] = -std::numeric_limits<float>::infinity();
      if (fill == MaskFill::kInfFirstBlock && j < 512 && row % 2 == 0) p[i] = -std::numeric_limits<float>::infinity();
    }
    in["mask"] = m;
  }
  return in;
}

// Unfused eager vs fused eager vs graph mode O2.
void check_graph(const std::string& text, const TensorMap& inputs) {
  auto parsed = parse_graph(text);
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().message() << "\n" << text;
  Graph original = std::move(parsed).value();
  ASSERT_TRUE(infer_shapes(original).is_ok());
  auto want = run_eager(original, inputs);
  ASSERT_TRUE(want.is_ok()) << want.status().message();

  Graph fused = original.clone();
  ASSERT_TRUE(testing_patterns::fuse_patterns_only(fused).is_ok());
  EXPECT_EQ(count_op(fused, "FusedAttention"), 1);
  EXPECT_EQ(count_op(fused, "Transpose") + count_op(fused, "Reshape") + count_op(fused, "Softmax"), 0);
  auto got = run_eager(fused, inputs);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_LE(max_relative_difference(*got, *want), 1e-4) << "fused reference";

  SessionOptions so;
  so.level = OptLevel::kO2;
  auto session = Session::create(original.clone(), so);
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  auto plan = session->plan_for(inputs);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  bool streaming = false;
  for (const std::string& step : (*plan)->describe_steps()) streaming |= step.find("cpu.attention") != std::string::npos;
  EXPECT_TRUE(streaming) << "the O2 plan should run the streaming kernel";
  auto out = session->run(inputs);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_LE(max_relative_difference(*out, *want), 1e-4) << "graph mode O2 (cpu.attention)";
}

void check(const Case& c, MaskFill fill = MaskFill::kRandom) { check_graph(attention_text(c), inputs_for(c, fill)); }

TEST(AttentionFusionTest, BertShapeWithKeyPaddingMask) {
  check({.batch = 2, .q_len = 5, .kv_len = 5, .heads = 3, .head_dim = 4, .v_head_dim = 4, .mask = {2, 1, 1, 5}});
}

TEST(AttentionFusionTest, QueryAndKeyLengthsDiffer) {
  check({.batch = 2, .q_len = 5, .kv_len = 7, .heads = 3, .head_dim = 4, .v_head_dim = 2, .mask = {2, 1, 1, 7}});
  check({.batch = 1, .q_len = 9, .kv_len = 3, .heads = 2, .head_dim = 8, .v_head_dim = 8, .mask = {}});
}

TEST(AttentionFusionTest, LengthsNotMultiplesOfTheBlocks) {
  // 130 queries: blocks of 64, 64, 2; a full [B,1,Sq,Sk] mask.
  check({.batch = 1, .q_len = 130, .kv_len = 130, .heads = 2, .head_dim = 16, .v_head_dim = 16,
         .mask = {1, 1, 130, 130}});
}

TEST(AttentionFusionTest, MoreKeysThanOneKeyBlock) {
  // 700 keys: two key blocks (512 + 188), so the running max and sum are rescaled.
  check({.batch = 1, .q_len = 70, .kv_len = 700, .heads = 2, .head_dim = 8, .v_head_dim = 8,
         .mask = {1, 1, 1, 700}}, MaskFill::kPadding);
  check({.batch = 1, .q_len = 3, .kv_len = 1100, .heads = 1, .head_dim = 4, .v_head_dim = 4, .mask = {}});
}

TEST(AttentionFusionTest, SequenceOfOne) {
  check({.batch = 2, .q_len = 1, .kv_len = 1, .heads = 2, .head_dim = 4, .v_head_dim = 4, .mask = {2, 1, 1, 1}});
  check({.batch = 1, .q_len = 1, .kv_len = 6, .heads = 2, .head_dim = 4, .v_head_dim = 4, .mask = {}});
}

TEST(AttentionFusionTest, EveryMaskShape) {
  const Case base{.batch = 2, .q_len = 6, .kv_len = 6, .heads = 2, .head_dim = 4, .v_head_dim = 4, .mask = {}};
  for (std::vector<int64_t> mask : std::vector<std::vector<int64_t>>{
           {2, 1, 1, 6}, {2, 1, 6, 6}, {2, 2, 6, 6}, {1, 2, 1, 6}, {6, 6}, {6}, {1}, {2, 2, 6, 1}}) {
    SCOPED_TRACE(dims_text(mask));
    Case c = base;
    c.mask = mask;
    check(c);
  }
}

TEST(AttentionFusionTest, ScaleOnEitherSideOrOnQ) {
  check({.batch = 1, .q_len = 4, .kv_len = 5, .heads = 2, .head_dim = 4, .v_head_dim = 4, .mask = {1, 1, 1, 5},
         .scale = Case::Scale::kMulScoresLeft});
  check({.batch = 1, .q_len = 4, .kv_len = 5, .heads = 2, .head_dim = 4, .v_head_dim = 4, .mask = {1, 1, 1, 5},
         .scale = Case::Scale::kMulQ});
}

TEST(AttentionFusionTest, LargeNegativeMasks) {
  check({.batch = 2, .q_len = 33, .kv_len = 33, .heads = 2, .head_dim = 8, .v_head_dim = 8, .mask = {2, 1, 1, 33}},
        MaskFill::kPadding);
}

TEST(AttentionFusionTest, RowsMaskedEntirelyWithMinusInfinityAreNaNLikeTheUnfusedGraph) {
  // -inf on keys j % 3 == 1 and on every key of rows (b, i) with i % 3 == 2: those rows are
  // NaN in the unfused Softmax (exp(-inf - -inf)); compare checks NaN positions match exactly.
  check({.batch = 2, .q_len = 9, .kv_len = 9, .heads = 2, .head_dim = 4, .v_head_dim = 4, .mask = {2, 1, 9, 9}},
        MaskFill::kInfRows);
  // Over two key blocks, the first one masked entirely for some rows: finite results.
  check({.batch = 1, .q_len = 4, .kv_len = 600, .heads = 1, .head_dim = 4, .v_head_dim = 4, .mask = {1, 1, 4, 600}},
        MaskFill::kInfFirstBlock);
}

TEST(AttentionFusionTest, TorchMultiheadAttentionLayout) {
  // What torch.nn.MultiheadAttention (torch 1.13, opset 13) exports after O1, for L=5, N=2,
  // E=32, 4 heads: q, k, v [L, N*heads, D] (the projections reshaped), heads merged with the
  // batch by a batched MatMul, Q divided by sqrt(D), K^T by one Transpose (1, 2, 0), an [L, L]
  // mask unsqueezed to [1, L, L]. Fused as layouts "SHD" (H = N*heads), the mask broadcast.
  const std::string text = R"IR(graph @main opset 13 (%q: f32[5,8,8], %k: f32[5,8,8], %v: f32[5,8,8], %mask: f32[1,5,5]) {
  %c: f32[] = const [2.828427]
  %qt: f32[8,5,8] = Transpose(%q) {perm = [1, 0, 2]}
  %vt: f32[8,5,8] = Transpose(%v) {perm = [1, 0, 2]}
  %qs: f32[8,5,8] = Div(%qt, %c)
  %kt: f32[8,8,5] = Transpose(%k) {perm = [1, 2, 0]}
  %s: f32[8,5,5] = MatMul(%qs, %kt)
  %a: f32[8,5,5] = Add(%s, %mask)
  %p: f32[8,5,5] = Softmax(%a) {axis = -1}
  %o: f32[8,5,8] = MatMul(%p, %vt)
  %y: f32[5,8,8] = Transpose(%o) {perm = [1, 0, 2]}
  return %y
})IR";
  TensorMap in;
  in["q"] = random_tensor({5, 8, 8}, 21, -2, 2);
  in["k"] = random_tensor({5, 8, 8}, 22, -2, 2);
  in["v"] = random_tensor({5, 8, 8}, 23);
  in["mask"] = random_tensor({1, 5, 5}, 24);
  in["mask"].data<float>()[7] = -1e4f;
  check_graph(text, in);
}

TEST(AttentionFusionTest, UnusualLayoutsReadThroughStrides) {
  // Q stored [B,H,D,Sq] (its rows are columns: the GEMM transposes A), V stored [D,S,B,H]
  // (neither axis contiguous: packed), the output written [Dv,Sq,B,H] (strided stores).
  const std::string text = R"IR(graph @main opset 13 (%qt: f32[1,2,4,5], %kt: f32[1,2,4,6], %vx: f32[3,6,1,2], %mask: f32[1,1,5,6]) {
  %c: f32[] = const [0.5]
  %q: f32[1,2,5,4] = Transpose(%qt) {perm = [0, 1, 3, 2]}
  %v: f32[1,2,6,3] = Transpose(%vx) {perm = [2, 3, 1, 0]}
  %s: f32[1,2,5,6] = MatMul(%q, %kt)
  %sc: f32[1,2,5,6] = Mul(%s, %c)
  %a: f32[1,2,5,6] = Add(%sc, %mask)
  %p: f32[1,2,5,6] = Softmax(%a) {axis = -1}
  %o: f32[1,2,5,3] = MatMul(%p, %v)
  %y: f32[3,5,1,2] = Transpose(%o) {perm = [3, 2, 0, 1]}
  return %y
})IR";
  TensorMap in;
  in["qt"] = random_tensor({1, 2, 4, 5}, 31, -2, 2);
  in["kt"] = random_tensor({1, 2, 4, 6}, 32, -2, 2);
  in["vx"] = random_tensor({3, 6, 1, 2}, 33);
  in["mask"] = random_tensor({1, 1, 5, 6}, 34);
  check_graph(text, in);
}

TEST(AttentionFusionTest, ReferenceMatchesNumPy) {
  // B=1, S=3, H=2, D=2, scale 0.5, mask [0, 0, -1e4] on the keys; the expected output computed
  // with NumPy (reshape/transpose heads, softmax, merge).
  auto g = parse_graph(R"IR(graph @main opset 13 (%q: f32[1,3,4], %k: f32[1,3,4], %v: f32[1,3,4], %m: f32[1,1,1,3]) {
  %y: f32[1,3,4] = opfuse::FusedAttention(%q, %k, %v, %m) {num_heads = 2, scale = 0.5, q_layout = "BS(HD)", k_layout = "BS(HD)", v_layout = "BS(HD)", out_layout = "BS(HD)"}
  return %y
})IR");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  TensorMap in;
  in["q"] = Tensor::from_vector<float>({1, 3, 4}, {1, 2, 0.5, -1, 0, 1, 2, 1, -1, 0.5, 1, 0});
  in["k"] = Tensor::from_vector<float>({1, 3, 4}, {0.5, 1, -1, 0, 1, -0.5, 0, 2, 0, 0, 1, 1});
  in["v"] = Tensor::from_vector<float>({1, 3, 4}, {1, 2, 3, 4, -1, 0, 1, 0, 2, 1, 0, -2});
  in["m"] = Tensor::from_vector<float>({1, 1, 1, 3}, {0, 0, -1e4});
  const Tensor want = Tensor::from_vector<float>(
      {1, 3, 4}, {0.554599762f, 1.554599762f, 2.35835743f, 2.716714859f, 0.35835743f, 1.35835743f,
                  1.238405824f, 0.476811677f, 0.302709788f, 1.302709818f, 1.755081415f, 1.510162711f});
  auto eager = run_eager(*g, in);
  ASSERT_TRUE(eager.is_ok()) << eager.status().message();
  EXPECT_LE(max_relative_difference(eager->at("y"), want), 1e-6);
  SessionOptions so;
  so.level = OptLevel::kO2;
  auto session = Session::create(std::move(*g), so);
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  auto out = session->run(in);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_LE(max_relative_difference(out->at("y"), want), 1e-6);
}

TEST(AttentionFusionTest, SymbolicBatchInfersTheOutput) {
  auto g = parse_graph(R"IR(graph @main opset 13 (%q: f32[batch,3,8], %k: f32[batch,7,8], %v: f32[batch,7,6]) {
  %y = opfuse::FusedAttention(%q, %k, %v) {num_heads = 2, q_layout = "BS(HD)", k_layout = "BS(HD)", v_layout = "BS(HD)", out_layout = "BHSD"}
  return %y
})IR");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_TRUE(infer_shapes(*g).is_ok());
  const Value* y = g->outputs().front();
  ASSERT_TRUE(y->shape.has_value());
  EXPECT_EQ(shape_to_string(*y->shape), "[batch,2,3,3]");
}

TEST(AttentionFusionTest, BadLayoutsAreUserErrors) {
  auto g = parse_graph(R"IR(graph @main opset 13 (%q: f32[1,3,4], %k: f32[1,3,4], %v: f32[1,3,4]) {
  %y: f32[1,3,4] = opfuse::FusedAttention(%q, %k, %v) {num_heads = 3, q_layout = "BS(HD)", k_layout = "BS(HD)", v_layout = "BS(HD)", out_layout = "BS(HD)"}
  return %y
})IR");
  ASSERT_FALSE(g.is_ok() && infer_shapes(*g).is_ok()) << "4 is not 3 heads x head dim";
  auto bad = parse_graph(R"IR(graph @main opset 13 (%q: f32[1,3,4], %k: f32[1,3,4], %v: f32[1,3,4]) {
  %y: f32[1,3,4] = opfuse::FusedAttention(%q, %k, %v) {num_heads = 2, q_layout = "BXS(HD)", k_layout = "BS(HD)", v_layout = "BS(HD)", out_layout = "BS(HD)"}
  return %y
})IR");
  ASSERT_FALSE(bad.is_ok() && infer_shapes(*bad).is_ok()) << "X is no axis";
}

}  // namespace
}  // namespace opfuse
