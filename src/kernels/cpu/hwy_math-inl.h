// Vector math shared by the Highway kernels (included once per target by foreach_target.h, hence
// the toggling include guard instead of #pragma once). Highway's contrib math functions are
// accurate inside documented ranges only; these wrappers add what the reference kernels (libm)
// do outside them: IEEE special values, overflow to infinity, NaN propagation. Erf is not in
// Highway at all and is defined here.
#if defined(OPFUSE_KERNELS_CPU_HWY_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef OPFUSE_KERNELS_CPU_HWY_MATH_INL_H_
#undef OPFUSE_KERNELS_CPU_HWY_MATH_INL_H_
#else
#define OPFUSE_KERNELS_CPU_HWY_MATH_INL_H_
#endif

#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// exp(x): Highway's Exp is valid on [-FLT_MAX, 104] (past the overflow point 88.72, where it
// returns inf), so inputs are clamped to [-110, 100] (exp(-110) is 0 in float) to cover -inf
// and +inf too; NaN is passed through.
template <class D, class V>
HWY_INLINE V SafeExp(D d, V x) {
  const V r = hn::Exp(d, hn::Max(hn::Min(x, hn::Set(d, 100.0f)), hn::Set(d, -110.0f)));
  return hn::IfThenElse(hn::IsNaN(x), x, r);
}

// exp(x) for a softmax's terms, x = score - row max (<= 0, or NaN): SafeExp, except that a term
// below FLT_MIN (x < -87.33) is 0 instead of subnormal. Computing a subnormal or underflowing
// result costs a microcode assist per vector on AMD Zen: in BERT-small-shaped attention with a
// padding mask (keys -1e4 below the max) at the AVX2 tier of a Zen 5, the softmax took as long
// as the two products. Such a term is below 2^-126 of the row's largest (which is 1), so neither
// the row sum nor a normal output changes; only outputs that would be subnormal become 0.
template <class D, class V>
HWY_INLINE V SoftmaxExp(D d, V x) {
  const V floor = hn::Set(d, -87.33f);  // exp(-87.33) = 1.18e-38 > FLT_MIN = 1.175e-38
  const V r = hn::Exp(d, hn::Max(x, floor));
  return hn::IfThenElse(hn::IsNaN(x), x, hn::IfThenZeroElse(hn::Lt(x, floor), r));
}

// log(x): Highway's Log covers (0, FLT_MAX]; 0 gives -inf, negatives NaN, inf stays inf.
// Subnormal inputs are scaled by 2^24 first so the exponent extraction sees a normal number.
template <class D, class V>
HWY_INLINE V SafeLog(D d, V x) {
  const V kMinNormal = hn::Set(d, std::numeric_limits<float>::min());
  const auto tiny = hn::Lt(x, kMinNormal);
  const V scaled = hn::IfThenElse(tiny, hn::Mul(x, hn::Set(d, 16777216.0f)), x);
  const V safe = hn::IfThenElse(hn::Gt(scaled, hn::Zero(d)), hn::Min(scaled, hn::Set(d, std::numeric_limits<float>::max())),
                                hn::Set(d, 1.0f));
  V r = hn::Log(d, safe);
  r = hn::IfThenElse(tiny, hn::Sub(r, hn::Set(d, 16.635532333438687f)), r);  // 24 ln 2
  const V inf = hn::Set(d, std::numeric_limits<float>::infinity());
  r = hn::IfThenElse(hn::Eq(x, inf), inf, r);
  r = hn::IfThenElse(hn::Eq(x, hn::Zero(d)), hn::Neg(inf), r);
  const V nan = hn::Set(d, std::numeric_limits<float>::quiet_NaN());
  r = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), nan, r);
  return hn::IfThenElse(hn::IsNaN(x), x, r);
}

// tanh(x) = x * P(x^2) / Q(x^2), P and Q of degree 4 with P(0) = Q(0) = 1 (so tanh(x) = x
// exactly near 0), coefficients fitted for opfuse by linearised least squares on the relative
// error with Lawson reweighting towards minimax, against double-precision tanh on [0, 9.1]
// (fit error 2.4e-8 relative). Past 9.1 tanh rounds to +-1 in float, so x is clamped there
// (which also handles infinities) and the quotient capped at 1. Evaluated in float the result
// is within 6.5 ulp (3.9e-7 relative) of tanh (checked at 24M points). About 15 vector ops and one division, against
// Highway's Tanh (an expm1 and a division, about twice the work): tanh is the GELU-tanh and
// activation workhorse of generated kernels, which must keep up with memory bandwidth.
template <class D, class V>
HWY_INLINE V SafeTanh(D d, V x) {
  const V c = hn::Max(hn::Min(x, hn::Set(d, 9.1f)), hn::Set(d, -9.1f));
  const V s = hn::Mul(c, c);
  V p = hn::Set(d, 1.3242532693677478e-08f);
  p = hn::MulAdd(p, s, hn::Set(d, 2.0533938933613037e-05f));
  p = hn::MulAdd(p, s, hn::Set(d, 0.0034912857791451245f));
  p = hn::MulAdd(p, s, hn::Set(d, 0.13377497611765343f));
  p = hn::MulAdd(p, s, hn::Set(d, 1.0f));
  V q = hn::Set(d, 7.732352510129254e-07f);
  q = hn::MulAdd(q, s, hn::Set(d, 0.00032784099111854913f));
  q = hn::MulAdd(q, s, hn::Set(d, 0.025860902064939857f));
  q = hn::MulAdd(q, s, hn::Set(d, 0.46710817936768123f));
  q = hn::MulAdd(q, s, hn::Set(d, 1.0f));
  const V one = hn::Set(d, 1.0f);
  const V r = hn::Max(hn::Min(hn::Div(hn::Mul(c, p), q), one), hn::Neg(one));
  return hn::IfThenElse(hn::IsNaN(x), x, r);
}

// 1 / (1 + exp(-x)) for x that is not NaN, with the reference's limit: 0 where exp(-x)
// overflows (x < -88.72). This runs over every output of SiLU networks, so it is built for a
// short dependency chain (the out-of-order window, not the ALUs, bounds its throughput):
//  - x is clamped to [-88, 87], where e^-x and the 2^n below are normal floats;
//  - n = round(-x / ln2) by the 1.5 * 2^23 trick, t = x + n ln2 (in two parts) = -(the reduced
//    argument), so e^-x = 2^n e^-t with |t| <= ln2 / 2 and no negation on the chain;
//  - e^-t = 1 - c1 t + c2 t^2 - ... - c5 t^5 by Estrin's scheme, c1..c5 fitted for opfuse
//    (Lawson-weighted least squares for relative error: 1.6 ulp), 2^n added into the exponent;
//  - the reciprocal is the 14-bit estimate plus one Newton step (a division costs more than all
//    the rest on AVX-512).
template <class D, class V>
HWY_INLINE V SigmoidOfNumber(D d, V x) {
  const hn::RebindToSigned<D> di;
  const V one = hn::Set(d, 1.0f);
  const V c = hn::Min(hn::Max(x, hn::Set(d, -88.0f)), hn::Set(d, 87.0f));
  const V kRound = hn::Set(d, 12582912.0f);  // 1.5 * 2^23: adding it leaves round(.) in the low bits
  const V shifted = hn::MulAdd(c, hn::Set(d, -1.44269504088896341f), kRound);
  const V n = hn::Sub(shifted, kRound);
  V t = hn::MulAdd(n, hn::Set(d, 0.693359375f), c);
  t = hn::MulAdd(n, hn::Set(d, -2.12194440e-4f), t);
  const V t2 = hn::Mul(t, t);
  const V p01 = hn::NegMulAdd(hn::Set(d, 0.9999997019767761f), t, one);
  const V p23 = hn::NegMulAdd(hn::Set(d, 0.1666763573884964f), t, hn::Set(d, 0.4999915063381195f));
  const V p45 = hn::NegMulAdd(hn::Set(d, 0.008290314115583897f), t, hn::Set(d, 0.04189793020486832f));
  const V q = hn::MulAdd(hn::MulAdd(p45, t2, p23), t2, p01);
  const auto scale = hn::ShiftLeft<23>(hn::Sub(hn::BitCast(di, shifted), hn::BitCast(di, kRound)));
  const V den = hn::Add(one, hn::BitCast(d, hn::Add(hn::BitCast(di, q), scale)));
  const V est = hn::ApproximateReciprocal(den);
  const V s = hn::MulAdd(est, hn::NegMulAdd(den, est, one), est);
  return hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, -88.72283f)), s);
}

// sigmoid(x) as the reference computes it; NaN stays NaN.
template <class D, class V>
HWY_INLINE V Sigmoid(D d, V x) {
  return hn::IfThenElse(hn::IsNaN(x), x, SigmoidOfNumber(d, x));
}

// x * sigmoid(x) (SiLU); a NaN x makes the product NaN by itself.
template <class D, class V>
HWY_INLINE V Silu(D d, V x) {
  return hn::Mul(x, SigmoidOfNumber(d, x));
}

// erf(x), odd, in two pieces (coefficients fitted for opfuse by weighted least squares with
// Lawson reweighting towards minimax relative error, against double-precision erf):
//   |x| < 1:        erf(x) = x * P(x^2),               P of degree 6 (fit error 1.2e-9 relative)
//   1 <= |x| < 3.95: erf(x) = 1 - exp(-x^2) * Q(1/|x|), Q of degree 9 (fit error 1.4e-8 relative
//                                                       on erfc, which is below 0.16 there)
//   |x| >= 3.95:     erf(x) = +-1 (1 - erf(3.95) = 1.6e-8 rounds away in float).
// Evaluated in float with FMA, the result is within 2.5 ulp (1.8e-7 relative) of the correctly
// rounded value over [0, 5] (checked at 2M points); subnormal and tiny x stay within 2 ulp.
template <class D, class V>
HWY_INLINE V Erf(D d, V x) {
  const V a = hn::Abs(x);
  const V a2 = hn::Mul(a, a);
  V p = hn::Set(d, 7.854029545684149e-05f);
  p = hn::MulAdd(p, a2, hn::Set(d, -0.0008010248705110634f));
  p = hn::MulAdd(p, a2, hn::Set(d, 0.005188334633060385f));
  p = hn::MulAdd(p, a2, hn::Set(d, -0.026853816148917242f));
  p = hn::MulAdd(p, a2, hn::Set(d, 0.11283585273119262f));
  p = hn::MulAdd(p, a2, hn::Set(d, -0.37612625840038694f));
  p = hn::MulAdd(p, a2, hn::Set(d, 1.1283791657324533f));
  const V small = hn::Mul(a, p);

  const V one = hn::Set(d, 1.0f);
  const V t = hn::Div(one, hn::Max(a, one));
  V q = hn::Set(d, 0.029969432419992316f);
  q = hn::MulAdd(q, t, hn::Set(d, -0.17547440737284023f));
  q = hn::MulAdd(q, t, hn::Set(d, 0.4277412341002258f));
  q = hn::MulAdd(q, t, hn::Set(d, -0.5221158222995659f));
  q = hn::MulAdd(q, t, hn::Set(d, 0.22518094660566623f));
  q = hn::MulAdd(q, t, hn::Set(d, 0.23797660020640893f));
  q = hn::MulAdd(q, t, hn::Set(d, -0.37870015418224445f));
  q = hn::MulAdd(q, t, hn::Set(d, 0.021199750724741173f));
  q = hn::MulAdd(q, t, hn::Set(d, 0.5616798775937271f));
  q = hn::MulAdd(q, t, hn::Set(d, 0.00012612421767459683f));
  const V big = hn::NegMulAdd(hn::Exp(d, hn::Neg(hn::Min(a2, hn::Set(d, 16.0f)))), q, one);

  V r = hn::IfThenElse(hn::Lt(a, hn::Set(d, 3.95f)), big, one);
  r = hn::IfThenElse(hn::Lt(a, one), small, r);
  r = hn::CopySign(r, x);
  return hn::IfThenElse(hn::IsNaN(x), x, r);
}

// GELU in its exact form, x * Phi(x) with Phi the standard normal CDF, without erf:
//   Phi(-a) = exp(L(a)) for a = |x| < 5.5, L(a) = log(erfc(a / sqrt 2) / 2) a polynomial of
//   degree 11 in a (coefficients fitted for opfuse: Lawson-weighted least squares towards minimax
//   absolute error, 2.6e-8, against double-precision erfc), and Phi(a) = 1 - Phi(-a);
//   exp by its own range reduction (L is in [-17.8, -0.69], so 2^n is a normal float), e^r of
//   degree 6 fitted for relative error (2e-9).
// Past |x| = 5.5 Phi is 0 or 1 (Phi(-5.5) = 1.9e-8, below half an ulp of 1), so -inf gives
// -inf * 0 = NaN and +inf gives +inf, as the reference's 0.5 x (1 + erf(x / sqrt 2)) does; NaN
// stays NaN through the product. About 30 vector ops and no division, against 60 and a division
// through Erf: GELU runs over every hidden unit of a transformer's feed-forward layer, in the
// GEMM's epilogue (128x512x2048 on a Zen 3, AVX2: +0.3 ms on a 2.3 ms product).
// Evaluated in float (simulated at 2M points of [-8, 8]): within 1.5 * 2^-24 |x| of GELU for
// x < 0, and 1.9 ulp for x > 0; relatively, the negative tail is within 4e-6 where L is large,
// where the reference's 1 + erf(...) has cancelled to an absolute error of 3e-8 (relatively up
// to 1). The erf form ran 14.4 ns per 8 floats, this one 9.5 (Zen 3, AVX2, from L1).
template <class D, class V>
HWY_INLINE V GeluErf(D d, V x) {
  const hn::RebindToSigned<D> di;
  const V a = hn::Min(hn::Abs(x), hn::Set(d, 5.5f));  // NaN: x86's min returns the bound
  // L by Estrin's scheme: the chain through Horner's eleven FMAs, not the ALUs, bounded the
  // throughput (the out-of-order window holds too few vectors to hide it): 1.1x as fast.
  const V a2 = hn::Mul(a, a), a4 = hn::Mul(a2, a2), a8 = hn::Mul(a4, a4);
  const auto pair = [d, a](float c1, float c0) HWY_ATTR { return hn::MulAdd(hn::Set(d, c1), a, hn::Set(d, c0)); };
  const V l01 = pair(-0.7978854179382324f, -0.6931471824645996f);
  const V l23 = pair(-0.03635605424642563f, -0.31830301880836487f);
  const V l45 = pair(1.9330944269313477e-05f, 0.004810734651982784f);
  const V l67 = pair(6.346143345581368e-05f, -0.00021384606952778995f);
  const V l89 = pair(1.1325855666655116e-06f, -1.0724681487772614e-05f);
  const V l1011 = pair(1.906909741222762e-09f, -6.962198284554688e-08f);
  const V l = hn::MulAdd(hn::MulAdd(l1011, a2, l89), a8,
                         hn::MulAdd(hn::MulAdd(l67, a2, l45), a4, hn::MulAdd(l23, a2, l01)));
  // e^l = 2^n e^r, n = round(l / ln 2) by the 1.5 * 2^23 trick, r = l - n ln 2 in two parts.
  const V kRound = hn::Set(d, 12582912.0f);
  const V shifted = hn::MulAdd(l, hn::Set(d, 1.44269504088896341f), kRound);
  const V n = hn::Sub(shifted, kRound);
  V r = hn::NegMulAdd(n, hn::Set(d, 0.693359375f), l);
  r = hn::NegMulAdd(n, hn::Set(d, -2.12194440e-4f), r);
  V p = hn::Set(d, 0.0013843595515936613f);
  p = hn::MulAdd(p, r, hn::Set(d, 0.008374142460525036f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.04166800156235695f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.16666431725025177f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.4999999403953552f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  const auto scale = hn::ShiftLeft<23>(hn::Sub(hn::BitCast(di, shifted), hn::BitCast(di, kRound)));
  const V tail = hn::IfThenElseZero(hn::Lt(hn::Abs(x), hn::Set(d, 5.5f)), hn::BitCast(d, hn::Add(hn::BitCast(di, p), scale)));
  return hn::Mul(x, hn::IfThenElse(hn::Lt(x, hn::Zero(d)), tail, hn::Sub(hn::Set(d, 1.0f), tail)));
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#endif  // OPFUSE_KERNELS_CPU_HWY_MATH_INL_H_ toggle
