// FusedProgram pieces with hand-computed expectations: index-map composition (affine and not),
// element resolution through Pad/Concat/Gather, and the Highway backend on hand-written
// programs: a row reduction, a per-channel constant of a blocked tensor (a periodic load), and
// tables read as runs (Concat, Pad) or element by element (short runs).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "codegen/fused_program.h"
#include "codegen/index_map.h"
#include "kernels/cpu/hwy_channel_affine.h"
#include "kernels/cpu/hwy_executor.h"

namespace opfuse::codegen {
namespace {

using Ints = std::vector<int64_t>;
using K = Transform::Kind;

TEST(IndexMapTest, TransposeOfReshapeIsAffine) {
  // x[2,6,12] -> Reshape [2,6,3,4] -> Transpose(0,2,1,3) -> [2,3,6,4]: element (b,h,s,d) of the
  // result is x[b, s, 4h + d].
  IndexChain chain = {Transform{K::kTranspose, {2, 6, 3, 4}, {2, 3, 6, 4}, {0, 2, 1, 3}, {}, 0},
                      Transform{K::kReshape, {2, 6, 12}, {2, 6, 3, 4}, {}, {}, 0}};
  auto m = compose_affine(chain, {2, 3, 6, 4});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->A, (std::vector<Ints>{{1, 0, 0, 0}, {0, 0, 1, 0}, {0, 4, 0, 1}}));
  EXPECT_EQ(m->b, (Ints{0, 0, 0}));
}

TEST(IndexMapTest, ReshapeThatCarriesIsNotAffine) {
  // [3,4] read as [4,3]: element (i, j) is flat 3i + j, which crosses rows of 4.
  IndexChain chain = {Transform{K::kReshape, {3, 4}, {4, 3}, {}, {}, 0}};
  EXPECT_FALSE(compose_affine(chain, {4, 3}).has_value());
  Resolved r = resolve(chain, {2, 1});  // flat 7 -> (1, 3)
  EXPECT_EQ(r.coords, (Ints{1, 3}));
}

TEST(IndexMapTest, SliceAndBroadcast) {
  // y[5] = x[1 + 2i] of x[11]; then broadcast against [3,5].
  IndexChain chain = {Transform{K::kBroadcast, {5}, {3, 5}, {}, {}, 0},
                      Transform{K::kSlice, {11}, {5}, {1}, {2}, 0}};
  auto m = compose_affine(chain, {3, 5});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->A, (std::vector<Ints>{{0, 2}}));
  EXPECT_EQ(m->b, (Ints{1}));
}

TEST(IndexMapTest, PadConcatGatherResolve) {
  IndexChain pad = {Transform{K::kPad, {3}, {6}, {2}, {}, 0}};
  EXPECT_TRUE(resolve(pad, {1}).pad);
  EXPECT_EQ(resolve(pad, {2}).coords, (Ints{0}));
  EXPECT_TRUE(resolve(pad, {5}).pad);
  IndexChain concat = {Transform{K::kConcat, {2, 4}, {5, 4}, {}, {2, 3}, 0}};
  Resolved r = resolve(concat, {3, 1});
  EXPECT_EQ(r.source, 1);
  EXPECT_EQ(r.coords, (Ints{1, 1}));
  IndexChain gather = {Transform{K::kGather, {4, 3}, {4, 2}, {2, 0}, {2}, 1}};
  EXPECT_EQ(resolve(gather, {3, 0}).coords, (Ints{3, 2}));
}

TEST(HwyBackendTest, RowReductionProgram) {
  // x[2,5]; out0 = x - mean(row) (per element), out1 = max(row) (per row).
  FusedProgram p;
  p.dims = {2, 5};
  p.row_mode = true;
  p.input_dims = {{2, 5}};
  p.output_dims = {{2, 5}, {2, 1}};
  p.loads.push_back(ProgramLoad{{0}, true, 0, {5, 1}, {}, 0});
  p.code = {ProgramInstr{InstrKind::kLoad, ScalarOp::kAdd, 0},
            ProgramInstr{InstrKind::kReduce, ScalarOp::kAdd, 0, -1, -1, 0, ReduceCombiner::kSum, true},
            ProgramInstr{InstrKind::kOp, ScalarOp::kSub, 0, 1},
            ProgramInstr{InstrKind::kReduce, ScalarOp::kAdd, 0, -1, -1, 0, ReduceCombiner::kMax, false}};
  p.stores = {{2, 0, false}, {3, 1, true}};
  auto compiled = highway_backend().compile(p);
  ASSERT_TRUE(compiled.is_ok()) << compiled.status().message();
  Tensor x = Tensor::from_vector<float>({2, 5}, {1, 2, 3, 4, 5, -1, 7, 0, 2, 2});
  Tensor y0 = Tensor::zeros(DType::kF32, {2, 5}).value();
  Tensor y1 = Tensor::zeros(DType::kF32, {2, 1}).value();
  std::vector<const Tensor*> in = {&x};
  std::vector<Tensor*> out = {&y0, &y1};
  ASSERT_TRUE((*compiled)->run(in, out).is_ok());
  const float want0[] = {-2, -1, 0, 1, 2, -3, 5, -2, 0, 0};  // row means 3 and 2
  for (int i = 0; i < 10; ++i) EXPECT_FLOAT_EQ(y0.data<float>()[i], want0[i]) << i;
  EXPECT_FLOAT_EQ(y1.data<float>()[0], 5);
  EXPECT_FLOAT_EQ(y1.data<float>()[1], 7);
}

// Runs `p` (one output, f32) on `inputs` and returns the output's values.
std::vector<float> run_program(const FusedProgram& p, const std::vector<const Tensor*>& inputs) {
  auto compiled = highway_backend().compile(p);
  EXPECT_TRUE(compiled.is_ok()) << compiled.status().message();
  if (!compiled.is_ok()) return {};
  Tensor y = Tensor::zeros(DType::kF32, p.output_dims[0]).value();
  std::vector<Tensor*> out = {&y};
  EXPECT_TRUE((*compiled)->run(inputs, out).is_ok());
  return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
}

Tensor iota(const Ints& dims, float scale) {
  Tensor t = Tensor::zeros(DType::kF32, dims).value();
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i % 1000) * scale - 3;
  return t;
}

TEST(HwyBackendTest, PerChannelConstantOfABlockedTensor) {
  // x[1,4,H,W,C] * a[1,4,1,1,C]: a repeats its C values of one channel block over H x W (a
  // periodic load). H x W x 16 = 2304 / 1600 / 784 / 400 elements: tiles of 1024 that stay in
  // one block, cross two, or see several (the group is shorter than a tile: each stretch is
  // filled from its own block's pattern). C = 12 does not divide a tile, so tiles start inside
  // a pattern (phases 4 and 8).
  for (const int64_t c : {16, 12}) {
    for (const Ints& hw : {Ints{12, 12}, Ints{10, 10}, Ints{7, 7}, Ints{5, 5}}) {
      SCOPED_TRACE(str_cat("C ", c, ", H x W ", hw[0], "x", hw[1]));
      const Ints dims = {1, 4, hw[0], hw[1], c};
      FusedProgram p;
      p.dims = dims;
      p.input_dims = {dims, {1, 4, 1, 1, c}};
      p.output_dims = {dims};
      p.loads.push_back(ProgramLoad{{0}, true, 0, {0, hw[0] * hw[1] * c, hw[1] * c, c, 1}, {}, 0});
      p.loads.push_back(ProgramLoad{{1}, true, 0, {0, c, 0, 0, 1}, {}, 0});
      p.code = {ProgramInstr{InstrKind::kLoad, ScalarOp::kAdd, 0}, ProgramInstr{InstrKind::kLoad, ScalarOp::kAdd, 1},
                ProgramInstr{InstrKind::kOp, ScalarOp::kMul, 0, 1}};
      p.stores = {{2, 0, false}};
      const Tensor x = iota(dims, 0.01f), a = iota({1, 4, 1, 1, c}, 0.1f);
      const std::vector<float> y = run_program(p, {&x, &a});
      ASSERT_EQ(static_cast<int64_t>(y.size()), x.numel());
      const int64_t plane = hw[0] * hw[1] * c;
      for (int64_t i = 0; i < x.numel(); ++i) {
        const float want = x.data<float>()[i] * a.data<float>()[(i / plane) * c + i % c];
        ASSERT_EQ(y[i], want) << "element " << i;
      }
    }
  }
}

// relu(x * s + t) with s and t per-channel constants of a blocked tensor whose block is one
// vector (a BatchNorm + ReLU no conv absorbed): the channel-affine path, bit for bit the graph's
// Mul, Add and Max (NaN stays NaN, -0 stays -0). x read in place, or as a Concat of two sources
// (runs; tiles straddling them are copied); maps whose channel block is longer than a tile
// (12x12), shorter (7x7, 5x5), and with and without the ReLU.
TEST(HwyBackendTest, PerChannelAffineOfABlockedTensorRunsPerVector) {
  const int64_t c = static_cast<int64_t>(hwy_cpu::channel_affine_lanes());
  for (const bool concat : {false, true}) {
    for (const bool relu : {true, false}) {
      for (const Ints& hw : {Ints{12, 12}, Ints{7, 7}, Ints{5, 5}}) {
        SCOPED_TRACE(str_cat(concat ? "concat" : "in place", relu ? ", relu" : "", ", H x W ", hw[0], "x", hw[1]));
        const int64_t plane = hw[0] * hw[1] * c;
        const Ints dims = {1, 5, hw[0], hw[1], c}, first = {1, 2, hw[0], hw[1], c}, second = {1, 3, hw[0], hw[1], c};
        Tensor x = iota(dims, 0.01f);
        x.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
        x.data<float>()[plane + 5] = -std::numeric_limits<float>::infinity();
        x.data<float>()[2 * plane + 1] = -0.0f;
        const Tensor s = iota({1, 5, 1, 1, c}, 0.1f), t = iota({1, 5, 1, 1, c}, 0.03f);
        Tensor x0 = Tensor::zeros(DType::kF32, first).value(), x1 = Tensor::zeros(DType::kF32, second).value();
        std::copy_n(x.data<float>(), x0.numel(), x0.data<float>());
        std::copy_n(x.data<float>() + x0.numel(), x1.numel(), x1.data<float>());
        FusedProgram p;
        p.dims = dims;
        p.output_dims = {dims};
        std::vector<const Tensor*> inputs;
        if (concat) {
          p.input_dims = {first, second, s.dims(), t.dims()};
          ProgramLoad table{{0, 1}, false, 0, {}, {}, 0};
          for (int64_t i = 0; i < x.numel(); ++i) {
            table.table.push_back(i < x0.numel() ? i : (int64_t{1} << 48) | (i - x0.numel()));
          }
          p.loads.push_back(std::move(table));
          p.loads.push_back(ProgramLoad{{2}, true, 0, {0, c, 0, 0, 1}, {}, 0});
          p.loads.push_back(ProgramLoad{{3}, true, 0, {0, c, 0, 0, 1}, {}, 0});
          inputs = {&x0, &x1, &s, &t};
        } else {
          p.input_dims = {dims, s.dims(), t.dims()};
          p.loads.push_back(ProgramLoad{{0}, true, 0, {0, plane, hw[1] * c, c, 1}, {}, 0});
          p.loads.push_back(ProgramLoad{{1}, true, 0, {0, c, 0, 0, 1}, {}, 0});
          p.loads.push_back(ProgramLoad{{2}, true, 0, {0, c, 0, 0, 1}, {}, 0});
          inputs = {&x, &s, &t};
        }
        p.code = {ProgramInstr{InstrKind::kLoad, ScalarOp::kAdd, 0}, ProgramInstr{InstrKind::kLoad, ScalarOp::kAdd, 1},
                  ProgramInstr{InstrKind::kLoad, ScalarOp::kAdd, 2}, ProgramInstr{InstrKind::kOp, ScalarOp::kMul, 1, 0},
                  ProgramInstr{InstrKind::kOp, ScalarOp::kAdd, 3, 2}};
        if (relu) {
          p.code.push_back(ProgramInstr{InstrKind::kConst, ScalarOp::kAdd, -1, -1, -1, 0.0f});
          p.code.push_back(ProgramInstr{InstrKind::kOp, ScalarOp::kMax, 4, 5});
        }
        p.stores = {{static_cast<int32_t>(p.code.size()) - 1, 0, false}};
        auto compiled = highway_backend().compile(p);
        ASSERT_TRUE(compiled.is_ok()) << compiled.status().message();
        EXPECT_EQ((*compiled)->mode(), "channel affine");
        if (relu) {  // max(y, -0) keeps -0 for a negative y: the interpreter's, not this path's
          FusedProgram minus = p;
          minus.code[5].value = -0.0f;
          auto other = highway_backend().compile(minus);
          ASSERT_TRUE(other.is_ok());
          EXPECT_EQ((*other)->mode(), "registers");
        }
        Tensor y = Tensor::zeros(DType::kF32, dims).value();
        std::vector<Tensor*> out = {&y};
        ASSERT_TRUE((*compiled)->run(inputs, out).is_ok());
        for (int64_t i = 0; i < x.numel(); ++i) {
          const int64_t ch = (i / plane) * c + i % c;
          volatile float product = x.data<float>()[i] * s.data<float>()[ch];  // rounded, as the graph's Mul
          float want = product + t.data<float>()[ch];
          if (relu && want < 0.0f) want = 0.0f;
          const float got = y.data<float>()[i];
          if (std::isnan(want)) {
            ASSERT_TRUE(std::isnan(got)) << "element " << i;
          } else {
            ASSERT_EQ(got, want) << "element " << i;
            ASSERT_EQ(std::signbit(got), std::signbit(want)) << "element " << i;
          }
        }
      }
    }
  }
}

TEST(HwyBackendTest, TablesAsRunsAndElementByElement) {
  // out[i] = table entry i of three sources: long runs (a Concat's halves, a Pad's zero rows)
  // and single elements (a Gather reading every other element backwards).
  const int64_t n = 5000;
  const Tensor s0 = iota({3000}, 1), s1 = iota({3000}, -1);
  for (const char* kind : {"concat", "pad", "gather"}) {
    FusedProgram p;
    p.dims = {n};
    p.input_dims = {{3000}, {3000}};
    p.output_dims = {{n}};
    ProgramLoad load{{0, 1}, false, 0, {}, {}, 0.5f};
    std::vector<float> want;
    for (int64_t i = 0; i < n; ++i) {
      int64_t e = -1;
      if (kind == std::string("concat")) e = i < 2000 ? i + 7 : (int64_t{1} << 48) | (i - 2000);
      if (kind == std::string("pad")) e = (i / 100) % 3 == 0 ? -1 : i / 2;
      if (kind == std::string("gather")) e = 2 * ((n - i) % 1500);
      load.table.push_back(e);
      want.push_back(e < 0 ? 0.5f : ((e >> 48) ? s1 : s0).data<float>()[e & ((int64_t{1} << 48) - 1)]);
    }
    p.loads.push_back(std::move(load));
    p.code = {ProgramInstr{InstrKind::kLoad, ScalarOp::kAdd, 0}, ProgramInstr{InstrKind::kOp, ScalarOp::kNeg, 0}};
    p.stores = {{1, 0, false}};
    const std::vector<float> y = run_program(p, {&s0, &s1});
    ASSERT_EQ(static_cast<int64_t>(y.size()), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], -want[i]) << kind << " element " << i;
  }
}

TEST(HwyBackendTest, MalformedProgramIsAnInternalError) {
  FusedProgram p;
  p.dims = {4};
  p.input_dims = {{3}};
  p.output_dims = {{4}};
  p.loads.push_back(ProgramLoad{{0}, true, 0, {1}, {}, 0});  // reads x[3], past the end
  p.code = {ProgramInstr{InstrKind::kLoad, ScalarOp::kAdd, 0}};
  p.stores = {{0, 0, false}};
  EXPECT_FALSE(highway_backend().compile(p).is_ok());
}

}  // namespace
}  // namespace opfuse::codegen
