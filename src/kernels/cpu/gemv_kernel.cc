// "cpu.gemv": Y[1, N] = post(alpha * a[K] * B[K, N] + bias) for MatMul / Gemm / FusedMatMul /
// FusedGemm with M = 1 and a constant B (kernels/cpu/gemv_kernel.h).
//
// Why not oneDNN: at M = 1 the node is pure weight streaming (K*N*4 bytes read once, 2 FLOPs per
// weight), and in a model the weights are cold: the rest of the run evicted them. oneDNN's
// matmul on [1,1280]x[1280,1000] took ~130 us hot but ~420 us cold, and ~430-550 us inside
// mobilenet_v3 / efficientnet (ONNX Runtime: ~230 us on the same nodes; the STREAM triad of this
// machine puts 5 MB at ~270 us). Here the weights are packed once, at kernel creation, into
// panels of kGemvPanel columns x all K rows (alpha folded in); thread t gets a contiguous run of
// panels, so each thread reads one linear stream the hardware prefetcher follows, with every
// load 64-byte aligned. Within a panel the K rows are read as four interleaved streams (see
// GemvPanelFixed); then the thread applies the bias and the epilogue to its own columns while
// they are in L1. Software prefetch and 2 MB pages for the packed weights were tried and
// showed no clear gain in noisy measurements (the hardware prefetcher follows the streams).
#ifndef OPFUSE_KERNELS_CPU_GEMV_KERNEL_DECLS_
#define OPFUSE_KERNELS_CPU_GEMV_KERNEL_DECLS_
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

#include "hwy/aligned_allocator.h"
#include "kernels/cpu/constant_weights_product.h"
#include "kernels/cpu/gemv_kernel.h"
#include "kernels/cpu/hwy_epilogue.h"
#include "kernels/cpu/hwy_kernels.h"
#include "kernels/cpu/packed_floats.h"
#include "ops/fused.h"
#include "ops/op_def.h"
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/gemv_kernel.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// y[0, kVecs * lanes) = sum_k a[k] * w[k * stride + j]; w is 64-byte aligned, stride a multiple
// of 16 floats. The K rows are walked as kStreams interleaved runs (rows [s*h, (s+1)*h) for
// stream s), each with its own accumulators: kStreams concurrent memory streams instead of one
// keep more cache-line fetches in flight (measured, two threads, weights evicted, 1280 x 1000:
// four streams ~20% faster than one walk with even/odd accumulator banks; eight no better), and
// kStreams * kVecs independent FMA chains keep the FMA units busy when the weights are hot.
template <size_t kVecs>
HWY_INLINE void GemvPanelFixed(const float* HWY_RESTRICT a, const float* HWY_RESTRICT w, int64_t k,
                               size_t stride, float* HWY_RESTRICT y) {
  using DF = hn::ScalableTag<float>;
  const DF d;
  constexpr size_t L = hn::MaxLanes(DF());
  // 16 accumulators at most (AVX-512 has 32 registers, AVX2 16: there two streams).
  constexpr size_t kStreams = std::clamp<size_t>(16 / kVecs, 1, 4);
  hn::Vec<DF> acc[kStreams][kVecs];
  for (size_t b = 0; b < kStreams; ++b) {
    for (size_t v = 0; v < kVecs; ++v) acc[b][v] = hn::Zero(d);
  }
  const size_t h = static_cast<size_t>(k) / kStreams;
  for (size_t i = 0; i < h; ++i) {
    for (size_t b = 0; b < kStreams; ++b) {
      const size_t r = b * h + i;
      const float* row = w + r * stride;
      const auto ar = hn::Set(d, a[r]);
      for (size_t v = 0; v < kVecs; ++v) acc[b][v] = hn::MulAdd(ar, hn::Load(d, row + v * L), acc[b][v]);
    }
  }
  for (size_t r = h * kStreams; r < static_cast<size_t>(k); ++r) {  // the k % kStreams last rows
    const float* row = w + r * stride;
    const auto ar = hn::Set(d, a[r]);
    for (size_t v = 0; v < kVecs; ++v) acc[0][v] = hn::MulAdd(ar, hn::Load(d, row + v * L), acc[0][v]);
  }
  for (size_t b = 1; b < kStreams; ++b) {
    for (size_t v = 0; v < kVecs; ++v) acc[0][v] = hn::Add(acc[0][v], acc[b][v]);
  }
  for (size_t v = 0; v < kVecs; ++v) hn::StoreU(acc[0][v], d, y + v * L);
}

// One packed panel: `stride` stored columns (a multiple of 16, at most kGemvPanel), of which the
// first `width` are real; writes y[0, width).
void GemvPanel(const float* a, const float* w, int64_t k, int64_t stride, int64_t width, float* y) {
  constexpr size_t L = hn::MaxLanes(hn::ScalableTag<float>());
  constexpr size_t kGroup = 16 / L;  // vectors per 16 floats (the stride granularity)
  static_assert(kGemvPanel == 64 && 16 % L == 0, "the switch below covers 16..64 columns");
  alignas(64) float tmp[kGemvPanel];
  float* dst = width == stride ? y : tmp;
  const size_t s = static_cast<size_t>(stride);
  switch (stride / 16) {
    case 4: GemvPanelFixed<4 * kGroup>(a, w, k, s, dst); break;
    case 3: GemvPanelFixed<3 * kGroup>(a, w, k, s, dst); break;
    case 2: GemvPanelFixed<2 * kGroup>(a, w, k, s, dst); break;
    default: GemvPanelFixed<1 * kGroup>(a, w, k, s, dst); break;
  }
  if (dst != y) std::memcpy(y, tmp, static_cast<size_t>(width) * sizeof(float));
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace opfuse {
namespace hwy_cpu {
HWY_EXPORT(GemvPanel);
}  // namespace hwy_cpu

namespace {

using Dims = std::vector<int64_t>;

// Below this many weights one thread streams them: waking a second costs more than it saves.
constexpr int64_t kParallelWeights = int64_t{1} << 16;

int64_t numel_of(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

using GemvPlan = ConstantWeightsProduct;

std::optional<GemvPlan> single_row(std::optional<GemvPlan> plan) {
  return plan && plan->m == 1 ? plan : std::nullopt;
}

// Conv / opfuse::FusedConv / opfuse::BlockedConv with a 1x1 (or 1) kernel over a 1x1 map (or one
// position), batch 1,
// one group, no padding, constant weights and bias: Y = W X + B, the squeeze-excitation convs of
// MobileNetV3 and EfficientNet (oneDNN's conv spent ~20 us per call on these few KB). At this
// size X and Y hold their channels in order whatever the layout (plain [1,C,1,1], nChw16c
// [1,Cb,1,1,16] with the padding lanes last, channels-last [1,1,1,1,C]), so the weights become
// an [N', K'] matrix over the padded lengths, zero where a lane is padding; padded outputs get
// the epilogue of 0, a finite value.
std::optional<GemvPlan> conv_plan(const KernelCompileContext& ctx, bool fused) {
  const Node& node = ctx.node;
  if (node.outputs().size() != 1 || node.inputs().size() < 2) return std::nullopt;
  const auto x = hwy_cpu::static_dims_of(node.input(0));
  const auto w = hwy_cpu::static_dims_of(node.input(1));
  const auto y = hwy_cpu::static_dims_of(node.output(0));
  // [1, C, 1] (1-d), [1, C, 1, 1], or blocked [1, Cb, 1, 1, b] / [1, 1, 1, 1, C].
  auto single_pixel = [](const std::optional<Dims>& d) {
    if (!d || d->size() < 3 || d->size() > 5 || (*d)[0] != 1) return false;
    const size_t spatial_end = d->size() == 5 ? 4 : d->size();
    for (size_t i = 2; i < spatial_end; ++i) {
      if ((*d)[i] != 1) return false;
    }
    return true;
  };
  if (!single_pixel(x) || !single_pixel(y) || !w || (w->size() != 3 && w->size() != 4)) return std::nullopt;
  for (size_t i = 2; i < w->size(); ++i) {
    if ((*w)[i] != 1) return std::nullopt;
  }
  const AttrReader attrs(node);
  if (attrs.get_int("group") != 1) return std::nullopt;
  if (attrs.has("pads")) {
    for (int64_t pad : attrs.get_ints("pads")) {
      if (pad != 0) return std::nullopt;
    }
  }
  const int64_t oc = (*w)[0], ic = (*w)[1], kp = numel_of(*x), np = numel_of(*y);
  if (oc <= 0 || ic <= 0 || kp < ic || np < oc || (x->size() != 5 && kp != ic) || (y->size() != 5 && np != oc)) {
    return std::nullopt;
  }
  const Tensor* weights = ctx.f32_constant(1, *w);
  const Tensor* bias = node.has_input(2) ? ctx.f32_constant(2, Dims{oc}) : nullptr;
  if (weights == nullptr || (node.has_input(2) && bias == nullptr)) return std::nullopt;
  GemvPlan plan;
  plan.m = 1;
  plan.k = kp;
  plan.n = np;
  plan.trans_b = true;
  Tensor padded = Tensor::zeros(DType::kF32, {np, kp}).value();
  float* pw = padded.data<float>();
  const float* wv = weights->data<float>();
  for (int64_t o = 0; o < oc; ++o) std::copy(wv + o * ic, wv + (o + 1) * ic, pw + o * kp);
  plan.own_b = std::make_shared<const Tensor>(std::move(padded));
  plan.b = plan.own_b.get();
  if (bias != nullptr) {
    Tensor padded_bias = Tensor::zeros(DType::kF32, {np}).value();
    std::copy(bias->data<float>(), bias->data<float>() + oc, padded_bias.data<float>());
    plan.own_bias = std::make_shared<const Tensor>(std::move(padded_bias));
    plan.bias_constant = plan.own_bias.get();
    plan.bias_input = 2;
    plan.bias_numel = np;
  }
  if (!fused) return node.inputs().size() <= 3 ? std::optional(plan) : std::nullopt;
  if (!read_fused_tail(ctx, *y, plan)) return std::nullopt;
  return plan;
}

class GemvKernel final : public Kernel {
 public:
  explicit GemvKernel(GemvPlan plan)
      : plan_(std::move(plan)), epilogue_(hwy_cpu::vector_epilogue(plan_.epilogue).value_or(hwy_cpu::VectorEpilogue{})) {
    pack_weights();
    bias_ = plan_.expanded_bias();
    plan_.b = plan_.bias_constant = nullptr;  // packed / expanded: not needed at run time
    plan_.own_b.reset();
    plan_.own_bias.reset();
  }

  std::string_view name() const override { return "cpu.gemv"; }
  bool reads_input(size_t i) const override {
    return i == 0 || (plan_.bias_input >= 0 && i == static_cast<size_t>(plan_.bias_input) && bias_.empty()) ||
           (i == 3 && plan_.has_residual());
  }

  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    const int64_t k = plan_.k, n = plan_.n;
    auto f32_of = [&](size_t i, int64_t numel) -> const float* {
      const Tensor* t = i < in.size() ? in[i] : nullptr;
      return t && t->dtype() == DType::kF32 && t->numel() == numel ? t->data<float>() : nullptr;
    };
    const float* a = f32_of(0, k);
    const float* bias = nullptr;
    if (plan_.bias_input >= 0 && bias_.empty()) bias = f32_of(plan_.bias_input, plan_.bias_numel);
    const float* residual = in.size() > 3 && in[3] != nullptr ? f32_of(3, n) : nullptr;
    const bool needs_residual = plan_.has_residual();
    if (a == nullptr || (plan_.bias_input >= 0 && bias_.empty() && bias == nullptr) ||
        (needs_residual && residual == nullptr) || out.empty() || out[0] == nullptr ||
        out[0]->dtype() != DType::kF32 || out[0]->numel() != n) {
      return Status::internal_error("cpu.gemv: an operand does not have its planned shape");
    }
    float* y = out[0]->data<float>();
    const int64_t panels = (n + kGemvPanel - 1) / kGemvPanel;
    const int64_t threads = k * n >= kParallelWeights ? std::min<int64_t>(omp_get_max_threads(), panels) : 1;
#pragma omp parallel num_threads(static_cast<int>(threads)) if (threads > 1)
    {
      const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t p0 = panels * t / nt, p1 = panels * (t + 1) / nt;
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t col = p * kGemvPanel, width = std::min(kGemvPanel, n - col);
        HWY_DYNAMIC_DISPATCH(hwy_cpu::GemvPanel)(a, packed_->get() + col * k, k, stored_width(width),
                                                 width, y + col);
      }
      finish(y, bias, residual, p0 * kGemvPanel, std::min(p1 * kGemvPanel, n));
    }
    return Status::ok();
  }

 private:
  static int64_t stored_width(int64_t width) { return (width + 15) / 16 * 16; }

  // Panel p (columns [64p, 64p + width)) starts at float 64p * K: [K x stored_width(width)].
  void pack_weights() {
    const int64_t k = plan_.k, n = plan_.n;
    const int64_t last = (n - 1) / kGemvPanel * kGemvPanel;
    uint32_t alpha_bits = 0;
    std::memcpy(&alpha_bits, &plan_.alpha, sizeof(alpha_bits));
    const std::string how = str_cat("cpu.gemv k ", k, " n ", n, plan_.trans_b ? " trans_b" : "", " alpha ", alpha_bits);
    packed_ = pack_floats(*plan_.b, how, static_cast<size_t>(last * k + stored_width(n - last) * k), [&](float* packed) {
      for (int64_t col = 0; col < n; col += kGemvPanel) {
        const int64_t width = std::min(kGemvPanel, n - col), stride = stored_width(width);
        float* panel = packed + col * k;
        // Read B along its contiguous axis; the panel (<= 64 * K floats) takes the strided writes.
        if (plan_.trans_b) {
          for (int64_t j = 0; j < width; ++j) {
            for (int64_t i = 0; i < k; ++i) panel[i * stride + j] = plan_.alpha * plan_.weight(i, col + j);
          }
        } else {
          for (int64_t i = 0; i < k; ++i) {
            for (int64_t j = 0; j < width; ++j) panel[i * stride + j] = plan_.alpha * plan_.weight(i, col + j);
          }
        }
      }
    });
  }

  // Bias, then the post-ops in order, on columns [c0, c1) (this thread's, still in L1).
  void finish(float* y, const float* bias, const float* residual, int64_t c0, int64_t c1) const {
    if (!bias_.empty()) {
      for (int64_t j = c0; j < c1; ++j) y[j] += bias_[j];
    } else if (bias != nullptr) {
      const bool scalar = plan_.bias_numel == 1;
      for (int64_t j = c0; j < c1; ++j) y[j] += plan_.bias_scale * bias[scalar ? 0 : j];
    }
    hwy_cpu::apply_epilogue_here(epilogue_, y + c0, residual != nullptr ? residual + c0 : nullptr, c1 - c0);
  }

  GemvPlan plan_;
  PackedFloats packed_;
  hwy_cpu::VectorEpilogue epilogue_;  // read_fused_tail checked it has a vector form
  std::vector<float> bias_;  // a constant bias, scaled and expanded to N
};

enum class Anchor { kMatMul, kGemm, kConv };

template <Anchor kAnchor, bool kFused>
std::optional<GemvPlan> plan_of(const KernelCompileContext& ctx) {
  switch (kAnchor) {
    case Anchor::kMatMul: return single_row(matmul_product(ctx, kFused));
    case Anchor::kGemm: return single_row(gemm_product(ctx, kFused));
    case Anchor::kConv: return conv_plan(ctx, kFused);
  }
  return std::nullopt;
}

template <Anchor kAnchor, bool kFused>
bool supports(const KernelCompileContext& ctx) {
  return plan_of<kAnchor, kFused>(ctx).has_value();
}

template <Anchor kAnchor, bool kFused>
Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
  auto plan = plan_of<kAnchor, kFused>(ctx);
  if (!plan) return Status::internal_error(str_cat(ctx.node.describe(), ": not a cpu.gemv node"));
  return std::unique_ptr<Kernel>(std::make_unique<GemvKernel>(std::move(*plan)));
}

}  // namespace

KernelImpl gemv_matmul_kernel() {
  return {"cpu.gemv", "MatMul", supports<Anchor::kMatMul, false>, create<Anchor::kMatMul, false>};
}
KernelImpl gemv_gemm_kernel() {
  return {"cpu.gemv", "Gemm", supports<Anchor::kGemm, false>, create<Anchor::kGemm, false>};
}
KernelImpl gemv_fused_matmul_kernel() {
  return {"cpu.gemv", "FusedMatMul", supports<Anchor::kMatMul, true>, create<Anchor::kMatMul, true>};
}
KernelImpl gemv_fused_gemm_kernel() {
  return {"cpu.gemv", "FusedGemm", supports<Anchor::kGemm, true>, create<Anchor::kGemm, true>};
}
KernelImpl gemv_conv_kernel() {
  return {"cpu.gemv", "Conv", supports<Anchor::kConv, false>, create<Anchor::kConv, false>};
}
KernelImpl gemv_fused_conv_kernel() {
  return {"cpu.gemv", "FusedConv", supports<Anchor::kConv, true>, create<Anchor::kConv, true>};
}
KernelImpl gemv_blocked_conv_kernel() {
  return {"cpu.gemv", "BlockedConv", supports<Anchor::kConv, true>, create<Anchor::kConv, true>};
}

}  // namespace opfuse
#endif  // HWY_ONCE
