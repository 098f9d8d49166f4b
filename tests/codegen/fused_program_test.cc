// FusedProgram pieces with hand-computed expectations: index-map composition (affine and not),
// element resolution through Pad/Concat/Gather, and the Highway backend on a hand-written
// program with a row reduction.
#include <gtest/gtest.h>

#include "codegen/fused_program.h"
#include "codegen/index_map.h"
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
