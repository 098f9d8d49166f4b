// "cpu.gemm_i16": Y[M, N] = post(float((A - a_zero)(B - b_zero)) * (a_scale * b_scale) + bias)
// for opfuse::FusedMatMulInteger (ops/integer_matmul.cc), or the int32 sums (A - a_zero)(B - b_zero)
// for MatMulInteger, with a constant 2-d B (kernels/cpu/integer_gemm_kernel.h).
//
// Why 16-bit multiply-adds: the u8 x s8 ones (vpmaddubsw, which MLAS uses below VNNI) saturate
// their pair sums at 2^15, and 255 * 127 * 2 is more, so they are not exact. The operands less
// their zero points lie in [-255, 255], whose products and pair sums vpmaddwd (16 x 16 -> 32 bits,
// two products added) computes exactly, and int32 adds wrap as the reference's narrowing of its
// int64 sums does: the sums are the reference's bit for bit, for any K. On a Zen 3 vpmaddwd +
// vpaddd run 67 multiply-adds per ns against FMA's 46 (docs/benchmarks.md), and the weights take
// half the bytes of float32 ones.
//
// The loop is cpu.gemm's (packed_gemm_kernel.cc): B - b_zero is packed once into panels of NR =
// two int32 vectors' columns, K block by K block, each row of a panel holding two k's of its NR
// columns interleaved ((k, k + 1) of column 0, then of column 1 ...), so that one vpmaddwd
// multiplies a broadcast pair of A's row by the pair of every column and adds the two. A - a_zero
// is copied per run into row-major int16 rows of even length (A's zero point is only known then:
// DynamicQuantizeLinear computes it), so each broadcast is one 32-bit load. Sums of the K blocks
// before the last stay, as int32, in Y's own memory. After the last block the accumulators are
// converted to float, multiplied by their column's a_scale * b_scale, the bias is added, and
// the epilogue runs over the tile in an L1 buffer before its store: the same float steps, in the
// same order, as the graph the anchor replaced, so the output is that graph's bit for bit.
// cpu.gemm's prefetch of the next panel's block, tried here, changed nothing (BERT-base's
// 128 x 3072 x 768 products: 3.28-3.38 ms with it, 3.34-3.40 without, alternating on a Zen 3).
//
// With VNNI the sums come from oneDNN's int8 matmul instead: vpdpbusd multiplies u8 (or,
// shifted, s8) by s8 and adds four products into int32 without saturating, so the sums are exact
// too, at 64 multiply-adds an instruction against vpmaddwd's 32; oneDNN applies A's run-time zero
// point. It has no weight zero points, so B is shifted to s8 once, w8 = w - 128 (u8) or w (i8),
// and with c[n] = 128 - b_zero[n] (u8) or -b_zero[n] (i8), as in onednn_conv_integer.cc:
//   sum_k (a - a_zero)(w - b_zero[n]) = sum_k (a - a_zero) w8 + c[n] * S[m],  S[m] = sum_k (a - a_zero)
// in int32, whose wrapping is the reference's narrowing. The int32 sums go to Y, and the tiles
// then run their last stage only (no K steps: load the sums, convert, scale, add the bias, the
// epilogue): the float steps stay the same, so the output is bit for bit the same.
// Dynamically quantized BERT-base on an AMD EPYC Zen 5 (avx512_core_bf16, 2 threads, O3) ran
// 43.4-44.1 ms on the 16-bit tiles against ONNX Runtime's 32.4-33.1, and 22.1-22.3 ms this way
// against ORT's 29.7-30.0 (int8 weights; docs/benchmarks.md, wave 22).
#ifndef OPFUSE_KERNELS_CPU_INTEGER_GEMM_KERNEL_DECLS_
#define OPFUSE_KERNELS_CPU_INTEGER_GEMM_KERNEL_DECLS_
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

#include "core/digest.h"
#include "hwy/aligned_allocator.h"
#include "kernels/cpu/gemm_blocking.h"
#include "kernels/cpu/hwy_epilogue.h"
#include "kernels/cpu/hwy_kernels.h"
#include "kernels/cpu/integer_gemm_kernel.h"
#include "kernels/cpu/onednn_common.h"
#include "kernels/cpu/packed_floats.h"
#include "kernels/target_caps.h"
#include "ops/fused.h"

namespace opfuse::hwy_cpu {
// One call of the micro-kernel loop: rows of A times one panel's K block (row-major A and Y).
struct IntTile {
  const int32_t* a;  // the tile's first row of A - a_zero as int16 pairs, at the K block's first pair
  size_t lda;        // pairs between rows of A
  const int16_t* b;  // the panel's K block: `pairs` rows of 2 * NR int16, 64-byte aligned
  size_t pairs;
  float* c;          // Y's first element of the tile: int32 partial sums until the last K block
  size_t ldc;
  bool accumulate;   // add to the partial sums in Y instead of starting at zero
  // Only on the last K block (else null):
  const float* scale;  // NR floats: a_scale * b_scale of each column
  const float* bias;   // NR floats, or null
  const VectorEpilogue* epilogue;
  const float* residual;
  size_t ldr;
};
}  // namespace opfuse::hwy_cpu
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/integer_gemm_kernel.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/gemm_tile-inl.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DI = hn::ScalableTag<int32_t>;
using DFloat = hn::Repartition<float, DI>;
using VI = hn::Vec<DI>;

// The tile's geometry (gemm_tile-inl.h): cpu.gemm's, whose accumulators are 32-bit lanes too. The
// odd-lane sums of ReorderWidenMulAccumulate are unused on x86 (vpmaddwd adds each pair itself)
// and the compiler drops them, so 2 * MR accumulators + 2 B vectors + 1 broadcast fill the
// register file as in cpu.gemm.
constexpr size_t kLanes = kGemmLanes, kPanel = kGemmPanel, kTileRows = kGemmTileRows;

size_t IntGemmPanelWidth() { return kPanel; }
size_t IntGemmTileRows() { return kTileRows; }

// The epilogue over a dequantized tile, then its store (gemm_tile-inl.h), one function per target.
HWY_NOINLINE void IntEpilogueTile(const IntTile& t, float* tile, size_t rows) {
  EpilogueIntoRows(*t.epilogue, tile, TileRows{t.c, t.ldc, kLanes, t.residual, t.ldr}, rows);
}

#if HWY_TARGET == HWY_SCALAR
// One lane has no 16-bit pairs: the same sums and float steps in plain integers (uint32, whose
// wrapping is the int32 adds' of the vector targets).
template <size_t kRows>
HWY_INLINE void Tile(const IntTile& t) {
  uint32_t acc[kRows][kPanel];
  int32_t* c = reinterpret_cast<int32_t*>(t.c);
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t j = 0; j < kPanel; ++j) acc[r][j] = t.accumulate ? static_cast<uint32_t>(c[r * t.ldc + j]) : 0u;
  }
  for (size_t p = 0; p < t.pairs; ++p) {
    const int16_t* b = t.b + p * 2 * kPanel;
    for (size_t r = 0; r < kRows; ++r) {
      int16_t a[2];
      std::memcpy(a, t.a + r * t.lda + p, sizeof(a));
      for (size_t j = 0; j < kPanel; ++j) acc[r][j] += static_cast<uint32_t>(a[0] * b[2 * j] + a[1] * b[2 * j + 1]);
    }
  }
  const bool via_tile = t.scale != nullptr && t.epilogue != nullptr;
  HWY_ALIGN float tile[kRows * kPanel];
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t j = 0; j < kPanel; ++j) {
      const int32_t sum = static_cast<int32_t>(acc[r][j]);
      if (t.scale == nullptr) {
        c[r * t.ldc + j] = sum;
        continue;
      }
      float v = static_cast<float>(sum) * t.scale[j];
      if (t.bias != nullptr) v += t.bias[j];
      (via_tile ? tile[r * kPanel + j] : t.c[r * t.ldc + j]) = v;
    }
  }
  if (via_tile) IntEpilogueTile(t, tile, kRows);
}
#else
// kRows x NR of Y: accumulate the K block's pairs in registers; store the int32 sums, or on the
// last block the dequantized floats, then the epilogue. Every row loop is unrolled outright: past
// GCC's own limits the accumulator arrays stayed on the stack (120 zmm reloads at AVX-512).
template <size_t kRows>
HWY_INLINE void Tile(const IntTile& t) {
  const DI di;
  const hn::Repartition<int16_t, DI> dw;
  const DFloat df;
  int32_t* c = reinterpret_cast<int32_t*>(t.c);
  VI acc0[kRows], acc1[kRows], odd0[kRows], odd1[kRows];
#pragma GCC unroll 16
  for (size_t r = 0; r < kRows; ++r) {
    acc0[r] = t.accumulate ? hn::LoadU(di, c + r * t.ldc) : hn::Zero(di);
    acc1[r] = t.accumulate ? hn::LoadU(di, c + r * t.ldc + kLanes) : hn::Zero(di);
    odd0[r] = odd1[r] = hn::Zero(di);
  }
  const int16_t* HWY_RESTRICT b = t.b;
  const int32_t* HWY_RESTRICT a = t.a;
#pragma GCC unroll 4
  for (size_t p = 0; p < t.pairs; ++p, b += 2 * kPanel) {
    const auto b0 = hn::Load(dw, b), b1 = hn::Load(dw, b + 2 * kLanes);
#pragma GCC unroll 16
    for (size_t r = 0; r < kRows; ++r) {
      const auto ar = hn::BitCast(dw, hn::Set(di, a[r * t.lda + p]));
      acc0[r] = hn::ReorderWidenMulAccumulate(di, ar, b0, acc0[r], odd0[r]);
      acc1[r] = hn::ReorderWidenMulAccumulate(di, ar, b1, acc1[r], odd1[r]);
    }
  }
#pragma GCC unroll 16
  for (size_t r = 0; r < kRows; ++r) {
    acc0[r] = hn::RearrangeToOddPlusEven(acc0[r], odd0[r]);
    acc1[r] = hn::RearrangeToOddPlusEven(acc1[r], odd1[r]);
  }
  if (t.scale == nullptr) {
#pragma GCC unroll 16
    for (size_t r = 0; r < kRows; ++r) {
      hn::StoreU(acc0[r], di, c + r * t.ldc);
      hn::StoreU(acc1[r], di, c + r * t.ldc + kLanes);
    }
    return;
  }
  HWY_ALIGN float tile[kRows * kPanel];  // the dequantized tile, when an epilogue stores it
  const auto s0 = hn::LoadU(df, t.scale), s1 = hn::LoadU(df, t.scale + kLanes);
  const auto z = hn::Zero(df);
  const auto c0 = t.bias != nullptr ? hn::LoadU(df, t.bias) : z;
  const auto c1 = t.bias != nullptr ? hn::LoadU(df, t.bias + kLanes) : z;
#pragma GCC unroll 16
  for (size_t r = 0; r < kRows; ++r) {
    auto y0 = hn::Mul(hn::ConvertTo(df, acc0[r]), s0), y1 = hn::Mul(hn::ConvertTo(df, acc1[r]), s1);
    // Added only when there is a bias: + 0 would turn the -0 of a zero sum times a negative scale into +0.
    if (t.bias != nullptr) {
      y0 = hn::Add(y0, c0);
      y1 = hn::Add(y1, c1);
    }
    if (t.epilogue != nullptr) {
      hn::Store(y0, df, tile + r * kPanel);
      hn::Store(y1, df, tile + r * kPanel + kLanes);
    } else {
      hn::StoreU(y0, df, t.c + r * t.ldc);
      hn::StoreU(y1, df, t.c + r * t.ldc + kLanes);
    }
  }
  if (t.epilogue != nullptr) IntEpilogueTile(t, tile, kRows);
}
#endif

// `rows` rows of one panel's K block, of which the first `width` columns are Y's (the last
// panel is narrower), in tiles (gemm_tile-inl.h's PanelTiles).
void IntGemmPanelRows(const IntTile& tile, size_t rows, size_t width) {
  const TileRows y{tile.c, tile.ldc, kLanes, tile.residual, tile.ldr};
  PanelTiles(y, rows, width, tile.accumulate, [&](const TileRows& out, size_t r0, size_t n) HWY_ATTR {
    IntTile t = tile;
    t.a += r0 * t.lda;
    t.c = out.c;
    t.ldc = out.ldc;
    t.residual = out.residual;
    t.ldr = out.ldr;
    if (n == kTileRows) return Tile<kTileRows>(t);
    WithRowCount<kTileRows - 1>(n, [&](auto k) HWY_ATTR { Tile<decltype(k)::value>(t); });
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace opfuse {
namespace hwy_cpu {
HWY_EXPORT(IntGemmPanelWidth);
HWY_EXPORT(IntGemmTileRows);
HWY_EXPORT(IntGemmPanelRows);
}  // namespace hwy_cpu

namespace {

using Dims = std::vector<int64_t>;

// Inputs of opfuse::FusedMatMulInteger (ops/integer_matmul.cc), and MatMulInteger's (A, B, a_zero, b_zero).
constexpr size_t kA = 0, kB = 1, kBias = 2, kResidual = 3, kAScale = 4, kAZero = 5, kBScale = 6, kBZero = 7;
constexpr size_t kSumsAZero = 2, kSumsBZero = 3;

// Below this many multiply-adds one thread does the product: waking a second costs more.
constexpr int64_t kParallelMacs = int64_t{1} << 18;

bool is_int8(DType t) { return t == DType::kU8 || t == DType::kI8; }

// What the kernel reads from the node at creation.
struct IntegerProduct {
  bool sums = false;             // MatMulInteger: the int32 sums themselves are the output
  int64_t m = 0, k = 0, n = 0;  // A's leading dims folded into M
  DType a_dtype = DType::kU8;
  const Tensor* b = nullptr;        // [K, N] u8/i8
  const Tensor* b_zero = nullptr;   // one value or [N], or null
  const Tensor* b_scale = nullptr;  // f32, one value or [N]
  const Tensor* bias = nullptr;     // f32 [N], or null
  std::vector<PostOp> epilogue;
  bool has_residual = false;
};

// One value of `dtype` (a scalar, [1], [1, 1] ...).
bool is_one_value(const Value* v, DType dtype) {
  const auto dims = hwy_cpu::static_dims_of(v, dtype);
  return dims && numel_of(*dims) == 1;
}

std::optional<IntegerProduct> product_of(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  IntegerProduct p;
  p.sums = node.domain().empty();  // MatMulInteger, else opfuse::FusedMatMulInteger
  const size_t a_zero = p.sums ? kSumsAZero : kAZero, b_zero = p.sums ? kSumsBZero : kBZero;
  if (node.outputs().size() != 1 || node.inputs().size() < (p.sums ? 2 : kBScale + 1)) return std::nullopt;
  const auto constant = [&](size_t i) { return i < ctx.constants.size() ? ctx.constants[i] : nullptr; };
  const Value* a = node.input(kA);
  p.b = constant(kB);
  if (a == nullptr || !is_int8(a->dtype) || p.b == nullptr || !is_int8(p.b->dtype()) || p.b->rank() != 2) {
    return std::nullopt;
  }
  p.a_dtype = a->dtype;
  const auto a_dims = hwy_cpu::static_dims_of(a, a->dtype);
  const auto y_dims = hwy_cpu::static_dims_of(node.output(0), p.sums ? DType::kI32 : DType::kF32);
  p.k = p.b->dim(0);
  p.n = p.b->dim(1);
  if (!a_dims || !y_dims || a_dims->empty() || p.k <= 0 || p.n <= 0 || a_dims->back() != p.k) return std::nullopt;
  p.m = numel_of(*a_dims) / p.k;
  if (p.m < 1 || numel_of(*y_dims) != p.m * p.n) return std::nullopt;
  // A's zero point (and a_scale) are computed at run time (DynamicQuantizeLinear): one value each.
  if (node.has_input(a_zero) && !is_one_value(node.input(a_zero), a->dtype)) return std::nullopt;
  if (node.has_input(b_zero)) {
    p.b_zero = constant(b_zero);
    if (p.b_zero == nullptr || p.b_zero->dtype() != p.b->dtype() ||
        (p.b_zero->numel() != 1 && (p.b_zero->rank() != 1 || p.b_zero->numel() != p.n))) {
      return std::nullopt;
    }
  }
  if (p.sums) return p;
  if (!is_one_value(node.input(kAScale), DType::kF32)) return std::nullopt;
  p.b_scale = constant(kBScale);
  if (p.b_scale == nullptr || p.b_scale->dtype() != DType::kF32 ||
      (p.b_scale->numel() != 1 && (p.b_scale->rank() != 1 || p.b_scale->numel() != p.n))) {
    return std::nullopt;
  }
  if (node.has_input(kBias)) {
    p.bias = constant(kBias);  // a computed bias is left to the reference kernel
    if (p.bias == nullptr || p.bias->dtype() != DType::kF32 || p.bias->dims() != Dims{p.n}) return std::nullopt;
  }
  auto epilogue = hwy_cpu::anchor_vector_epilogue(node, *y_dims);
  if (!epilogue) return std::nullopt;
  p.has_residual = node.has_input(kResidual);
  p.epilogue = std::move(*epilogue);
  return p;
}

// oneDNN's int8 matmul making the int32 sums (A - a_zero) B in Y (see the file comment).
struct OneDnnSums {
  dnnl::matmul prim;
  dnnl::memory weights;  // B in the layout the primitive chose, packed once
  dnnl::memory::desc a_md, y_md, scratchpad_md;
  std::string impl;
  std::vector<int32_t> c;  // per column (see the file comment); empty when every one is 0
};

// The sums' primitive for `p` where the target has VNNI; nullopt elsewhere, and where oneDNN
// offers only its reference loops.
std::optional<OneDnnSums> onednn_sums(const IntegerProduct& p) {
  if (active_target().isa < IsaTier::kAvx512CoreVnni) return std::nullopt;
  const bool unsigned_b = p.b->dtype() == DType::kU8;
  std::vector<int32_t> c(static_cast<size_t>(p.n));
  bool any_c = false;
  for (int64_t j = 0; j < p.n; ++j) {
    const int64_t zero = p.b_zero == nullptr ? 0 : p.b_zero->get_int(p.b_zero->numel() == 1 ? 0 : j);
    c[j] = static_cast<int32_t>((unsigned_b ? 128 : 0) - zero);
    any_c |= c[j] != 0;
  }
  std::vector<int8_t> w8(static_cast<size_t>(p.k * p.n));
  for (int64_t i = 0; i < p.k * p.n; ++i) w8[i] = static_cast<int8_t>(p.b->get_int(i) - (unsigned_b ? 128 : 0));
  using dnnl::memory;
  return onednn::try_dnnl<std::optional<OneDnnSums>>([&]() -> std::optional<OneDnnSums> {
           const memory::data_type at = p.a_dtype == DType::kU8 ? memory::data_type::u8 : memory::data_type::s8;
           OneDnnSums s;
           s.a_md = memory::desc({p.m, p.k}, at, memory::format_tag::ab);
           s.y_md = memory::desc({p.m, p.n}, memory::data_type::s32, memory::format_tag::ab);
           const memory::desc b_any({p.k, p.n}, memory::data_type::s8, memory::format_tag::any);
           dnnl::primitive_attr attr = onednn::make_attr();
           attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
           const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(s.a_md, b_any, s.y_md), attr, onednn::cpu_engine());
           if (onednn::is_reference_impl(pd)) return std::nullopt;
           s.impl = pd.impl_info_str();
           s.prim = dnnl::matmul(pd);
           s.scratchpad_md = pd.scratchpad_desc();
           s.weights = onednn::pack(memory::desc({p.k, p.n}, memory::data_type::s8, memory::format_tag::ab),
                                    w8.data(), pd.weights_desc());
           if (any_c) s.c = c;
           return s;
         }).value_or(std::nullopt);
}

// oneDNN's scratchpad for one run, per thread, grown and never shrunk.
char* thread_scratchpad(size_t bytes) {
  thread_local hwy::AlignedFreeUniquePtr<char[]> buffer;
  thread_local size_t size = 0;
  if (bytes > size) {
    buffer = hwy::AllocateAligned<char>(bytes);
    size = bytes;
  }
  return buffer.get();
}

class IntegerGemmKernel final : public Kernel {
 public:
  explicit IntegerGemmKernel(const IntegerProduct& p)
      : sums_(p.sums), m_(p.m), k_(p.k), n_(p.n), a_dtype_(p.a_dtype),
        epilogue_(*hwy_cpu::vector_epilogue(p.epilogue)), has_residual_(p.has_residual) {
    nr_ = static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(hwy_cpu::IntGemmPanelWidth)());
    mr_ = static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(hwy_cpu::IntGemmTileRows)());
    panels_ = (n_ + nr_ - 1) / nr_;
    k_even_ = (k_ + 1) / 2 * 2;
    choose_blocks(active_target());
    onednn_ = onednn_sums(p);
    if (!onednn_) pack(p);
    b_scale_.assign(static_cast<size_t>(panels_ * nr_), 0.0f);
    for (int64_t j = 0; j < n_ && p.b_scale != nullptr; ++j) {
      b_scale_[j] = p.b_scale->data<float>()[p.b_scale->numel() == 1 ? 0 : j];
    }
    if (p.bias != nullptr) {
      bias_.assign(static_cast<size_t>(panels_ * nr_), 0.0f);
      std::copy(p.bias->data<float>(), p.bias->data<float>() + n_, bias_.begin());
    }
  }

  std::string_view name() const override { return "cpu.gemm_i16"; }
  // B, its zero point and scale and the bias were copied (packed) at creation.
  bool reads_input(size_t i) const override {
    return sums_ ? i == kA || i == kSumsAZero : i == kA || i == kResidual || i == kAScale || i == kAZero;
  }
  std::string implementation() const override {
    if (onednn_) return str_cat("int8 sums on oneDNN ", onednn_->impl, ", then ", highway_dispatch_target(), " ", mr_, "x", nr_, " tiles");
    return str_cat(highway_dispatch_target(), " ", mr_, "x", nr_, " kc ", kc_);
  }

  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    const auto input = [&](size_t i) { return i < in.size() ? in[i] : nullptr; };
    const Tensor* a = input(kA);
    const Tensor* a_scale = sums_ ? nullptr : input(kAScale);
    const Tensor* a_zero = input(sums_ ? kSumsAZero : kAZero);
    const Tensor* residual = has_residual_ ? input(kResidual) : nullptr;
    if (a == nullptr || a->dtype() != a_dtype_ || a->numel() != m_ * k_ ||
        (!sums_ && (a_scale == nullptr || a_scale->dtype() != DType::kF32 || a_scale->numel() != 1)) ||
        (a_zero != nullptr && (a_zero->dtype() != a_dtype_ || a_zero->numel() != 1)) ||
        (has_residual_ && (residual == nullptr || residual->dtype() != DType::kF32 || residual->numel() != m_ * n_)) ||
        out.empty() || out[0] == nullptr || out[0]->dtype() != (sums_ ? DType::kI32 : DType::kF32) ||
        out[0]->numel() != m_ * n_) {
      return Status::internal_error("cpu.gemm_i16: an operand does not have its planned shape");
    }
    const int32_t az = a_zero == nullptr ? 0 : static_cast<int32_t>(a_zero->get_int(0));
    // The replaced graph's Mul(a_scale, b_scale), per column.
    std::vector<float> scale(sums_ ? 0 : b_scale_.size());
    for (size_t j = 0; j < scale.size(); ++j) scale[j] = a_scale->data<float>()[0] * b_scale_[j];
    if (onednn_) return run_onednn(*a, az, scale, residual, *out[0]);
    auto a16 = hwy::AllocateAligned<int16_t>(static_cast<size_t>(m_ * k_even_));
    // MatMulInteger's int32 sums are what the tiles store before their last K block; they go
    // through the float pointer the tiles take, as bits.
    float* y = sums_ ? reinterpret_cast<float*>(out[0]->data<int32_t>()) : out[0]->data<float>();
    const int64_t threads = m_ * n_ * k_ >= kParallelMacs ? omp_get_max_threads() : 1;
#pragma omp parallel num_threads(static_cast<int>(threads)) if (threads > 1)
    {
#pragma omp for schedule(static)
      for (int64_t r = 0; r < m_; ++r) {
        int16_t* to = a16.get() + r * k_even_;
        if (a_dtype_ == DType::kU8) {
          const uint8_t* from = a->data<uint8_t>() + r * k_;
          for (int64_t i = 0; i < k_; ++i) to[i] = static_cast<int16_t>(int32_t{from[i]} - az);
        } else {
          const int8_t* from = a->data<int8_t>() + r * k_;
          for (int64_t i = 0; i < k_; ++i) to[i] = static_cast<int16_t>(int32_t{from[i]} - az);
        }
        if (k_even_ != k_) to[k_] = 0;
      }
      // (the loop's barrier: every row is converted before any tile reads it)
      const GemmShare share = gemm_share(panels_, m_, mr_, omp_get_thread_num(), omp_get_num_threads());
      run_block(reinterpret_cast<const int32_t*>(a16.get()), sums_ ? nullptr : scale.data(),
                residual ? residual->data<float>() : nullptr, y, share.p0, share.p1, share.r0, share.r1);
    }
    return Status::ok();
  }

 private:
  // gemm_blocking.h's blocks of int16, whole pairs of k.
  void choose_blocks(const Target& target) {
    const GemmBlocks b = gemm_blocks(target, k_even_, panels_, nr_, mr_, sizeof(int16_t), 2);
    kc_ = b.kc;
    mc_ = b.mc;
  }

  // The sums by oneDNN into Y, then (unless Y is the sums) the tiles' last stage over them.
  Status run_onednn(const Tensor& a, int32_t az, const std::vector<float>& scale, const Tensor* residual,
                    Tensor& y) const {
    using dnnl::memory;
    dnnl::stream stream(onednn::cpu_engine());
    int32_t zero_point = az;
    memory zp({{1}, memory::data_type::s32, memory::format_tag::x}, onednn::cpu_engine(), &zero_point);
    memory src(onednn_->a_md, onednn::cpu_engine(), const_cast<void*>(a.raw_data()));
    memory dst(onednn_->y_md, onednn::cpu_engine(), y.raw_data());
    memory pad(onednn_->scratchpad_md, onednn::cpu_engine(), thread_scratchpad(onednn_->scratchpad_md.get_size()));
    memory weights = onednn_->weights;
    onednn_->prim.execute(stream, {{DNNL_ARG_SRC, src},
                                   {DNNL_ARG_WEIGHTS, weights},
                                   {DNNL_ARG_DST, dst},
                                   {DNNL_ARG_SCRATCHPAD, pad},
                                   {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp}});
    stream.wait();
    if (!onednn_->c.empty()) add_weight_zero_point_terms(a, az, y.data<int32_t>());
    if (sums_) return Status::ok();
    float* out = y.data<float>();  // holding the int32 sums as bits until each tile converts them
    const int64_t threads = m_ * n_ >= kParallelMacs / 64 ? omp_get_max_threads() : 1;
#pragma omp parallel num_threads(static_cast<int>(threads)) if (threads > 1)
    {
      const GemmShare share = gemm_share(panels_, m_, mr_, omp_get_thread_num(), omp_get_num_threads());
      for (int64_t p = share.p0; p < share.p1; ++p) {
        const int64_t col = p * nr_;
        hwy_cpu::IntTile tile{};
        tile.c = out + share.r0 * n_ + col;
        tile.ldc = static_cast<size_t>(n_);
        tile.accumulate = true;  // the sums, with no K steps left
        tile.scale = scale.data() + col;
        tile.bias = bias_.empty() ? nullptr : bias_.data() + col;
        tile.epilogue = epilogue_.empty() ? nullptr : &epilogue_;
        tile.residual = residual != nullptr ? residual->data<float>() + share.r0 * n_ + col : nullptr;
        tile.ldr = static_cast<size_t>(n_);
        HWY_DYNAMIC_DISPATCH(hwy_cpu::IntGemmPanelRows)(tile, static_cast<size_t>(share.r1 - share.r0),
                                                        static_cast<size_t>(std::min(nr_, n_ - col)));
      }
    }
    return Status::ok();
  }

  // sums[m, n] += c[n] * S[m] (the file comment), in wrapping int32 as the sums themselves.
  void add_weight_zero_point_terms(const Tensor& a, int32_t az, int32_t* sums) const {
    const std::vector<int32_t>& c = onednn_->c;
#pragma omp parallel for schedule(static) if (m_ * (k_ + n_) >= kParallelMacs / 16)
    for (int64_t r = 0; r < m_; ++r) {
      uint32_t row = 0;
      if (a_dtype_ == DType::kU8) {
        const uint8_t* from = a.data<uint8_t>() + r * k_;
        for (int64_t i = 0; i < k_; ++i) row += static_cast<uint32_t>(int32_t{from[i]} - az);
      } else {
        const int8_t* from = a.data<int8_t>() + r * k_;
        for (int64_t i = 0; i < k_; ++i) row += static_cast<uint32_t>(int32_t{from[i]} - az);
      }
      uint32_t* y = reinterpret_cast<uint32_t*>(sums + r * n_);
      for (int64_t j = 0; j < n_; ++j) y[j] += static_cast<uint32_t>(c[j]) * row;
    }
  }

  // Block [k0, k0 + kc) of every panel in turn (cpu.gemm's order), each as kc / 2 rows of 2 * NR int16.
  const int16_t* panel_block(int64_t p, int64_t k0, int64_t kc) const {
    return packed_->get() + (k0 * panels_ + p * kc) * nr_;
  }

  // Once per session for equal weights (packed_floats.h): a plan per input shape shares them.
  void pack(const IntegerProduct& p) {
    const std::string how =
        str_cat("cpu.gemm_i16 ", dtype_name(p.b->dtype()), " k ", k_, " n ", n_, " nr ", nr_, " kc ", kc_, " zero ",
                p.b_zero == nullptr ? std::string("none")
                                    : str_cat(dtype_name(p.b_zero->dtype()), " ", p.b_zero->numel(), " ",
                                              digest_bytes(p.b_zero->raw_data(), p.b_zero->nbytes())));
    packed_ = pack_aligned<int16_t>(*p.b, how, static_cast<size_t>(panels_ * k_even_ * nr_), [&](int16_t* packed) {
      for (int64_t i = 0; i < k_; ++i) {
        const int64_t k0 = i / kc_ * kc_, kc = std::min(kc_, k_even_ - k0), pair = (i - k0) / 2, half = (i - k0) % 2;
        for (int64_t j = 0; j < n_; ++j) {
          const int64_t zero = p.b_zero == nullptr ? 0 : p.b_zero->get_int(p.b_zero->numel() == 1 ? 0 : j);
          const int64_t panel = j / nr_, col = j % nr_;
          packed[static_cast<size_t>((k0 * panels_ + panel * kc) * nr_ + pair * 2 * nr_ + 2 * col + half)] =
              static_cast<int16_t>(p.b->get_int(i * n_ + j) - zero);
        }
      }
    });
  }

  // Rows [r0, r1) x panels [p0, p1) of Y: one thread's share. `scale` null: Y keeps the int32 sums.
  void run_block(const int32_t* a, const float* scale, const float* residual, float* y, int64_t p0, int64_t p1,
                 int64_t r0, int64_t r1) const {
    const int64_t lda = k_even_ / 2;
    for (int64_t k0 = 0; k0 < k_even_; k0 += kc_) {
      const int64_t kc = std::min(kc_, k_even_ - k0);
      const bool last = k0 + kc == k_even_;
      for (int64_t i0 = r0; i0 < r1; i0 += mc_) {
        const int64_t rows = std::min(mc_, r1 - i0);
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t col = p * nr_;
          hwy_cpu::IntTile tile{};
          tile.a = a + i0 * lda + k0 / 2;
          tile.lda = static_cast<size_t>(lda);
          tile.b = panel_block(p, k0, kc);
          tile.pairs = static_cast<size_t>(kc / 2);
          tile.c = y + i0 * n_ + col;
          tile.ldc = static_cast<size_t>(n_);
          tile.accumulate = k0 > 0;
          if (last && scale != nullptr) {
            tile.scale = scale + col;
            tile.bias = bias_.empty() ? nullptr : bias_.data() + col;
            tile.epilogue = epilogue_.empty() ? nullptr : &epilogue_;
            tile.residual = residual != nullptr ? residual + i0 * n_ + col : nullptr;
            tile.ldr = static_cast<size_t>(n_);
          }
          HWY_DYNAMIC_DISPATCH(hwy_cpu::IntGemmPanelRows)(tile, static_cast<size_t>(rows),
                                                          static_cast<size_t>(std::min(nr_, n_ - col)));
        }
      }
    }
  }

  bool sums_;
  int64_t m_, k_, n_;
  DType a_dtype_;
  hwy_cpu::VectorEpilogue epilogue_;
  bool has_residual_;
  int64_t nr_ = 0, mr_ = 0, panels_ = 0, k_even_ = 0, kc_ = 0, mc_ = 0;
  PackedArray<int16_t> packed_;  // B - b_zero, unless oneDNN makes the sums
  std::vector<float> b_scale_, bias_;  // per column, padded to whole panels
  std::optional<OneDnnSums> onednn_;
};

bool supports(const KernelCompileContext& ctx) { return product_of(ctx).has_value(); }

Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
  auto p = product_of(ctx);
  if (!p) return Status::internal_error(str_cat(ctx.node.describe(), ": not a cpu.gemm_i16 node"));
  return std::unique_ptr<Kernel>(std::make_unique<IntegerGemmKernel>(*p));
}

}  // namespace

KernelImpl integer_gemm_kernel() { return {"cpu.gemm_i16", "FusedMatMulInteger", supports, create}; }
KernelImpl integer_gemm_sums_kernel() { return {"cpu.gemm_i16", "MatMulInteger", supports, create}; }

}  // namespace opfuse
#endif  // HWY_ONCE
