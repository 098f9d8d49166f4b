// opfuse::ChannelGather (ops/channel_gather.cc) and the kernel graph mode picks for it: the plain
// reference against an index-by-index oracle, then every layout (plain, nChw16c, nChw8c, nhwc)
// with the chosen kernel against the reference, bit for bit: the op only moves values, so NaN
// payloads, infinities, signed zeros and denormals must arrive unchanged, and padded lanes are 0.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/kernel.h"
#include "ops/fused.h"
#include "ops/infer_shapes.h"
#include "ops/reference.h"

namespace opfuse {
namespace {

using Ints = std::vector<int64_t>;

// Random values with every special kind mixed in.
Tensor special_f32(const Ints& dims, std::mt19937& gen) {
  std::uniform_real_distribution<float> dist(-4, 4);
  Tensor t = Tensor::zeros(DType::kF32, dims).value();
  const float specials[] = {std::bit_cast<float>(0x7fc01234u), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), -0.0f, 1e-40f, -3e-39f};
  int64_t i = 0;
  for (float& v : t.values<float>()) v = (i++ % 7 == 3) ? specials[gen() % 6] : dist(gen);
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dims() == b.dims() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

Ints dims_of(const Value* v) { return *static_dims(*v->shape); }

// Runs `node` with the kernel graph mode would create and with its reference kernel.
struct Both {
  Tensor got, want;
  std::string kernel;
};
Both run_both(const Node& node, const std::vector<const Tensor*>& args) {
  Both out;
  auto kernel = create_kernel(KernelCompileContext{node, std::vector<const Tensor*>(args.size(), nullptr), 1});
  EXPECT_TRUE(kernel.is_ok()) << kernel.status().message();
  if (!kernel.is_ok()) return out;
  out.kernel = std::string((*kernel)->name());
  out.got = Tensor::zeros(DType::kF32, dims_of(node.output(0))).value();
  out.want = Tensor::zeros(DType::kF32, dims_of(node.output(0))).value();
  // Garbage in the kernel's output buffer: padded lanes must be written, not left as found.
  std::memset(out.got.raw_data(), 0x7f, out.got.nbytes());
  Tensor* g = &out.got;
  Tensor* w = &out.want;
  EXPECT_TRUE((*kernel)->run(args, {&g, 1}).is_ok());
  EXPECT_TRUE(make_reference_kernel(node)->run(args, {&w, 1}).is_ok());
  return out;
}

Tensor to_layout(const Tensor& x, int64_t block) {
  Graph g;
  auto to = g.add_node("ToBlocked", {g.add_input("x", DType::kF32, x.shape())}, {"b"}, {{"block", block}}, "to",
                       std::string(kFusedDomain));
  EXPECT_TRUE(to.is_ok());
  auto out = run_reference(**to, {&x});
  EXPECT_TRUE(out.is_ok());
  return std::move((*out)[0]);
}

struct Case {
  std::vector<Ints> inputs;  // plain dims
  Ints sources, channels;
};

std::vector<Case> cases() {
  // ShuffleNet's halves (58 channels: padded blocks), a gather from three inputs with repeats and
  // a 3-d tensor, a 20-channel output (one full and one padded block of 16).
  Case shuffle{{{1, 58, 5, 6}, {1, 58, 5, 6}}, {}, {}};
  for (int64_t k = 29; k < 58; ++k) {
    shuffle.sources.insert(shuffle.sources.end(), {0, 1});
    shuffle.channels.insert(shuffle.channels.end(), {k, k});
  }
  Case three{{{2, 8, 3, 3}, {2, 5, 3, 3}, {2, 16, 3, 3}}, {2, 0, 1, 1, 2, 0, 2}, {15, 7, 0, 4, 0, 0, 8}};
  Case wide{{{1, 24, 2, 7}}, {}, {}};
  for (int64_t c = 0; c < 20; ++c) {
    wide.sources.push_back(0);
    wide.channels.push_back((c * 5) % 24);
  }
  // Concats whose inputs do not fill whole blocks (passes/layout.cc runs them as gathers): a
  // TensorFlow export's channel padding (24 + 4, batch 2), inputs of 20, 12 and 2 channels, and
  // one input's blocks swapped. Blocked, their output blocks are copied whole from one input's
  // block where its lanes line up and patched lane by lane elsewhere.
  auto concat = [](std::vector<Ints> inputs) {
    Case c{inputs, {}, {}};
    for (size_t i = 0; i < inputs.size(); ++i) {
      for (int64_t k = 0; k < inputs[i][1]; ++k) {
        c.sources.push_back(static_cast<int64_t>(i));
        c.channels.push_back(k);
      }
    }
    return c;
  };
  Case swap{{{1, 32, 3, 4}}, {}, {}};
  for (int64_t k = 0; k < 32; ++k) {
    swap.sources.push_back(0);
    swap.channels.push_back((k + 16) % 32);
  }
  // The last one is large enough (2.4 MB) to be copied on every thread.
  return {shuffle, three, wide, concat({{2, 24, 5, 6}, {2, 4, 5, 6}}),
          concat({{1, 20, 3, 3}, {1, 12, 3, 3}, {1, 2, 3, 3}}), concat({{1, 2, 4, 3}, {1, 30, 4, 3}}), swap,
          concat({{1, 24, 96, 96}, {1, 40, 96, 96}})};
}

TEST(ChannelGather, PlainReferenceMatchesIndexByIndex) {
  std::mt19937 gen(5);
  for (const Case& c : cases()) {
    Graph g;
    std::vector<Tensor> xs;
    std::vector<Value*> values;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      xs.push_back(special_f32(c.inputs[i], gen));
      values.push_back(g.add_input(str_cat("x", i), DType::kF32, xs.back().shape()));
    }
    auto node = g.add_node("ChannelGather", values, {"y"}, {{"sources", c.sources}, {"channels", c.channels}}, "gather",
                           std::string(kFusedDomain));
    ASSERT_TRUE(node.is_ok());
    ASSERT_TRUE(infer_shapes(g).is_ok());
    std::vector<const Tensor*> args;
    for (const Tensor& x : xs) args.push_back(&x);
    auto out = run_reference(**node, args);
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    const Tensor& y = (*out)[0];
    const Ints& d = c.inputs[0];
    ASSERT_EQ(y.dims(), (Ints{d[0], static_cast<int64_t>(c.sources.size()), d[2], d[3]}));
    const int64_t positions = d[2] * d[3];
    for (int64_t n = 0; n < d[0]; ++n) {
      for (size_t ch = 0; ch < c.sources.size(); ++ch) {
        const Tensor& x = xs[static_cast<size_t>(c.sources[ch])];
        for (int64_t s = 0; s < positions; ++s) {
          const float want = x.data<float>()[(n * x.dim(1) + c.channels[ch]) * positions + s];
          const float got = y.data<float>()[(n * y.dim(1) + static_cast<int64_t>(ch)) * positions + s];
          ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << n << " " << ch << " " << s;
        }
      }
    }
    // Every layout: the chosen kernel and the reference give ToBlocked of the plain result.
    for (int64_t block : {16, 8, 0}) {
      SCOPED_TRACE(str_cat("block ", block));
      Graph gb;
      std::vector<Tensor> xb;
      std::vector<Value*> vb;
      for (size_t i = 0; i < xs.size(); ++i) {
        xb.push_back(to_layout(xs[i], block));
        vb.push_back(gb.add_input(str_cat("x", i), DType::kF32, xb.back().shape()));
      }
      auto nb = gb.add_node("ChannelGather", vb, {"y"},
                            {{"sources", c.sources}, {"channels", c.channels}, {"block", block}}, "gather",
                            std::string(kFusedDomain));
      ASSERT_TRUE(nb.is_ok());
      ASSERT_TRUE(infer_shapes(gb).is_ok());
      std::vector<const Tensor*> bargs;
      for (const Tensor& x : xb) bargs.push_back(&x);
      const Tensor want = to_layout(y, block);
      const Both both = run_both(**nb, bargs);
      EXPECT_TRUE(same_bits(both.want, want));
      EXPECT_TRUE(same_bits(both.got, want)) << both.kernel;
    }
    const Both plain = run_both(**node, args);
    EXPECT_TRUE(same_bits(plain.got, y)) << plain.kernel;
  }
}

TEST(ChannelGather, BadAttributesAreUserErrors) {
  Graph g;
  Value* x = g.add_input("x", DType::kF32, make_shape({1, 4, 2, 2}));
  ASSERT_TRUE(g.add_node("ChannelGather", {x}, {"y"}, {{"sources", Ints{0, 1}}, {"channels", Ints{0, 1}}}, "gather",
                         std::string(kFusedDomain))
                  .is_ok());
  const Status s = infer_shapes(g);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("output channel 1 reads input 1"), std::string::npos) << s.message();
  Graph g2;
  Value* x2 = g2.add_input("x", DType::kF32, make_shape({1, 4, 2, 2}));
  auto n2 = g2.add_node("ChannelGather", {x2}, {"y"}, {{"sources", Ints{0}}, {"channels", Ints{4}}}, "gather",
                        std::string(kFusedDomain));
  ASSERT_TRUE(n2.is_ok());
  Tensor t = Tensor::zeros(DType::kF32, {1, 4, 2, 2}).value();
  auto out = run_reference(**n2, {&t});
  ASSERT_FALSE(out.is_ok());
  EXPECT_NE(out.status().message().find("reads channel 4 of input 0"), std::string::npos) << out.status().message();
}

}  // namespace
}  // namespace opfuse
