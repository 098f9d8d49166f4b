#include "ir/graph.h"

#include <gtest/gtest.h>

namespace opfuse {
namespace {

TEST(GraphTest, UnknownOpIsAUserErrorNamingTheOp) {
  Graph g;
  Value* x = g.add_input("x", DType::kF32, make_shape({2}));
  auto node = g.add_node("NoSuchOp", {x}, {"y"}, {}, "n1");
  ASSERT_FALSE(node.is_ok());
  EXPECT_EQ(node.status().kind(), ErrorKind::kUser);
  EXPECT_NE(node.status().message().find("NoSuchOp"), std::string::npos);
  EXPECT_NE(node.status().message().find("n1"), std::string::npos);
}

}  // namespace
}  // namespace opfuse
