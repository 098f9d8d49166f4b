#include "core/dtype.h"

#include <array>
#include <cmath>

namespace opfuse {
namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};

constexpr std::array<DTypeInfo, 13> kDTypes = {{
    {DType::kUndefined, "undefined", 0},
    {DType::kF32, "f32", 4},
    {DType::kF16, "f16", 2},
    {DType::kF64, "f64", 8},
    {DType::kI64, "i64", 8},
    {DType::kI32, "i32", 4},
    {DType::kI16, "i16", 2},
    {DType::kI8, "i8", 1},
    {DType::kU64, "u64", 8},
    {DType::kU32, "u32", 4},
    {DType::kU16, "u16", 2},
    {DType::kU8, "u8", 1},
    {DType::kBool, "bool", 1},
}};

}  // namespace

size_t dtype_size(DType t) { return kDTypes[static_cast<size_t>(t)].size; }
std::string_view dtype_name(DType t) { return kDTypes[static_cast<size_t>(t)].name; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& info : kDTypes) {
    if (info.name == name && info.type != DType::kUndefined) return info.type;
  }
  return std::nullopt;
}

float half_to_float(Half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exponent = (h.bits >> 10) & 0x1fu;
  uint32_t mantissa = h.bits & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {  // inf / nan
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {  // normal
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {  // zero
    bits = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      ++e;
      mantissa <<= 1;
    } while ((mantissa & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

Half float_to_half(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return Half{static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u))};
  }
  if (abs >= 0x477ff000u) return Half{static_cast<uint16_t>(sign | 0x7c00u)};  // overflow -> inf
  if (abs < 0x38800000u) {  // result is subnormal or zero
    if (abs < 0x33000000u) return Half{sign};
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14..24
    uint32_t value = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t half_way = 1u << (shift - 1);
    if (rest > half_way || (rest == half_way && (value & 1u))) ++value;
    return Half{static_cast<uint16_t>(sign | value)};
  }
  uint32_t value = ((abs >> 13) - (112u << 10));
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (value & 1u))) ++value;
  return Half{static_cast<uint16_t>(sign | value)};
}

}  // namespace opfuse
