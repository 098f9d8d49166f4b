// 2-D MaxPool and AveragePool on plain NCHW f32, the layout models keep between ops that are not
// blocked convs (a quantized model's ConvIntegers, O1/O2). oneDNN 2.6 has jit pooling only for
// blocked and channels-last layouts: on plain NCHW it runs `simple_nchw`, a scalar loop (17 ms
// for IS-Net's 2x2 ceil-mode max pool of 32x512x512; 170 us for each of fr_gender's 2x2 average
// pools of 32x64x64 on AVX2), and keeping NaN costs its max pooling a second pass over a mask.
//
// Here each output row is built tap by tap: for tap (ky, kx) the row of outputs whose window
// holds that tap inside the input is one strided sweep (out[x] = max(out[x], in[x*s + kx*d - p]),
// or out[x] += in[...]), which the compiler vectorises; taps in the padding are skipped, as ONNX
// pads max pools with -Inf and leaves padding out of sums. NaN anywhere in a window gives NaN, as
// in the reference (ops/pool.cc). An average adds its taps in the reference's order (rows, then
// columns) and divides by the reference's count, so both agree bit for bit.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/hwy_kernels.h"
#include "ops/nn_common.h"
#include "ops/op_def.h"

namespace opfuse {
namespace {

struct Axis {
  int64_t in = 0, out = 0, kernel = 1, stride = 1, dilation = 1, pad = 0;
  // For tap t, the outputs whose tap t lies inside the input: [first[t], last[t]).
  std::vector<int64_t> first, last;
  // Per output, how many of its taps an average divides by along this axis.
  std::vector<int64_t> count;
};

// `pad_end`: the end padding an average with count_include_pad counts (not the part of a
// ceil_mode window past it); negative: count only taps inside the input.
Axis make_axis(int64_t in, int64_t out, int64_t k, int64_t s, int64_t d, int64_t pad, int64_t pad_end) {
  Axis a{in, out, k, s, d, pad, {}, {}, std::vector<int64_t>(static_cast<size_t>(out), 0)};
  for (int64_t t = 0; t < k; ++t) {
    // o * s - pad + t * d in [0, in)  <=>  o in [ceil((pad - t*d) / s), ceil((in + pad - t*d) / s))
    auto ceil_div = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); };
    a.first.push_back(std::clamp<int64_t>(ceil_div(pad - t * d, s), 0, out));
    a.last.push_back(std::clamp<int64_t>(ceil_div(in + pad - t * d, s), 0, out));
    if (pad_end < 0) {
      for (int64_t o = a.first.back(); o < a.last.back(); ++o) ++a.count[o];
    }
  }
  if (pad_end >= 0) {
    for (int64_t o = 0; o < out; ++o) {
      const int64_t start = o * s - pad;
      a.count[o] = std::min(start + k, in + pad_end) - start;
    }
  }
  return a;
}

class PlainPoolKernel final : public Kernel {
 public:
  PlainPoolKernel(bool average, int64_t planes, Axis h, Axis w)
      : average_(average), planes_(planes), h_(std::move(h)), w_(std::move(w)) {}

  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    const float* x = in[0]->data<float>();
    float* y = out[0]->data<float>();
    const int64_t rows = planes_ * h_.out;
    const bool parallel = rows * w_.out > hwy_cpu::kParallelThreshold;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t plane = r / h_.out, oy = r % h_.out;
      const float* src = x + plane * h_.in * w_.in;
      float* dst = y + r * w_.out;
      if (average_) {
        average_row(src, oy, dst);
      } else {
        max_row(src, oy, dst);
      }
    }
    return Status::ok();
  }
  std::string_view name() const override { return average_ ? "cpu.avg_pool" : "cpu.max_pool"; }

 private:
  // The input row of tap ky for output row oy, or null when it lies in the padding.
  const float* tap_row(const float* src, int64_t oy, int64_t ky) const {
    if (oy < h_.first[ky] || oy >= h_.last[ky]) return nullptr;
    return src + (oy * h_.stride - h_.pad + ky * h_.dilation) * w_.in;
  }

  void max_row(const float* src, int64_t oy, float* dst) const {
    std::fill_n(dst, w_.out, -std::numeric_limits<float>::infinity());
    for (int64_t ky = 0; ky < h_.kernel; ++ky) {
      const float* row = tap_row(src, oy, ky);
      if (row == nullptr) continue;
      for (int64_t kx = 0; kx < w_.kernel; ++kx) {
        const int64_t first = w_.first[kx];
        max_sweep(row + first * w_.stride + kx * w_.dilation - w_.pad, w_.stride, dst + first, w_.last[kx] - first);
      }
    }
  }

  // out[i] = max(out[i], in[i * stride]) for i < n, NaN-sticky: a NaN tap makes the output NaN,
  // and no later tap compares greater than a NaN. Branch-free, so the compiler vectorises it
  // (a stride of 1, the common 3x3 local-maximum pool, as plain vector loads).
  static void max_sweep(const float* __restrict in, int64_t stride, float* __restrict out, int64_t n) {
    if (stride == 1) {
      for (int64_t i = 0; i < n; ++i) {
        const float v = in[i], m = out[i];
        out[i] = ((v > m) | (v != v)) ? v : m;
      }
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      const float v = in[i * stride], m = out[i];
      out[i] = ((v > m) | (v != v)) ? v : m;
    }
  }

  void average_row(const float* src, int64_t oy, float* dst) const {
    std::fill_n(dst, w_.out, 0.0f);
    for (int64_t ky = 0; ky < h_.kernel; ++ky) {
      const float* row = tap_row(src, oy, ky);
      if (row == nullptr) continue;
      for (int64_t kx = 0; kx < w_.kernel; ++kx) {
        const int64_t offset = kx - w_.pad, s = w_.stride;
        for (int64_t ox = w_.first[kx]; ox < w_.last[kx]; ++ox) dst[ox] += row[ox * s + offset];
      }
    }
    for (int64_t ox = 0; ox < w_.out; ++ox) {
      const int64_t count = h_.count[oy] * w_.count[ox];
      dst[ox] = count > 0 ? dst[ox] / static_cast<float>(count) : 0.0f;
    }
  }

  bool average_;
  int64_t planes_;
  Axis h_, w_;
};

std::unique_ptr<PlainPoolKernel> plan(const KernelCompileContext& ctx, bool average) {
  const Node& node = ctx.node;
  if (node.outputs().size() > 1 && node.output(1) != nullptr) return nullptr;  // Indices
  const auto x = hwy_cpu::static_dims_of(node.input(0));
  const auto y = hwy_cpu::static_dims_of(node.output(0));
  if (!x || !y || x->size() != 4 || y->size() != 4 || (*x)[0] != (*y)[0] || (*x)[1] != (*y)[1]) return nullptr;
  const AttrReader attrs(node);
  auto wa = read_window_attrs(attrs, 2, std::nullopt, !average, node.describe());
  if (!wa.is_ok()) return nullptr;
  const bool ceil_mode = attrs.get_int("ceil_mode") != 0;
  const bool include_pad = average && attrs.get_int("count_include_pad") != 0;
  Axis axes[2];
  for (size_t i = 0; i < 2; ++i) {
    if (average && wa->dilations[i] != 1) return nullptr;
    auto dim = window_dim(*wa, i, (*x)[2 + i], ceil_mode, node.describe());
    if (!dim.is_ok() || dim->out != (*y)[2 + i]) return nullptr;
    axes[i] = make_axis((*x)[2 + i], dim->out, wa->kernel[i], wa->strides[i], wa->dilations[i], dim->pad_begin,
                        include_pad ? dim->pad_end : -1);
  }
  return std::make_unique<PlainPoolKernel>(average, (*x)[0] * (*x)[1], std::move(axes[0]), std::move(axes[1]));
}

template <bool kAverage>
bool supports(const KernelCompileContext& ctx) {
  return plan(ctx, kAverage) != nullptr;
}
template <bool kAverage>
Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
  return std::unique_ptr<Kernel>(plan(ctx, kAverage));
}

}  // namespace

KernelImpl plain_max_pool_kernel() { return {"cpu.max_pool", "MaxPool", supports<false>, create<false>}; }
KernelImpl plain_avg_pool_kernel() { return {"cpu.avg_pool", "AveragePool", supports<true>, create<true>}; }

}  // namespace opfuse
