// Vector evaluation of ScalarOps over float arrays, shared by the elementwise kernel
// (hwy_elementwise.cc) and the fused-program executor (kernels/cpu/hwy_executor.cc). Included inside
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

// Lane by lane through libm, for the ops without a vector form (fmod, general pow, tan, the
// inverse and hyperbolic trigonometric functions, sin/cos outside Highway's range): the vectors go
// through small aligned buffers.
template <class G>
HWY_INLINE VF Lanewise(VF a, VF b, G g) {
  const DF d;
  alignas(64) float ta[kTmp], tb[kTmp];
  hn::Store(a, d, ta);
  hn::Store(b, d, tb);
  for (size_t i = 0; i < hn::Lanes(d); ++i) ta[i] = g(ta[i], tb[i]);
  return hn::Load(d, ta);
}

HWY_INLINE VF Mask01(DF d, hn::Mask<DF> m) { return hn::IfThenElseZero(m, hn::Set(d, 1.0f)); }
HWY_INLINE hn::Mask<DF> Truthy(DF d, VF v) { return hn::Ne(v, hn::Zero(d)); }

// sin/cos: Highway's versions are accurate on [-39000, 39000]; vectors with a lane outside
// (or inf/NaN) go through libm lane by lane.
template <bool kSin>
HWY_INLINE VF SinCos(DF d, VF x) {
  if (hn::AllTrue(d, hn::Le(hn::Abs(x), hn::Set(d, 39000.0f)))) return kSin ? hn::Sin(d, x) : hn::Cos(d, x);
  return Lanewise(x, x, [](float v, float) { return kSin ? std::sin(v) : std::cos(v); });
}

// The one definition of every ScalarOp on vectors: calls f(fn, arity) with fn(a, b, c) -> VF the
// op's vector function (unary ops ignore b and c) and arity a std::integral_constant, so each
// caller gets one loop per op with the op inlined: ApplyOp below over arrays (the elementwise
// kernel, the tiled executor) and the executor's per-vector register mode.
template <class F>
HWY_INLINE void VisitOp(const VInstr& in, F&& f) {
  const DF d;
  using A1 = std::integral_constant<int, 1>;
  using A2 = std::integral_constant<int, 2>;
  using A3 = std::integral_constant<int, 3>;
  const auto u = [&](auto g) HWY_ATTR { f([g](VF x, VF, VF) HWY_ATTR { return g(x); }, A1{}); };
  const auto b = [&](auto g) HWY_ATTR { f([g](VF x, VF y, VF) HWY_ATTR { return g(x, y); }, A2{}); };
  switch (in.op) {
    case ScalarOp::kNeg: return u([](VF x) HWY_ATTR { return hn::Neg(x); });
    case ScalarOp::kAbs: return u([](VF x) HWY_ATTR { return hn::Abs(x); });
    case ScalarOp::kExp: return u([d](VF x) HWY_ATTR { return SafeExp(d, x); });
    case ScalarOp::kLog: return u([d](VF x) HWY_ATTR { return SafeLog(d, x); });
    case ScalarOp::kSqrt: return u([](VF x) HWY_ATTR { return hn::Sqrt(x); });
    case ScalarOp::kReciprocal: return u([d](VF x) HWY_ATTR { return hn::Div(hn::Set(d, 1.0f), x); });
    case ScalarOp::kTanh: return u([d](VF x) HWY_ATTR { return SafeTanh(d, x); });
    case ScalarOp::kErf: return u([d](VF x) HWY_ATTR { return Erf(d, x); });
    case ScalarOp::kSigmoid: return u([d](VF x) HWY_ATTR { return Sigmoid(d, x); });
    case ScalarOp::kFloor: return u([](VF x) HWY_ATTR { return hn::Floor(x); });
    case ScalarOp::kCeil: return u([](VF x) HWY_ATTR { return hn::Ceil(x); });
    case ScalarOp::kRound: return u([](VF x) HWY_ATTR { return hn::Round(x); });
    case ScalarOp::kSign:  // keeps NaN and signed zero, like the reference
      return u([d](VF x) HWY_ATTR {
        const VF one = hn::Set(d, 1.0f), zero = hn::Zero(d);
        return hn::IfThenElse(hn::Gt(x, zero), one, hn::IfThenElse(hn::Lt(x, zero), hn::Neg(one), x));
      });
    case ScalarOp::kNot: return u([d](VF x) HWY_ATTR { return Mask01(d, hn::Eq(x, hn::Zero(d))); });
    case ScalarOp::kIsNaN: return u([d](VF x) HWY_ATTR { return Mask01(d, hn::IsNaN(x)); });
    case ScalarOp::kSin: return u([d](VF x) HWY_ATTR { return SinCos<true>(d, x); });
    case ScalarOp::kCos: return u([d](VF x) HWY_ATTR { return SinCos<false>(d, x); });
    // No vector forms yet (rare in models): libm per lane, the reference's float overloads.
    case ScalarOp::kTan: return u([](VF x) HWY_ATTR { return Lanewise(x, x, [](float v, float) { return std::tan(v); }); });
    case ScalarOp::kAsin: return u([](VF x) HWY_ATTR { return Lanewise(x, x, [](float v, float) { return std::asin(v); }); });
    case ScalarOp::kAcos: return u([](VF x) HWY_ATTR { return Lanewise(x, x, [](float v, float) { return std::acos(v); }); });
    case ScalarOp::kAtan: return u([](VF x) HWY_ATTR { return Lanewise(x, x, [](float v, float) { return std::atan(v); }); });
    case ScalarOp::kSinh: return u([](VF x) HWY_ATTR { return Lanewise(x, x, [](float v, float) { return std::sinh(v); }); });
    case ScalarOp::kCosh: return u([](VF x) HWY_ATTR { return Lanewise(x, x, [](float v, float) { return std::cosh(v); }); });
    case ScalarOp::kAsinh: return u([](VF x) HWY_ATTR { return Lanewise(x, x, [](float v, float) { return std::asinh(v); }); });
    case ScalarOp::kAcosh: return u([](VF x) HWY_ATTR { return Lanewise(x, x, [](float v, float) { return std::acosh(v); }); });
    case ScalarOp::kAtanh: return u([](VF x) HWY_ATTR { return Lanewise(x, x, [](float v, float) { return std::atanh(v); }); });
    case ScalarOp::kAdd: return b([](VF x, VF y) HWY_ATTR { return hn::Add(x, y); });
    case ScalarOp::kSub: return b([](VF x, VF y) HWY_ATTR { return hn::Sub(x, y); });
    case ScalarOp::kMul: return b([](VF x, VF y) HWY_ATTR { return hn::Mul(x, y); });
    case ScalarOp::kDiv: return b([](VF x, VF y) HWY_ATTR { return hn::Div(x, y); });
    case ScalarOp::kPow:
      // A constant exponent with an exact cheaper form (x^2 = x*x is what powf returns; x^3 is
      // within 1.5 ulp); other exponents use libm's powf per element.
      if (in.pow_exp && in.value == 1.0f) return u([](VF x) HWY_ATTR { return x; });
      if (in.pow_exp && in.value == 2.0f) return u([](VF x) HWY_ATTR { return hn::Mul(x, x); });
      if (in.pow_exp && in.value == 3.0f) return u([](VF x) HWY_ATTR { return hn::Mul(hn::Mul(x, x), x); });
      if (in.pow_exp && in.value == -1.0f) return u([d](VF x) HWY_ATTR { return hn::Div(hn::Set(d, 1.0f), x); });
      return b([](VF x, VF y) HWY_ATTR { return Lanewise(x, y, [](float p, float q) { return std::pow(p, q); }); });
    case ScalarOp::kMax:  // y NaN -> y; x < y -> y; else x (so x NaN -> x), as the reference
      return b([](VF x, VF y) HWY_ATTR { return hn::IfThenElse(hn::IsNaN(y), y, hn::IfThenElse(hn::Lt(x, y), y, x)); });
    case ScalarOp::kMin:
      return b([](VF x, VF y) HWY_ATTR { return hn::IfThenElse(hn::IsNaN(y), y, hn::IfThenElse(hn::Lt(y, x), y, x)); });
    case ScalarOp::kMod:  // floored: the result takes the divisor's sign
      return b([](VF x, VF y) HWY_ATTR {
        return Lanewise(x, y, [](float p, float q) {
          const float r = std::fmod(p, q);
          return (r != 0 && ((r < 0) != (q < 0))) ? r + q : r;
        });
      });
    case ScalarOp::kFMod:
      return b([](VF x, VF y) HWY_ATTR { return Lanewise(x, y, [](float p, float q) { return std::fmod(p, q); }); });
    case ScalarOp::kLess: return b([d](VF x, VF y) HWY_ATTR { return Mask01(d, hn::Lt(x, y)); });
    case ScalarOp::kLessEqual: return b([d](VF x, VF y) HWY_ATTR { return Mask01(d, hn::Le(x, y)); });
    case ScalarOp::kGreater: return b([d](VF x, VF y) HWY_ATTR { return Mask01(d, hn::Gt(x, y)); });
    case ScalarOp::kGreaterEqual: return b([d](VF x, VF y) HWY_ATTR { return Mask01(d, hn::Ge(x, y)); });
    case ScalarOp::kEqual: return b([d](VF x, VF y) HWY_ATTR { return Mask01(d, hn::Eq(x, y)); });
    case ScalarOp::kAnd:
      return b([d](VF x, VF y) HWY_ATTR { return Mask01(d, hn::And(Truthy(d, x), Truthy(d, y))); });
    case ScalarOp::kOr:
      return b([d](VF x, VF y) HWY_ATTR { return Mask01(d, hn::Or(Truthy(d, x), Truthy(d, y))); });
    case ScalarOp::kXor:
      return b([d](VF x, VF y) HWY_ATTR { return Mask01(d, hn::Xor(Truthy(d, x), Truthy(d, y))); });
    case ScalarOp::kSelect:
      return f([d](VF c, VF t, VF e) HWY_ATTR { return hn::IfThenElse(Truthy(d, c), t, e); }, A3{});
    default: return;
  }
}

// One computing instruction (not an argument or constant) over n elements into `o`; `vals[k]` is
// the buffer of instruction k. Shared by the elementwise kernel and the fused-program executor.
inline void ApplyOp(const VInstr& in, const float* const* vals, float* o, size_t n) {
  VisitOp(in, [&](auto fn, auto arity) HWY_ATTR {
    constexpr int kArity = decltype(arity)::value;
    const float* a = vals[in.a];
    MapN<kArity>(a, kArity >= 2 ? vals[in.b] : a, kArity >= 3 ? vals[in.c] : a, o, n, fn);
  });
}
