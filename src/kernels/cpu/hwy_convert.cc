// Dtype conversions: Cast between the float and small integer types quantized and float16
// models use (and bool to float, a mask's), and DynamicQuantizeLinear (f32 -> u8 with a scale
// and zero point computed from the data). Both are opaque to region fusion (its scalar
// expressions have one compute type), so without these they ran on reference kernels that
// convert element by element through double: 14 ms per Cast and 23 ms per DynamicQuantizeLinear
// of a 1M-element activation.
//
// Results equal the reference kernels' bit for bit: conversions to float round to nearest even as
// a C++ cast does, float16 demotion rounds to nearest even with NaN and Inf kept, and the
// quantization divides by the scale (not a reciprocal multiply) and rounds half to even
// (vroundps with an explicit mode, so no caller's rounding mode changes a quantized model).
#ifndef OPFUSE_KERNELS_CPU_HWY_CONVERT_DECLS_
#define OPFUSE_KERNELS_CPU_HWY_CONVERT_DECLS_
#include <algorithm>
#include <cstring>

#include "kernels/cpu/hwy_kernels.h"
#include "ops/op_def.h"
#include "ops/quantize_common.h"

namespace opfuse::hwy_cpu {
namespace {
// Elements per OpenMP chunk: large enough that a chunk streams for a while.
constexpr int64_t kChunk = int64_t{1} << 14;
}  // namespace
}  // namespace opfuse::hwy_cpu
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/hwy_convert.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// dst = f(src) over n elements: `vector_step(s, d)` converts one vector of f32 lanes from s to d,
// `scalar_step(x)` one element of the tail.
template <typename S, typename D, class VectorStep, class ScalarStep>
HWY_INLINE void ConvertLoop(const S* src, D* dst, size_t n, VectorStep vector_step, ScalarStep scalar_step) {
  const size_t lanes = hn::Lanes(hn::ScalableTag<float>());
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) vector_step(src + i, dst + i);
  for (; i < n; ++i) dst[i] = scalar_step(src[i]);
}

// Integers (u8, i8, i32) to f32: exact for the small types, nearest even for large i32.
// kBool: bytes of bools, any nonzero one 1, as the reference reads a bool.
template <typename T, bool kBool = false>
void IntToF32(const T* src, float* dst, size_t n) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<T, decltype(df)> dt;
  const hn::Rebind<int32_t, decltype(df)> di;
  ConvertLoop(
      src, dst, n,
      [&](const T* s, float* d) HWY_ATTR {
        if constexpr (std::is_same_v<T, int32_t>) {
          hn::StoreU(hn::ConvertTo(df, hn::LoadU(di, s)), df, d);
        } else {
          auto wide = hn::PromoteTo(di, hn::LoadU(dt, s));
          if constexpr (kBool) wide = hn::Min(wide, hn::Set(di, 1));
          hn::StoreU(hn::ConvertTo(df, wide), df, d);
        }
      },
      [](T x) { return kBool ? (x != 0 ? 1.0f : 0.0f) : static_cast<float>(x); });
}
void U8ToF32(const uint8_t* src, float* dst, size_t n) { IntToF32(src, dst, n); }
// A mask's Equal -> Cast (M-LSD's local-maximum tail) ran the reference kernel: 112 us for 64K.
void BoolToF32(const uint8_t* src, float* dst, size_t n) { IntToF32<uint8_t, true>(src, dst, n); }
void I8ToF32(const int8_t* src, float* dst, size_t n) { IntToF32(src, dst, n); }
void I32ToF32(const int32_t* src, float* dst, size_t n) { IntToF32(src, dst, n); }

// Below AVX2 Highway 1.0.3 emulates float16 conversions without F16C, and gets NaN, Inf and
// overflow wrong (at `--target sse41` NaN became 98304 widened and 0xC000 narrowed, Inf 65536 and
// 0x8000): there each vector's lanes take the reference conversion.
#if HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3 || HWY_TARGET == HWY_SCALAR
#define OPFUSE_EMULATED_F16 1
#else
#define OPFUSE_EMULATED_F16 0
#endif

void F16ToF32(const uint16_t* src, float* dst, size_t n) {
  const auto scalar = [](uint16_t h) { return half_to_float(Half{h}); };
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  ConvertLoop(
      src, dst, n,
      [&](const uint16_t* s, float* d) HWY_ATTR {
        if constexpr (OPFUSE_EMULATED_F16) {
          for (size_t i = 0; i < hn::Lanes(df); ++i) d[i] = scalar(s[i]);
        } else {
          hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(s))), df, d);
        }
      },
      scalar);
}

void F32ToF16(const float* src, uint16_t* dst, size_t n) {
  const auto scalar = [](float x) { return float_to_half(x).bits; };
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  ConvertLoop(
      src, dst, n,
      [&](const float* s, uint16_t* d) HWY_ATTR {
        if constexpr (OPFUSE_EMULATED_F16) {
          for (size_t i = 0; i < hn::Lanes(df); ++i) d[i] = scalar(s[i]);
        } else {
          hn::StoreU(hn::DemoteTo(dh, hn::LoadU(df, s)), dh, reinterpret_cast<hwy::float16_t*>(d));
        }
      },
      scalar);
}
#undef OPFUSE_EMULATED_F16

// f32 to u8 / i8 as the reference's Cast: truncation toward zero, then the low byte (a C++
// conversion through int64); NaN and values of 2^31 or more in magnitude (multiples of 256 below
// 2^63, INT64_MIN's low byte beyond, on x86) give 0. Quantized models' Casts of integer-valued
// floats in range (the QDQ products' x) are the common case; the rest keeps bit parity.
template <typename T>
void F32ToByte(const float* src, T* dst, size_t n) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<T, decltype(df)> dt;
  const auto limit = hn::Set(df, 2147483648.0f);
  const auto byte = hn::Set(di, 0xFF), sign = hn::Set(di, 0x80);
  ConvertLoop(
      src, dst, n,
      [&](const float* s, T* d) HWY_ATTR {
        const auto v = hn::LoadU(df, s);
        const auto in_range = hn::Lt(hn::Abs(v), limit);  // false for NaN
        auto b = hn::And(hn::ConvertTo(di, hn::IfThenElseZero(in_range, v)), byte);
        if constexpr (std::is_signed_v<T>) b = hn::Sub(hn::Xor(b, sign), sign);  // the low byte as signed
        hn::StoreU(hn::DemoteTo(dt, b), dt, d);
      },
      [](float x) { return element_from_double<T>(static_cast<double>(x)); });
}
void F32ToU8(const float* src, uint8_t* dst, size_t n) { F32ToByte(src, dst, n); }
void F32ToI8(const float* src, int8_t* dst, size_t n) { F32ToByte(src, dst, n); }

// min(0, x...) and max(0, x...) folded into *lo and *hi, leaving out NaN and, when valid is
// less than a vector's lanes, every lane i % lanes >= valid (n is then whole vectors: the padded
// lanes of a blocked tensor's last block). Leaving a lane out counts it as 0, which the range
// holds anyway.
void RangeWithZero(const float* x, size_t n, size_t valid, float* lo, float* hi) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t lanes = hn::Lanes(d);
  const auto keep = hn::RebindMask(d, hn::Lt(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(valid))));
  auto vlo = hn::Zero(d), vhi = hn::Zero(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(d, x + i);
    const auto clean = hn::IfThenElseZero(hn::AndNot(hn::IsNaN(v), keep), v);
    vlo = hn::Min(vlo, clean);
    vhi = hn::Max(vhi, clean);
  }
  float l = hn::GetLane(hn::MinOfLanes(d, vlo)), h = hn::GetLane(hn::MaxOfLanes(d, vhi));
  for (; i < n; ++i) {
    if (x[i] < l) l = x[i];
    if (x[i] > h) h = x[i];
  }
  *lo = std::min(*lo, l);
  *hi = std::max(*hi, h);
}

// y = saturate(round_half_even(x / scale) + zero_point) to [0, 255]; NaN -> 0.
void QuantizeU8(const float* x, size_t n, float scale, float zero_point, uint8_t* y) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  const size_t lanes = hn::Lanes(df);
  const auto vs = hn::Set(df, scale), vz = hn::Set(df, zero_point);
  const auto v0 = hn::Zero(df), v255 = hn::Set(df, 255.0f);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto q = hn::Add(hn::Round(hn::Div(hn::LoadU(df, x + i), vs)), vz);
    const auto clamped = hn::Min(hn::Max(q, v0), v255);
    const auto no_nan = hn::IfThenZeroElse(hn::IsNaN(q), clamped);
    hn::StoreU(hn::DemoteTo(du8, hn::ConvertTo(di, no_nan)), du8, y + i);
  }
  const int32_t zp = static_cast<int32_t>(zero_point);
  for (; i < n; ++i) y[i] = quantize_value<uint8_t>(x[i] / scale, zp);
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace opfuse::hwy_cpu {
HWY_EXPORT(U8ToF32);
HWY_EXPORT(BoolToF32);
HWY_EXPORT(I8ToF32);
HWY_EXPORT(I32ToF32);
HWY_EXPORT(F16ToF32);
HWY_EXPORT(F32ToF16);
HWY_EXPORT(F32ToU8);
HWY_EXPORT(F32ToI8);
HWY_EXPORT(RangeWithZero);
HWY_EXPORT(QuantizeU8);

void range_with_zero(const float* x, size_t n, size_t valid_lanes, float* lo, float* hi) {
  HWY_DYNAMIC_DISPATCH(RangeWithZero)(x, n, valid_lanes, lo, hi);
}

namespace {

// Runs body(begin, count) over [0, n) in chunks, on every thread when n is large.
template <typename Body>
void for_chunks(int64_t n, Body&& body) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk;
    body(begin, static_cast<size_t>(std::min(kChunk, n - begin)));
  }
}

// One Cast between two dtypes: source and destination element sizes and the vector loop.
struct CastPath {
  DType from, to;
  void (*convert)(const void* src, void* dst, size_t n);  // null: the same dtype, a copy
};

template <typename S, typename D, void (*Fn)(const S*, D*, size_t)>
void erase(const void* src, void* dst, size_t n) {
  Fn(static_cast<const S*>(src), static_cast<D*>(dst), n);
}

void u8_to_f32(const uint8_t* s, float* d, size_t n) { HWY_DYNAMIC_DISPATCH(U8ToF32)(s, d, n); }
void bool_to_f32(const uint8_t* s, float* d, size_t n) { HWY_DYNAMIC_DISPATCH(BoolToF32)(s, d, n); }
void i8_to_f32(const int8_t* s, float* d, size_t n) { HWY_DYNAMIC_DISPATCH(I8ToF32)(s, d, n); }
void i32_to_f32(const int32_t* s, float* d, size_t n) { HWY_DYNAMIC_DISPATCH(I32ToF32)(s, d, n); }
void f16_to_f32(const uint16_t* s, float* d, size_t n) { HWY_DYNAMIC_DISPATCH(F16ToF32)(s, d, n); }
void f32_to_f16(const float* s, uint16_t* d, size_t n) { HWY_DYNAMIC_DISPATCH(F32ToF16)(s, d, n); }
void f32_to_u8(const float* s, uint8_t* d, size_t n) { HWY_DYNAMIC_DISPATCH(F32ToU8)(s, d, n); }
void f32_to_i8(const float* s, int8_t* d, size_t n) { HWY_DYNAMIC_DISPATCH(F32ToI8)(s, d, n); }

const CastPath kCastPaths[] = {
    {DType::kU8, DType::kF32, erase<uint8_t, float, u8_to_f32>},
    {DType::kBool, DType::kF32, erase<uint8_t, float, bool_to_f32>},
    {DType::kI8, DType::kF32, erase<int8_t, float, i8_to_f32>},
    {DType::kI32, DType::kF32, erase<int32_t, float, i32_to_f32>},
    {DType::kF16, DType::kF32, erase<uint16_t, float, f16_to_f32>},
    {DType::kF32, DType::kF16, erase<float, uint16_t, f32_to_f16>},
    {DType::kF32, DType::kU8, erase<float, uint8_t, f32_to_u8>},
    {DType::kF32, DType::kI8, erase<float, int8_t, f32_to_i8>},
};

std::optional<CastPath> cast_path(const Node& node) {
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  if (x == nullptr || !x->shape || !static_dims(*x->shape)) return std::nullopt;
  if (x->dtype == y->dtype && x->dtype != DType::kUndefined) return CastPath{x->dtype, y->dtype, nullptr};
  for (const CastPath& p : kCastPaths) {
    if (p.from == x->dtype && p.to == y->dtype) return p;
  }
  return std::nullopt;
}

class CastKernel final : public Kernel {
 public:
  explicit CastKernel(CastPath path) : path_(path) {}
  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    const char* src = static_cast<const char*>(in[0]->raw_data());
    char* dst = static_cast<char*>(out[0]->raw_data());
    const size_t from = dtype_size(path_.from), to = dtype_size(path_.to);
    for_chunks(in[0]->numel(), [&](int64_t begin, size_t n) {
      if (path_.convert == nullptr) {
        std::memcpy(dst + begin * to, src + begin * from, n * from);
      } else {
        path_.convert(src + begin * from, dst + begin * to, n);
      }
    });
    return Status::ok();
  }
  std::string_view name() const override { return "hwy.cast"; }
  int in_place_input() const override { return dtype_size(path_.from) == dtype_size(path_.to) ? 0 : -1; }

 private:
  CastPath path_;
};

bool supports_cast(const KernelCompileContext& ctx) { return cast_path(ctx.node).has_value(); }
Result<std::unique_ptr<Kernel>> create_cast(const KernelCompileContext& ctx) {
  return std::unique_ptr<Kernel>(new CastKernel(*cast_path(ctx.node)));
}

// DynamicQuantizeLinear: the range in one parallel pass (per-chunk partial ranges), the scale and
// zero point by the reference's own formulas, then the quantization in a second pass.
class DynamicQuantizeKernel final : public Kernel {
 public:
  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    const float* x = in[0]->data<float>();
    const int64_t n = in[0]->numel();
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<float> los(static_cast<size_t>(chunks), 0.0f), his(static_cast<size_t>(chunks), 0.0f);
    for_chunks(n, [&](int64_t begin, size_t count) {
      const size_t c = static_cast<size_t>(begin / kChunk);
      range_with_zero(x + begin, count, count, &los[c], &his[c]);  // every lane counts
    });
    const float lo = std::min(0.0f, *std::min_element(los.begin(), los.end()));
    const float hi = std::max(0.0f, *std::max_element(his.begin(), his.end()));
    const DynamicQuantParams p = dynamic_quant_params(lo, hi);
    uint8_t* y = out[0]->data<uint8_t>();
    for_chunks(n, [&](int64_t begin, size_t count) {
      HWY_DYNAMIC_DISPATCH(QuantizeU8)(x + begin, count, p.scale, static_cast<float>(p.zero_point), y + begin);
    });
    out[1]->data<float>()[0] = p.scale;
    out[2]->data<uint8_t>()[0] = static_cast<uint8_t>(p.zero_point);
    return Status::ok();
  }
  std::string_view name() const override { return "hwy.dynamic_quantize"; }
};

bool supports_dynamic_quantize(const KernelCompileContext& ctx) {
  return static_dims_of(ctx.node.input(0)).has_value();
}
Result<std::unique_ptr<Kernel>> create_dynamic_quantize(const KernelCompileContext&) {
  return std::unique_ptr<Kernel>(new DynamicQuantizeKernel());
}

}  // namespace

std::vector<KernelImpl> convert_kernels() {
  return {KernelImpl{"hwy.cast", "Cast", supports_cast, create_cast},
          KernelImpl{"hwy.dynamic_quantize", "DynamicQuantizeLinear", supports_dynamic_quantize,
                     create_dynamic_quantize}};
}

}  // namespace opfuse::hwy_cpu
#endif  // HWY_ONCE
