// The per-instruction inner loops of the scalar-expression evaluator (ops/scalar_eval.cc): one
// ScalarOp applied to a chunk of n elements in the compute type T (float, double or int64_t).
// Each case is a plain loop over arrays so the compiler can vectorise it; the switch over the
// opcode runs once per chunk, not once per element.
//
// Integer semantics: arithmetic wraps (done in uint64 so overflow is defined), Div truncates
// toward zero, Mod follows the divisor's sign (Python), FMod the dividend's (C). Division by zero
// and INT64_MIN / -1, which would trap, give 0 and wrap respectively: ONNX leaves them undefined
// and a kernel must not crash on user data.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/scalar_expr.h"

namespace opfuse::ew {

// double -> int64 without undefined behaviour: NaN is 0, out of range saturates.
inline int64_t saturating_to_int(double v) {
  if (v != v) return 0;
  if (v >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
  if (v <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

// A compile-time constant converted to the compute type.
template <typename T>
T from_const(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    return saturating_to_int(v);
  }
}

inline int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t wrap_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
inline int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
inline int64_t int_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return wrap_sub(0, a);
  return a / b;  // C++ truncates toward zero, as ONNX integer Div does
}
inline int64_t int_fmod(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  return a % b;
}
inline int64_t int_mod(int64_t a, int64_t b) {
  const int64_t r = int_fmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
inline int64_t int_pow(int64_t base, int64_t exponent) {
  if (exponent < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exponent & 1) ? -1 : 1;
    return 0;  // |base| >= 2: the true value truncates to 0 (base 0 has no defined answer)
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  for (uint64_t e = static_cast<uint64_t>(exponent); e != 0; e >>= 1) {
    if (e & 1) result *= b;
    b *= b;
  }
  return static_cast<int64_t>(result);
}

template <typename T>
T float_mod(T a, T b) {  // floored modulo: the result takes the divisor's sign
  T r = std::fmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

// Applies a double-precision function to an integer (ops like Exp on integer data, which ONNX
// does not define but a fused expression might still contain).
template <typename F>
int64_t via_double(int64_t a, F f) {
  return saturating_to_int(f(static_cast<double>(a)));
}

template <typename T, typename F>
inline void map1(const T* a, T* out, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i]);
}
template <typename T, typename F>
inline void map2(const T* a, const T* b, T* out, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
}

template <typename T>
void apply_unary(ScalarOp op, const T* a, T* out, int64_t n) {
  constexpr bool kFloat = std::is_floating_point_v<T>;
  constexpr T one = T(1), zero = T(0);  // constexpr: the lambdas below read them uncaptured
  switch (op) {
    case ScalarOp::kNeg:
      if constexpr (kFloat) map1(a, out, n, [](T x) { return -x; });
      else map1(a, out, n, [](T x) { return wrap_sub(0, x); });
      return;
    case ScalarOp::kAbs:
      if constexpr (kFloat) map1(a, out, n, [](T x) { return std::fabs(x); });
      else map1(a, out, n, [](T x) { return x < 0 ? wrap_sub(0, x) : x; });
      return;
    case ScalarOp::kReciprocal:
      if constexpr (kFloat) map1(a, out, n, [](T x) { return one / x; });
      else map1(a, out, n, [](T x) { return int_div(1, x); });
      return;
    case ScalarOp::kSigmoid:
      if constexpr (kFloat) map1(a, out, n, [](T x) { return one / (one + std::exp(-x)); });
      else map1(a, out, n, [](T x) { return via_double(x, [](double v) { return 1 / (1 + std::exp(-v)); }); });
      return;
    case ScalarOp::kFloor:
      if constexpr (kFloat) map1(a, out, n, [](T x) { return std::floor(x); });
      else map1(a, out, n, [](T x) { return x; });
      return;
    case ScalarOp::kCeil:
      if constexpr (kFloat) map1(a, out, n, [](T x) { return std::ceil(x); });
      else map1(a, out, n, [](T x) { return x; });
      return;
    case ScalarOp::kRound:  // half to even: nearbyint under the default rounding mode
      if constexpr (kFloat) map1(a, out, n, [](T x) { return std::nearbyint(x); });
      else map1(a, out, n, [](T x) { return x; });
      return;
    case ScalarOp::kSign:  // keeps NaN and signed zero for floats
      map1(a, out, n, [](T x) { return x > zero ? one : (x < zero ? -one : x); });
      return;
    case ScalarOp::kNot:
      map1(a, out, n, [](T x) { return x == zero ? one : zero; });
      return;
    case ScalarOp::kIsNaN:
      map1(a, out, n, [](T x) { return x != x ? one : zero; });
      return;
    default:
      break;
  }
  // Transcendental functions.
  double (*fn)(double) = nullptr;
  switch (op) {
    case ScalarOp::kExp: fn = [](double v) { return std::exp(v); }; break;
    case ScalarOp::kLog: fn = [](double v) { return std::log(v); }; break;
    case ScalarOp::kSqrt: fn = [](double v) { return std::sqrt(v); }; break;
    case ScalarOp::kTanh: fn = [](double v) { return std::tanh(v); }; break;
    case ScalarOp::kErf: fn = [](double v) { return std::erf(v); }; break;
    case ScalarOp::kSin: fn = [](double v) { return std::sin(v); }; break;
    case ScalarOp::kCos: fn = [](double v) { return std::cos(v); }; break;
    case ScalarOp::kTan: fn = [](double v) { return std::tan(v); }; break;
    case ScalarOp::kAsin: fn = [](double v) { return std::asin(v); }; break;
    case ScalarOp::kAcos: fn = [](double v) { return std::acos(v); }; break;
    case ScalarOp::kAtan: fn = [](double v) { return std::atan(v); }; break;
    case ScalarOp::kSinh: fn = [](double v) { return std::sinh(v); }; break;
    case ScalarOp::kCosh: fn = [](double v) { return std::cosh(v); }; break;
    case ScalarOp::kAsinh: fn = [](double v) { return std::asinh(v); }; break;
    case ScalarOp::kAcosh: fn = [](double v) { return std::acosh(v); }; break;
    case ScalarOp::kAtanh: fn = [](double v) { return std::atanh(v); }; break;
    default: break;
  }
  if constexpr (std::is_same_v<T, float>) {
    // Single-precision overloads: much faster than going through double.
    switch (op) {
      case ScalarOp::kExp: map1(a, out, n, [](float x) { return std::exp(x); }); return;
      case ScalarOp::kLog: map1(a, out, n, [](float x) { return std::log(x); }); return;
      case ScalarOp::kSqrt: map1(a, out, n, [](float x) { return std::sqrt(x); }); return;
      case ScalarOp::kTanh: map1(a, out, n, [](float x) { return std::tanh(x); }); return;
      case ScalarOp::kErf: map1(a, out, n, [](float x) { return std::erf(x); }); return;
      case ScalarOp::kSin: map1(a, out, n, [](float x) { return std::sin(x); }); return;
      case ScalarOp::kCos: map1(a, out, n, [](float x) { return std::cos(x); }); return;
      case ScalarOp::kTan: map1(a, out, n, [](float x) { return std::tan(x); }); return;
      case ScalarOp::kAsin: map1(a, out, n, [](float x) { return std::asin(x); }); return;
      case ScalarOp::kAcos: map1(a, out, n, [](float x) { return std::acos(x); }); return;
      case ScalarOp::kAtan: map1(a, out, n, [](float x) { return std::atan(x); }); return;
      case ScalarOp::kSinh: map1(a, out, n, [](float x) { return std::sinh(x); }); return;
      case ScalarOp::kCosh: map1(a, out, n, [](float x) { return std::cosh(x); }); return;
      case ScalarOp::kAsinh: map1(a, out, n, [](float x) { return std::asinh(x); }); return;
      case ScalarOp::kAcosh: map1(a, out, n, [](float x) { return std::acosh(x); }); return;
      case ScalarOp::kAtanh: map1(a, out, n, [](float x) { return std::atanh(x); }); return;
      default: break;
    }
  }
  if (fn == nullptr) {  // not a unary op: the evaluator validated the program, so unreachable
    map1(a, out, n, [](T x) { return x; });
    return;
  }
  if constexpr (kFloat) {
    map1(a, out, n, [fn](T x) { return static_cast<T>(fn(static_cast<double>(x))); });
  } else {
    map1(a, out, n, [fn](T x) { return via_double(x, fn); });
  }
}

template <typename T>
void apply_binary(ScalarOp op, const T* a, const T* b, T* out, int64_t n) {
  constexpr bool kFloat = std::is_floating_point_v<T>;
  constexpr T one = T(1), zero = T(0);  // constexpr: the lambdas below read them uncaptured
  switch (op) {
    case ScalarOp::kAdd:
      if constexpr (kFloat) map2(a, b, out, n, [](T x, T y) { return x + y; });
      else map2(a, b, out, n, wrap_add);
      return;
    case ScalarOp::kSub:
      if constexpr (kFloat) map2(a, b, out, n, [](T x, T y) { return x - y; });
      else map2(a, b, out, n, wrap_sub);
      return;
    case ScalarOp::kMul:
      if constexpr (kFloat) map2(a, b, out, n, [](T x, T y) { return x * y; });
      else map2(a, b, out, n, wrap_mul);
      return;
    case ScalarOp::kDiv:
      if constexpr (kFloat) map2(a, b, out, n, [](T x, T y) { return x / y; });
      else map2(a, b, out, n, int_div);
      return;
    case ScalarOp::kPow:
      if constexpr (kFloat) map2(a, b, out, n, [](T x, T y) { return std::pow(x, y); });
      else map2(a, b, out, n, int_pow);
      return;
    case ScalarOp::kMax:  // NaN-propagating, like numpy.maximum
      map2(a, b, out, n, [](T x, T y) { return y != y ? y : (x < y ? y : x); });
      return;
    case ScalarOp::kMin:
      map2(a, b, out, n, [](T x, T y) { return y != y ? y : (y < x ? y : x); });
      return;
    case ScalarOp::kMod:
      if constexpr (kFloat) map2(a, b, out, n, float_mod<T>);
      else map2(a, b, out, n, int_mod);
      return;
    case ScalarOp::kFMod:
      if constexpr (kFloat) map2(a, b, out, n, [](T x, T y) { return std::fmod(x, y); });
      else map2(a, b, out, n, int_fmod);
      return;
    case ScalarOp::kLess:
      map2(a, b, out, n, [](T x, T y) { return x < y ? one : zero; });
      return;
    case ScalarOp::kLessEqual:
      map2(a, b, out, n, [](T x, T y) { return x <= y ? one : zero; });
      return;
    case ScalarOp::kGreater:
      map2(a, b, out, n, [](T x, T y) { return x > y ? one : zero; });
      return;
    case ScalarOp::kGreaterEqual:
      map2(a, b, out, n, [](T x, T y) { return x >= y ? one : zero; });
      return;
    case ScalarOp::kEqual:
      map2(a, b, out, n, [](T x, T y) { return x == y ? one : zero; });
      return;
    case ScalarOp::kAnd:
      map2(a, b, out, n, [](T x, T y) { return (x != zero && y != zero) ? one : zero; });
      return;
    case ScalarOp::kOr:
      map2(a, b, out, n, [](T x, T y) { return (x != zero || y != zero) ? one : zero; });
      return;
    case ScalarOp::kXor:
      map2(a, b, out, n, [](T x, T y) { return ((x != zero) != (y != zero)) ? one : zero; });
      return;
    default:
      map1(a, out, n, [](T x) { return x; });  // unreachable: the program was validated
      return;
  }
}

template <typename T>
void apply_select(const T* cond, const T* if_true, const T* if_false, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = cond[i] != T(0) ? if_true[i] : if_false[i];
}

}  // namespace opfuse::ew
