// Vector evaluation of ScalarOps over float arrays, shared by the elementwise kernel
// (hwy_elementwise.cc) and the fused-program executor (codegen/hwy_executor.cc). Included inside
// a file's `namespace HWY_NAMESPACE` after hwy_math-inl.h (once per target, like the math), with
// `hn` and VInstr (hwy_vinstr.h) in scope.
// NOLINT(build/header_guard): textual include per Highway target.
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr size_t kTmp = 64;  // floats in a tail buffer: more than any x86 vector holds

// out[i] = f(a[i], b[i], c[i]) over n elements; the tail goes through small aligned buffers so
// no pointer is read or written past n.
template <int kArity, class F>
HWY_INLINE void MapN(const float* a, const float* b, const float* c, float* out, size_t n, F f) {
  const DF d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const VF va = hn::LoadU(d, a + i);
    const VF vb = kArity >= 2 ? hn::LoadU(d, b + i) : va;
    const VF vc = kArity >= 3 ? hn::LoadU(d, c + i) : va;
    hn::StoreU(f(va, vb, vc), d, out + i);
  }
  if (i == n) return;
  alignas(64) float ta[kTmp] = {}, tb[kTmp] = {}, tc[kTmp] = {};
  const size_t rest = n - i;
  std::memcpy(ta, a + i, rest * sizeof(float));
  if (kArity >= 2) std::memcpy(tb, b + i, rest * sizeof(float));
  if (kArity >= 3) std::memcpy(tc, c + i, rest * sizeof(float));
  hn::Store(f(hn::Load(d, ta), hn::Load(d, tb), hn::Load(d, tc)), d, ta);
  std::memcpy(out + i, ta, rest * sizeof(float));
}

template <class F>
HWY_INLINE void Map1(const float* a, float* out, size_t n, F f) {
  MapN<1>(a, a, a, out, n, [&](VF x, VF, VF) HWY_ATTR { return f(x); });
}
template <class F>
HWY_INLINE void Map2(const float* a, const float* b, float* out, size_t n, F f) {
  MapN<2>(a, b, b, out, n, [&](VF x, VF y, VF) HWY_ATTR { return f(x, y); });
}

// sin/cos: Highway's versions are accurate on [-39000, 39000]; vectors with a lane outside
// (or inf/NaN) go through libm lane by lane.
template <bool kSin>
inline void SinCos(const float* a, float* out, size_t n) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF limit = hn::Set(d, 39000.0f);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const VF x = hn::LoadU(d, a + i);
    if (hn::AllTrue(d, hn::Le(hn::Abs(x), limit))) {
      hn::StoreU(kSin ? hn::Sin(d, x) : hn::Cos(d, x), d, out + i);
    } else {
      for (size_t j = i; j < i + N; ++j) out[j] = kSin ? std::sin(a[j]) : std::cos(a[j]);
    }
  }
  for (; i < n; ++i) out[i] = kSin ? std::sin(a[i]) : std::cos(a[i]);
}

HWY_INLINE VF Mask01(DF d, hn::Mask<DF> m) { return hn::IfThenElseZero(m, hn::Set(d, 1.0f)); }
HWY_INLINE hn::Mask<DF> Truthy(DF d, VF v) { return hn::Ne(v, hn::Zero(d)); }

inline void ApplyUnary(const VInstr& in, const float* a, float* o, size_t n) {
  const DF d;
  const VF one = hn::Set(d, 1.0f), zero = hn::Zero(d);
  switch (in.op) {
    case ScalarOp::kNeg: return Map1(a, o, n, [&](VF x) HWY_ATTR { return hn::Neg(x); });
    case ScalarOp::kAbs: return Map1(a, o, n, [&](VF x) HWY_ATTR { return hn::Abs(x); });
    case ScalarOp::kExp: return Map1(a, o, n, [&](VF x) HWY_ATTR { return SafeExp(d, x); });
    case ScalarOp::kLog: return Map1(a, o, n, [&](VF x) HWY_ATTR { return SafeLog(d, x); });
    case ScalarOp::kSqrt: return Map1(a, o, n, [&](VF x) HWY_ATTR { return hn::Sqrt(x); });
    case ScalarOp::kReciprocal: return Map1(a, o, n, [&](VF x) HWY_ATTR { return hn::Div(one, x); });
    case ScalarOp::kTanh: return Map1(a, o, n, [&](VF x) HWY_ATTR { return SafeTanh(d, x); });
    case ScalarOp::kErf: return Map1(a, o, n, [&](VF x) HWY_ATTR { return Erf(d, x); });
    case ScalarOp::kSigmoid: return Map1(a, o, n, [&](VF x) HWY_ATTR { return Sigmoid(d, x); });
    case ScalarOp::kFloor: return Map1(a, o, n, [&](VF x) HWY_ATTR { return hn::Floor(x); });
    case ScalarOp::kCeil: return Map1(a, o, n, [&](VF x) HWY_ATTR { return hn::Ceil(x); });
    case ScalarOp::kRound: return Map1(a, o, n, [&](VF x) HWY_ATTR { return hn::Round(x); });
    case ScalarOp::kSign:  // keeps NaN and signed zero, like the reference
      return Map1(a, o, n, [&](VF x) HWY_ATTR {
        return hn::IfThenElse(hn::Gt(x, zero), one, hn::IfThenElse(hn::Lt(x, zero), hn::Neg(one), x));
      });
    case ScalarOp::kNot:
      return Map1(a, o, n, [&](VF x) HWY_ATTR { return Mask01(d, hn::Eq(x, zero)); });
    case ScalarOp::kIsNaN:
      return Map1(a, o, n, [&](VF x) HWY_ATTR { return Mask01(d, hn::IsNaN(x)); });
    case ScalarOp::kSin: return SinCos<true>(a, o, n);
    case ScalarOp::kCos: return SinCos<false>(a, o, n);
    default: return;
  }
}

// Pow with a constant exponent that has an exact cheaper form (x^2 = x*x is what powf returns;
// x^3 is within 1.5 ulp); other exponents use libm's powf per element.
inline void ApplyPow(const VInstr& in, const float* a, const float* b, float* o, size_t n) {
  const DF d;
  if (in.pow_exp) {
    const float e = in.value;
    if (e == 1.0f) return Map1(a, o, n, [&](VF x) HWY_ATTR { return x; });
    if (e == 2.0f) return Map1(a, o, n, [&](VF x) HWY_ATTR { return hn::Mul(x, x); });
    if (e == 3.0f) return Map1(a, o, n, [&](VF x) HWY_ATTR { return hn::Mul(hn::Mul(x, x), x); });
    if (e == -1.0f) return Map1(a, o, n, [&](VF x) HWY_ATTR { return hn::Div(hn::Set(d, 1.0f), x); });
  }
  for (size_t i = 0; i < n; ++i) o[i] = std::pow(a[i], b[i]);
}

inline void ApplyBinary(const VInstr& in, const float* a, const float* b, float* o, size_t n) {
  const DF d;
  switch (in.op) {
    case ScalarOp::kAdd: return Map2(a, b, o, n, [&](VF x, VF y) HWY_ATTR { return hn::Add(x, y); });
    case ScalarOp::kSub: return Map2(a, b, o, n, [&](VF x, VF y) HWY_ATTR { return hn::Sub(x, y); });
    case ScalarOp::kMul: return Map2(a, b, o, n, [&](VF x, VF y) HWY_ATTR { return hn::Mul(x, y); });
    case ScalarOp::kDiv: return Map2(a, b, o, n, [&](VF x, VF y) HWY_ATTR { return hn::Div(x, y); });
    case ScalarOp::kPow: return ApplyPow(in, a, b, o, n);
    case ScalarOp::kMax:  // y NaN -> y; x < y -> y; else x (so x NaN -> x), as the reference
      return Map2(a, b, o, n, [&](VF x, VF y) HWY_ATTR {
        return hn::IfThenElse(hn::IsNaN(y), y, hn::IfThenElse(hn::Lt(x, y), y, x));
      });
    case ScalarOp::kMin:
      return Map2(a, b, o, n, [&](VF x, VF y) HWY_ATTR {
        return hn::IfThenElse(hn::IsNaN(y), y, hn::IfThenElse(hn::Lt(y, x), y, x));
      });
    case ScalarOp::kMod:  // floored: the result takes the divisor's sign (libm per element)
      for (size_t i = 0; i < n; ++i) {
        const float r = std::fmod(a[i], b[i]);
        o[i] = (r != 0 && ((r < 0) != (b[i] < 0))) ? r + b[i] : r;
      }
      return;
    case ScalarOp::kFMod:
      for (size_t i = 0; i < n; ++i) o[i] = std::fmod(a[i], b[i]);
      return;
    case ScalarOp::kLess:
      return Map2(a, b, o, n, [&](VF x, VF y) HWY_ATTR { return Mask01(d, hn::Lt(x, y)); });
    case ScalarOp::kLessEqual:
      return Map2(a, b, o, n, [&](VF x, VF y) HWY_ATTR { return Mask01(d, hn::Le(x, y)); });
    case ScalarOp::kGreater:
      return Map2(a, b, o, n, [&](VF x, VF y) HWY_ATTR { return Mask01(d, hn::Gt(x, y)); });
    case ScalarOp::kGreaterEqual:
      return Map2(a, b, o, n, [&](VF x, VF y) HWY_ATTR { return Mask01(d, hn::Ge(x, y)); });
    case ScalarOp::kEqual:
      return Map2(a, b, o, n, [&](VF x, VF y) HWY_ATTR { return Mask01(d, hn::Eq(x, y)); });
    case ScalarOp::kAnd:
      return Map2(a, b, o, n, [&](VF x, VF y) HWY_ATTR {
        return Mask01(d, hn::And(Truthy(d, x), Truthy(d, y)));
      });
    case ScalarOp::kOr:
      return Map2(a, b, o, n, [&](VF x, VF y) HWY_ATTR {
        return Mask01(d, hn::Or(Truthy(d, x), Truthy(d, y)));
      });
    case ScalarOp::kXor:
      return Map2(a, b, o, n, [&](VF x, VF y) HWY_ATTR {
        return Mask01(d, hn::Xor(Truthy(d, x), Truthy(d, y)));
      });
    default: return;
  }
}

// One computing instruction (not an argument or constant) over n elements into `o`; `vals[k]` is
// the buffer of instruction k. Shared by the elementwise kernel and the fused-program executor.
inline void ApplyOp(const VInstr& in, const float* const* vals, float* o, size_t n) {
  if (in.op == ScalarOp::kSelect) {
    const DF d;
    MapN<3>(vals[in.a], vals[in.b], vals[in.c], o, n, [&](VF c, VF t, VF f) HWY_ATTR {
      return hn::IfThenElse(Truthy(d, c), t, f);
    });
  } else if (in.b < 0) {
    ApplyUnary(in, vals[in.a], o, n);
  } else {
    ApplyBinary(in, vals[in.a], vals[in.b], o, n);
  }
}
