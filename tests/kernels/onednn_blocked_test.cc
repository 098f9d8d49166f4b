// Blocked-layout ops (ops/layout_ops.cc) and their oneDNN kernels (kernels/cpu/onednn_blocked.cc,
// the blocked branch of onednn_pool.cc): reference kernels against hand-computed values, and
// every oneDNN kernel against the reference on random shapes, padded channel counts included.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/target.h"
#include "kernels/kernel.h"
#include "ops/fused.h"
#include "kernels/onednn_test_util.h"
#include "ops/infer_shapes.h"

namespace opfuse {
namespace {

using Ints = std::vector<int64_t>;

using onednn_test::random_f32;

Ints dims_of(const Value* v) {
  Ints out;
  for (const Dim& d : *v->shape) out.push_back(d.value());
  return out;
}

// Runs the node with the kernel create_kernel picks and with its reference kernel; returns both.
struct Both {
  Tensor got, want;
  std::string kernel;
};
Both run_both(const Node& node, const std::vector<const Tensor*>& args,
              const std::vector<const Tensor*>& constants) {
  Both out;
  auto kernel = create_kernel(KernelCompileContext{node, constants, 1});
  EXPECT_TRUE(kernel.is_ok()) << kernel.status().message();
  if (!kernel.is_ok()) return out;
  out.kernel = std::string((*kernel)->name());
  const Ints y = dims_of(node.output(0));
  out.got = Tensor::zeros(DType::kF32, y).value();
  out.want = Tensor::zeros(DType::kF32, y).value();
  Tensor* g = &out.got;
  Tensor* w = &out.want;
  const Status s1 = (*kernel)->run(args, {&g, 1});
  EXPECT_TRUE(s1.is_ok()) << s1.message();
  const Status s2 = make_reference_kernel(node)->run(args, {&w, 1});
  EXPECT_TRUE(s2.is_ok()) << s2.message();
  return out;
}

double rel_diff(const Tensor& got, const Tensor& want) {
  double diff = 0, scale = 1e-30;
  for (int64_t i = 0; i < want.numel(); ++i) {
    diff = std::max(diff, std::abs(got.get_double(i) - want.get_double(i)));
    scale = std::max(scale, std::abs(want.get_double(i)));
  }
  return diff / scale;
}

TEST(BlockedLayoutTest, ToBlockedAndBackByHand) {
  // x[0, c, 0, w] = 10 c + w, 3 channels, blocks of 8: lane c of block 0, lanes 3..7 zero.
  Graph g;
  Tensor x = Tensor::from_vector<float>({1, 3, 1, 2}, {0, 1, 10, 11, 20, 21});
  Value* xv = g.add_input("x", DType::kF32, x.shape());
  auto to = g.add_node("ToBlocked", {xv}, {"b"}, {{"block", int64_t{8}}}, "to", "opfuse");
  ASSERT_TRUE(to.is_ok());
  auto from = g.add_node("FromBlocked", {(*to)->output(0)}, {"y"}, {{"channels", int64_t{3}}}, "from", "opfuse");
  ASSERT_TRUE(from.is_ok());
  ASSERT_TRUE(infer_shapes(g).is_ok());
  EXPECT_EQ(dims_of((*to)->output(0)), (Ints{1, 1, 1, 2, 8}));
  EXPECT_EQ(dims_of((*from)->output(0)), (Ints{1, 3, 1, 2}));
  const Both b = run_both(**to, {&x}, {nullptr});
  EXPECT_EQ(b.kernel, "onednn.reorder");
  const std::vector<float> want = {0, 10, 20, 0, 0, 0, 0, 0, 1, 11, 21, 0, 0, 0, 0, 0};
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(b.want.data<float>()[i], want[i]) << i;
    EXPECT_EQ(b.got.data<float>()[i], want[i]) << i;
  }
  const Both back = run_both(**from, {&b.want}, {nullptr});
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(back.want.data<float>()[i], x.data<float>()[i]) << i;
    EXPECT_EQ(back.got.data<float>()[i], x.data<float>()[i]) << i;
  }
}

TEST(BlockedLayoutTest, OneDnnReordersMatchReference) {
  std::mt19937 gen(3);
  for (int64_t block : {8, 16}) {
    for (Ints dims : {Ints{2, 20, 5, 7}, Ints{1, 32, 3, 3}, Ints{1, 3, 4, 4}}) {
      Graph g;
      Tensor x = random_f32(dims, gen);
      auto to = g.add_node("ToBlocked", {g.add_input("x", DType::kF32, x.shape())}, {"b"},
                           {{"block", block}}, "to", "opfuse");
      ASSERT_TRUE(to.is_ok());
      auto from = g.add_node("FromBlocked", {(*to)->output(0)}, {"y"}, {{"channels", dims[1]}}, "from", "opfuse");
      ASSERT_TRUE(from.is_ok());
      ASSERT_TRUE(infer_shapes(g).is_ok());
      const Both b = run_both(**to, {&x}, {nullptr});
      EXPECT_EQ(b.kernel, "onednn.reorder");
      EXPECT_EQ(rel_diff(b.got, b.want), 0.0);
      const Both p = run_both(**from, {&b.want}, {nullptr});
      EXPECT_EQ(rel_diff(p.got, x), 0.0);
      EXPECT_EQ(rel_diff(p.want, x), 0.0);
    }
  }
}

TEST(BlockedLayoutTest, FromBlockedRejectsWrongChannelCount) {
  Graph g;
  Value* xv = g.add_input("x", DType::kF32, make_shape({1, 2, 3, 3, 16}));
  ASSERT_TRUE(g.add_node("FromBlocked", {xv}, {"y"}, {{"channels", int64_t{40}}}, "from", "opfuse").is_ok());
  const Status s = infer_shapes(g);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("channels = 40"), std::string::npos) << s.message();
}

struct ConvCase {
  Ints x, w;
  Ints strides, pads;
  int64_t group;
  bool blocked_x;
};

// BlockedConv's oneDNN kernel against its reference (plain FusedConv reference in between
// reorders), for first convs, pointwise, 3x3, strided depthwise and padded channel counts.
TEST(BlockedLayoutTest, OneDnnBlockedConvMatchesReference) {
  std::mt19937 gen(11);
  const std::vector<ConvCase> cases = {
      {{1, 3, 17, 17}, {16, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, 1, false},  // first conv, plain x
      {{1, 32, 9, 9}, {48, 32, 3, 3}, {1, 1}, {1, 1, 1, 1}, 1, true},   // 3x3
      {{2, 24, 7, 7}, {40, 24, 1, 1}, {1, 1}, {0, 0, 0, 0}, 1, true},   // 1x1, padded C and M
      {{1, 24, 10, 10}, {24, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, 24, true}, // depthwise, strided, padded
      {{1, 16, 6, 6}, {8, 16, 5, 5}, {1, 1}, {2, 2, 2, 2}, 1, true},    // M < block
  };
  const std::vector<std::vector<std::string>> epilogues = {
      {}, {"relu"}, {"add", "relu"}, {"hardswish"}, {"sigmoid_mul"}, {"clip:0:6"}};
  for (const ConvCase& c : cases) {
    for (const auto& epilogue : epilogues) {
      SCOPED_TRACE(str_cat("x", dims_to_string(c.x), " w", dims_to_string(c.w), " ",
                           epilogue.empty() ? "" : epilogue[0]));
      const bool residual = !epilogue.empty() && epilogue[0] == "add";
      Graph g;
      Tensor x = random_f32(c.x, gen), w = random_f32(c.w, gen, 0.5f), b = random_f32({c.w[0]}, gen);
      Tensor xb;
      Value* xv;
      if (c.blocked_x) {
        xb = random_f32({c.x[0], (c.x[1] + 15) / 16, c.x[2], c.x[3], 16}, gen);
        xv = g.add_input("x", DType::kF32, xb.shape());
      } else {
        xb = x;
        xv = g.add_input("x", DType::kF32, x.shape());
      }
      Attributes attrs = {{"strides", c.strides}, {"pads", c.pads}, {"group", c.group},
                          {"epilogue", epilogue}, {"block", int64_t{16}}};
      std::vector<Value*> inputs = {xv, g.add_constant("w", w), g.add_constant("b", b)};
      // Residual dims = output dims: infer them without the residual first.
      auto probe = g.add_node("BlockedConv", inputs, {"probe"}, {{"strides", c.strides}, {"pads", c.pads},
                              {"group", c.group}}, "probe", "opfuse");
      ASSERT_TRUE(probe.is_ok());
      ASSERT_TRUE(infer_shapes(g).is_ok());
      const Ints y = dims_of((*probe)->output(0));
      Tensor r = random_f32(y, gen);
      if (residual) inputs.push_back(g.add_input("r", DType::kF32, r.shape()));
      auto node = g.add_node("BlockedConv", inputs, {"y"}, attrs, "conv", "opfuse");
      ASSERT_TRUE(node.is_ok());
      const Status inferred = infer_shapes(g);
      ASSERT_TRUE(inferred.is_ok()) << inferred.message();
      std::vector<const Tensor*> args = {&xb, &w, &b};
      std::vector<const Tensor*> constants = {nullptr, &w, &b};
      if (residual) {
        args.push_back(&r);
        constants.push_back(nullptr);
      }
      const Both both = run_both(**node, args, constants);
      EXPECT_EQ(both.kernel, "onednn.blocked_conv");
      // Compare real channels only: padded lanes are unspecified (finite) after post-ops.
      const int64_t m = c.w[0];
      double diff = 0, scale = 1e-30;
      for (int64_t i = 0; i < both.want.numel(); ++i) {
        if ((i % 16) + 16 * ((i / (16 * y[2] * y[3])) % y[1]) >= m) continue;
        diff = std::max(diff, std::abs(both.got.get_double(i) - both.want.get_double(i)));
        scale = std::max(scale, std::abs(both.want.get_double(i)));
        ASSERT_TRUE(std::isfinite(both.got.get_double(i)));
      }
      EXPECT_LE(diff / scale, 1e-4);
    }
  }
}

// A 2-d pool on blocked data is a 3-d pool with a trivial last window axis: oneDNN's blocked
// pooling against the reference 3-d pooling.
TEST(BlockedLayoutTest, OneDnnBlockedPoolsMatchReference) {
  std::mt19937 gen(5);
  struct PoolCase {
    std::string op;
    Attributes attrs;
  };
  const std::vector<PoolCase> cases = {
      {"MaxPool", {{"kernel_shape", Ints{3, 3, 1}}, {"strides", Ints{2, 2, 1}}, {"pads", Ints{1, 1, 0, 1, 1, 0}}}},
      {"MaxPool", {{"kernel_shape", Ints{5, 5, 1}}, {"pads", Ints{2, 2, 0, 2, 2, 0}}}},
      {"AveragePool", {{"kernel_shape", Ints{3, 3, 1}}, {"strides", Ints{2, 2, 1}}, {"pads", Ints{1, 1, 0, 1, 1, 0}}}},
      {"AveragePool", {{"kernel_shape", Ints{9, 9, 1}}}},  // GlobalAveragePool's blocked form
  };
  for (const PoolCase& c : cases) {
    for (int64_t block : {8, 16}) {
      Graph g;
      Tensor x = random_f32({1, 3, 9, 9, block}, gen);
      auto node = g.add_node(c.op, {g.add_input("x", DType::kF32, x.shape())}, {"y"}, c.attrs, "pool");
      ASSERT_TRUE(node.is_ok());
      ASSERT_TRUE(infer_shapes(g).is_ok());
      const Both both = run_both(**node, {&x}, {nullptr});
      // The whole-map window is a mean over whole axes: hwy.reduce's ReduceMean plan.
      const bool whole_map = c.op == "AveragePool" && !c.attrs.count("pads");
      // oneDNN 2.6 pools nChw16c below AVX-512 only with reference loops, which are refused.
      const bool onednn_has_it = block == 8 || active_target().has_avx512();
      EXPECT_EQ(both.kernel, whole_map ? "hwy.reduce" : onednn_has_it ? "onednn.pool" : "reference") << c.op;
      EXPECT_LE(rel_diff(both.got, both.want), 1e-6) << c.op;
    }
  }
}

// Resize of a blocked tensor (scales with a trailing 1): the Highway kernel against the reference,
// for blocks of one vector, two, and (4 floats) less than one vector below AVX, up and down.
TEST(BlockedLayoutTest, HwyResizeOfBlockedTensorMatchesReference) {
  std::mt19937 gen(9);
  for (const int64_t block : {4, 8, 16}) {
    for (const auto& [sh, sw] : {std::pair{2.0f, 2.0f}, std::pair{1.5f, 0.6f}}) {
      for (const char* mode : {"nearest", "linear"}) {
        SCOPED_TRACE(str_cat(mode, " block ", block, " scales ", sh, " ", sw));
        Graph g;
        Tensor x = random_f32({1, 2, 3, 5, block}, gen);
        Tensor scales = Tensor::from_vector<float>({5}, {1, 1, sh, sw, 1});
        auto node = g.add_node("Resize", {g.add_input("x", DType::kF32, x.shape()), nullptr, g.add_constant("s", scales)},
                               {"y"}, {{"mode", std::string(mode)}}, "up");
        ASSERT_TRUE(node.is_ok());
        ASSERT_TRUE(infer_shapes(g).is_ok());
        const Ints want_dims = {1, 2, static_cast<int64_t>(3 * sh), static_cast<int64_t>(5 * sw), block};
        EXPECT_EQ(dims_of((*node)->output(0)), want_dims);
        const Both both = run_both(**node, {&x, nullptr, &scales}, {nullptr, nullptr, &scales});
        EXPECT_EQ(both.kernel, "hwy.resize");
        EXPECT_LE(rel_diff(both.got, both.want), 1e-6);
      }
    }
  }
}

}  // namespace
}  // namespace opfuse
