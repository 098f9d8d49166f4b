// The PRelu kernel (kernels/cpu/hwy_prelu.cc) against the reference, bit for bit: a compare,
// a multiply and a select give the same float as the reference's scalar expression, NaN, the
// infinities, denormals and -0 included.
#include <cstring>
#include <limits>

#include "core/target.h"
#include "graph_test_util.h"
#include "hwy_test_util.h"

namespace opfuse::hwy_test {
namespace {

constexpr const char* kName = "hwy.prelu";
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kDenormal = 1e-40f;

// X's values cycle through the special ones and a spread of ordinary ones (13 of them, so the
// cycle does not line up with any vector or block length).
const std::vector<float> kX = {kNaN, -kInf, kInf, -0.0f, 0.0f, -kDenormal, kDenormal, -2.5f, 3.0f, -1e-3f, 7.0f,
                               -1e30f, 0.25f};

// Runs the kernel (which must be hwy.prelu) and the reference and compares the bits; returns the
// kernel's output.
Tensor expect_bitwise(const Case& c) {
  auto k = compile(c);
  EXPECT_EQ(k->name(), kName) << c.node->describe();
  auto got = allocate_outputs(*c.node);
  auto want = allocate_outputs(*c.node);
  EXPECT_TRUE(run_kernel(*k, c, got).is_ok());
  EXPECT_TRUE(run_kernel(*make_reference_kernel(*c.node), c, want).is_ok());
  const float* g = got[0].data<float>();
  const float* w = want[0].data<float>();
  int reported = 0;
  for (int64_t i = 0; i < got[0].numel(); ++i) {
    const bool same = std::memcmp(g + i, w + i, sizeof(float)) == 0 || (std::isnan(g[i]) && std::isnan(w[i]));
    if (!same && reported++ < 5) {
      ADD_FAILURE() << c.node->describe() << ": element " << i << " is " << g[i] << ", reference " << w[i];
    }
  }
  return got[0];
}

struct Shapes {
  std::vector<int64_t> x, slope;
};

// Every way the slope can lie against X: per channel plain and blocked (16 and 8 lanes, batch
// 2), one value, X's own shape, a trailing row with a tail past the vectors, per row, and
// tensors big enough to run on threads with units cut into pieces.
const std::vector<Shapes> kShapes = {
    {{1, 4, 7, 7, 16}, {1, 4, 1, 1, 16}}, {{2, 3, 5, 5, 8}, {1, 3, 1, 1, 8}}, {{2, 24, 9, 11}, {24, 1, 1}},
    {{1, 64, 56, 56}, {64, 1, 1}},        {{3, 5, 7}, {1}},                   {{3, 5, 7}, {3, 5, 7}},
    {{4, 6, 37}, {37}},                   {{4, 6, 37}, {6, 1}},               {{4, 6, 37}, {4, 1, 37}},
    {{5}, {}},                            {{1, 1, 1}, {1}},                   {{2, 2, 160, 160, 16}, {1, 2, 1, 1, 16}},
    {{1, 300001}, {1}},                   {{100003}, {100003}},               {{3, 70000}, {70000}},
    {{0, 4}, {4}}};

TEST(HwyPRelu, MatchesTheReferenceBitForBit) {
  for (const Shapes& s : kShapes) {
    SCOPED_TRACE(str_cat(dims_to_string(s.x), " slope ", dims_to_string(s.slope)));
    // Slopes of both signs, 0 and above 1; as a graph constant and as a run-time input.
    const std::vector<float> slopes = {0.25f, -0.5f, 0.0f, 1.5f, kDenormal};
    expect_bitwise(*make_case("PRelu", {In{s.x, DType::kF32, {}, 0, 0, kX}, In{s.slope, DType::kF32, {}, 0, 0, slopes}}));
    expect_bitwise(*make_case("PRelu", {In{s.x}, In{s.slope, DType::kF32, {}, -1, 1}}, {}, 7));
  }
}

TEST(HwyPRelu, PerChannelSlopesLandOnTheirChannels) {
  // Blocked [1, 2, 3, 3, 16]: the slope of channel c is c + 1, X is -1 everywhere, so every
  // element tells which slope it met.
  auto c = make_case("PRelu", {In{{1, 2, 3, 3, 16}, DType::kF32, {}, 0, 0, std::vector<float>{-1.0f}},
                               In{{1, 2, 1, 1, 16}}});
  for (int64_t ch = 0; ch < 32; ++ch) c->inputs[1].data<float>()[ch] = static_cast<float>(ch + 1);
  const Tensor y = expect_bitwise(*c);
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t p = 0; p < 9; ++p) {
      for (int64_t l = 0; l < 16; ++l) ASSERT_EQ(y.data<float>()[(b * 9 + p) * 16 + l], -(b * 16 + l + 1.0f));
    }
  }
}

TEST(HwyPRelu, RunsInPlace) {
  auto c = make_case("PRelu", {In{{2, 3, 40, 40, 8}, DType::kF32, {}, 0, 0, kX}, In{{1, 3, 1, 1, 8}}});
  expect_in_place_matches_reference(*c, kName, 0, 0, "PRelu in place");
}

// A MobileFaceNet-style block: conv, PRelu, depthwise conv, PRelu, pointwise conv, PRelu, with
// per-channel slopes (24 and 40 channels: whole blocks of 8, not of 16). Every level agrees with
// eager mode, also with a NaN and an infinity in the input, and each PRelu runs on this kernel,
// at O3 on the blocked layout.
constexpr const char* kFaceBlock = R"(graph @main opset 13 (%x: f32[1,3,20,20]) {
  %w0: f32[24,3,3,3] = const splat 0.1
  %b0: f32[24] = const splat -0.2
  %s0: f32[24,1,1] = const [-0.3, -0.25, -0.2, -0.15, -0.1, -0.05, 0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85]
  %wd: f32[24,1,3,3] = const splat 0.2
  %s1: f32[24,1,1] = const [-0.3, -0.25, -0.2, -0.15, -0.1, -0.05, 0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85]
  %w2: f32[40,24,1,1] = const splat -0.05
  %s2: f32[40,1,1] = const [-0.2, -0.17, -0.14, -0.11, -0.08, -0.05, -0.02, 0.01, 0.04, 0.07, 0.1, 0.13, 0.16, 0.19, 0.22, 0.25, 0.28, 0.31, 0.34, 0.37, 0.4, 0.43, 0.46, 0.49, 0.52, 0.55, 0.58, 0.61, 0.64, 0.67, 0.7, 0.73, 0.76, 0.79, 0.82, 0.85, 0.88, 0.91, 0.94, 0.97]
  %c0: f32[1,24,10,10] = Conv(%x, %w0, %b0) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]}
  %p0: f32[1,24,10,10] = PRelu(%c0, %s0)
  %c1: f32[1,24,10,10] = Conv(%p0, %wd) {group = 24, kernel_shape = [3, 3], pads = [1, 1, 1, 1]}
  %p1: f32[1,24,10,10] = PRelu(%c1, %s1)
  %c2: f32[1,40,10,10] = Conv(%p1, %w2) {kernel_shape = [1, 1]}
  %y: f32[1,40,10,10] = PRelu(%c2, %s2)
  return %y
})";

TEST(HwyPRelu, FaceBlockMatchesEagerAtEveryLevel) {
  for (const auto& [level, specials, run] :
       testing_graphs::compile_at_every_level(kFaceBlock, 5, 61, 777, -kInf)) {
    SCOPED_TRACE(std::string(opt_level_name(level)) + (specials ? " with NaN and -inf" : ""));
    EXPECT_LE(run.diff, 1e-5);
    EXPECT_EQ(run.steps_running(kName), 3u);
    if (level == OptLevel::kO3 && active_target().channel_block() > 0) {
      EXPECT_EQ(run.steps_running("FromBlocked"), 1u) << "a PRelu ran on the plain layout";
    }
    if (specials) EXPECT_TRUE(std::isnan(run.want.begin()->second.data<float>()[0])) << "the NaN did not reach the output";
  }
}

TEST(HwyPRelu, DeclinesWhatItDoesNotPlan) {
  EXPECT_EQ(compile(*make_case("PRelu", {In{{3, 4}, DType::kF64}, In{{4}, DType::kF64}}))->name(), "reference");
}

}  // namespace
}  // namespace opfuse::hwy_test
