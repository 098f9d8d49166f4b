// Element types. Names follow numpy-ish short spellings used in the text IR ("f32", "i64", "bool").
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <type_traits>

namespace opfuse {

enum class DType : uint8_t {
  kUndefined,
  kF32,
  kF16,
  kF64,
  kI64,
  kI32,
  kI16,
  kI8,
  kU64,
  kU32,
  kU16,
  kU8,
  kBool,
};

// Bytes per element (0 for kUndefined).
size_t dtype_size(DType t);
// "f32", "i64", "bool", ... ("undefined" for kUndefined).
std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view name);
inline bool is_float(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kF64; }
inline bool is_signed_int(DType t) {
  return t == DType::kI64 || t == DType::kI32 || t == DType::kI16 || t == DType::kI8;
}
inline bool is_unsigned_int(DType t) {
  return t == DType::kU64 || t == DType::kU32 || t == DType::kU16 || t == DType::kU8;
}
inline bool is_integer(DType t) { return is_signed_int(t) || is_unsigned_int(t); }

// IEEE half precision stored as its 16 raw bits.
struct Half {
  uint16_t bits = 0;
};
float half_to_float(Half h);
Half float_to_half(float f);  // round to nearest even

// Maps a C++ type to its DType (used by typed tensor accessors).
template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kF32; };
template <> struct DTypeOf<Half> { static constexpr DType value = DType::kF16; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kF64; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kI64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kI32; };
template <> struct DTypeOf<int16_t> { static constexpr DType value = DType::kI16; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::kI8; };
template <> struct DTypeOf<uint64_t> { static constexpr DType value = DType::kU64; };
template <> struct DTypeOf<uint32_t> { static constexpr DType value = DType::kU32; };
template <> struct DTypeOf<uint16_t> { static constexpr DType value = DType::kU16; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::kU8; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::kBool; };

// One element as a double, and a double stored as an element (Half as a number; bool as != 0;
// float -> integer truncates toward zero, NaN becomes 0), for dtype-generic kernels.
template <typename T>
double element_to_double(T v) {
  if constexpr (std::is_same_v<T, Half>) {
    return half_to_float(v);
  } else {
    return static_cast<double>(v);
  }
}
template <typename T>
T element_from_double(double v) {
  if constexpr (std::is_same_v<T, Half>) {
    return float_to_half(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_integral_v<T>) {
    if (v != v) return T{0};  // NaN
    return static_cast<T>(static_cast<int64_t>(v));
  } else {
    return static_cast<T>(v);
  }
}

// Calls fn(T{}) with T the C++ type of `t` (bool for kBool, Half for kF16). Lets a kernel be
// written once as a template and dispatched over dtypes without a switch in every kernel.
template <typename Fn>
decltype(auto) visit_dtype(DType t, Fn&& fn) {
  switch (t) {
    case DType::kF32: return fn(float{});
    case DType::kF16: return fn(Half{});
    case DType::kF64: return fn(double{});
    case DType::kI64: return fn(int64_t{});
    case DType::kI32: return fn(int32_t{});
    case DType::kI16: return fn(int16_t{});
    case DType::kI8: return fn(int8_t{});
    case DType::kU64: return fn(uint64_t{});
    case DType::kU32: return fn(uint32_t{});
    case DType::kU16: return fn(uint16_t{});
    case DType::kU8: return fn(uint8_t{});
    case DType::kBool: return fn(bool{});
    case DType::kUndefined: break;
  }
  return fn(float{});  // unreachable for valid tensors; callers check dtype first
}

}  // namespace opfuse
