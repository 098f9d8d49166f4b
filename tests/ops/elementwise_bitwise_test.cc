// BitShift: numpy.left_shift / right_shift on the same unsigned inputs, broadcasting, shifts
// past the type's width (0, as numpy) and bad inputs.
#include "tensor_test_util.h"

namespace opfuse::testing {
namespace {

Attributes direction(const char* d) { return {{"direction", AttrValue(std::string(d))}}; }

TEST(BitShiftOp, LeftAndRightWithBroadcast) {
  auto left = run_node("BitShift", {in(tv<uint8_t>({2, 3}, {16, 4, 1, 255, 2, 3})), in(tv<uint8_t>({3}, {1, 2, 7}))},
                       direction("LEFT"));
  ASSERT_TRUE(left.run.is_ok()) << left.run.message();
  EXPECT_EQ(left.shape(), "[2,3]");
  expect_tensor<uint8_t>(left.outputs[0], {2, 3}, {32, 16, 128, 254, 8, 128});
  auto right = run_node("BitShift", {in(tv<uint64_t>({3}, {~uint64_t{0}, 1024, 7})), in(tv<uint64_t>({1}, {63}))},
                        direction("RIGHT"));
  ASSERT_TRUE(right.run.is_ok()) << right.run.message();
  expect_tensor<uint64_t>(right.outputs[0], {3}, {1, 0, 0});
  auto column = run_node("BitShift", {in(tv<uint32_t>({2, 1}, {1, 3})), in(tv<uint32_t>({1, 2}, {0, 31}))},
                         direction("LEFT"));
  expect_tensor<uint32_t>(column.outputs[0], {2, 2}, {1, 2147483648u, 3, 2147483648u});
}

TEST(BitShiftOp, ShiftsPastTheWidthGiveZero) {
  auto r = run_node("BitShift", {in(tv<uint16_t>({3}, {1, 65535, 9})), in(tv<uint16_t>({3}, {16, 17, 1000}))},
                    direction("LEFT"));
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  expect_tensor<uint16_t>(r.outputs[0], {3}, {0, 0, 0});
}

TEST(BitShiftOp, BadInputsAreUserErrors) {
  expect_user_error(run_node("BitShift", {in(tv<int32_t>({1}, {1})), in(tv<int32_t>({1}, {1}))}, direction("LEFT")).build,
                    {"node 'n'", "i32", "unsigned"});
  expect_user_error(run_node("BitShift", {in(tv<uint8_t>({1}, {1})), in(tv<uint8_t>({1}, {1}))}, direction("UP")).build,
                    {"direction 'UP'"});
  expect_user_error(run_node("BitShift", {in(tv<uint8_t>({2}, {1, 1})), in(tv<uint8_t>({3}, {1, 1, 1}))},
                             direction("LEFT")).build,
                    {"node 'n'", "[2]", "[3]"});
  expect_user_error(run_node("BitShift", {in(tv<uint8_t>({1}, {1})), in(tv<uint16_t>({1}, {1}))}, direction("LEFT")).build,
                    {"u8", "u16"});
}

}  // namespace
}  // namespace opfuse::testing
