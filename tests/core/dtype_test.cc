#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace opfuse {
namespace {

TEST(DTypeTest, NamesRoundTrip) {
  for (DType t : {DType::kF32, DType::kF16, DType::kF64, DType::kI64, DType::kI32, DType::kI16,
                  DType::kI8, DType::kU64, DType::kU32, DType::kU16, DType::kU8, DType::kBool}) {
    auto parsed = parse_dtype(dtype_name(t));
    ASSERT_TRUE(parsed.has_value()) << dtype_name(t);
    EXPECT_EQ(*parsed, t);
  }
  EXPECT_FALSE(parse_dtype("f31").has_value());
  EXPECT_FALSE(parse_dtype("undefined").has_value());
  EXPECT_EQ(dtype_size(DType::kF16), 2u);
  EXPECT_EQ(dtype_size(DType::kI64), 8u);
  EXPECT_EQ(dtype_size(DType::kBool), 1u);
}

TEST(DTypeTest, HalfConversionMatchesKnownBitPatterns) {
  // Bit patterns from the IEEE 754 binary16 definition.
  EXPECT_EQ(float_to_half(1.0f).bits, 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f).bits, 0xc000);
  EXPECT_EQ(float_to_half(65504.0f).bits, 0x7bff);          // largest finite
  EXPECT_EQ(float_to_half(1e6f).bits, 0x7c00);              // overflow -> inf
  EXPECT_EQ(float_to_half(5.960464477539063e-8f).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half(0.0f).bits, 0x0000);
  EXPECT_EQ(float_to_half(-0.0f).bits, 0x8000);
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048).bits, 0x3c00);  // tie rounds to even
  EXPECT_EQ(float_to_half(1.0f + 3.0f / 2048).bits, 0x3c02);  // tie rounds to even (up)
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
  EXPECT_EQ(half_to_float(Half{0x3555}), 0.333251953125f);
  EXPECT_EQ(half_to_float(Half{0x0001}), 5.960464477539063e-8f);
  EXPECT_EQ(half_to_float(Half{0xfc00}), -std::numeric_limits<float>::infinity());
}

TEST(DTypeTest, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const Half h{static_cast<uint16_t>(bits)};
    const float f = half_to_float(h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(float_to_half(f).bits, h.bits) << std::hex << bits;
  }
}

}  // namespace
}  // namespace opfuse
