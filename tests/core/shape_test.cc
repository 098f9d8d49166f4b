#include "core/shape.h"

#include <gtest/gtest.h>

namespace opfuse {
namespace {

TEST(ShapeTest, BroadcastFollowsNumpyRules) {
  auto r = broadcast_dims({{2, 3, 4, 5}, {5}, {1, 4, 1}}, "Add");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, (std::vector<int64_t>{2, 3, 4, 5}));
  auto scalar = broadcast_dims({{}, {3}}, "Mul");
  ASSERT_TRUE(scalar.is_ok());
  EXPECT_EQ(*scalar, (std::vector<int64_t>{3}));
  auto zero = broadcast_dims({{0, 3}, {1, 3}}, "Mul");
  ASSERT_TRUE(zero.is_ok());
  EXPECT_EQ(*zero, (std::vector<int64_t>{0, 3}));
}

TEST(ShapeTest, IncompatibleBroadcastNamesShapes) {
  auto r = broadcast_dims({{2, 3}, {4}}, "node 'add1'");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("node 'add1'"), std::string::npos);
  EXPECT_NE(r.status().message().find("[2,3]"), std::string::npos);
  EXPECT_NE(r.status().message().find("[4]"), std::string::npos);
}

TEST(ShapeTest, SymbolicBroadcast) {
  Shape a = {Dim::symbol("batch"), Dim(1), Dim(768)};
  Shape b = {Dim(128), Dim(1)};
  auto r = broadcast_shapes({a, b}, "Add");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(shape_to_string(*r), "[batch,128,768]");
  auto u = broadcast_shapes({{Dim::unknown(), Dim(3)}, {Dim(5), Dim(3)}}, "Add");
  ASSERT_TRUE(u.is_ok());
  EXPECT_EQ(shape_to_string(*u), "[5,3]");
  auto bad = broadcast_shapes({{Dim(2)}, {Dim(3)}}, "Add");
  EXPECT_FALSE(bad.is_ok());
}

TEST(ShapeTest, CheckedNumelCatchesOverflowAndNegativeDims) {
  EXPECT_EQ(*checked_numel({2, 3, 4}, "t"), 24);
  EXPECT_EQ(*checked_numel({}, "t"), 1);
  EXPECT_FALSE(checked_numel({1LL << 40, 1LL << 40}, "t").is_ok());
  EXPECT_FALSE(checked_numel({-1, 3}, "t").is_ok());
}

TEST(ShapeTest, NormalizeAxis) {
  EXPECT_EQ(*normalize_axis(-1, 4, "a"), 3);
  EXPECT_EQ(*normalize_axis(0, 4, "a"), 0);
  EXPECT_FALSE(normalize_axis(4, 4, "a").is_ok());
  EXPECT_FALSE(normalize_axis(-5, 4, "a").is_ok());
}

}  // namespace
}  // namespace opfuse
