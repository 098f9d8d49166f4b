#include "passes/layout_measure.h"

#include <algorithm>
#include <sstream>

#include "ops/fused.h"
#include "ops/op_def.h"
#include "passes/pass_util.h"

namespace opfuse {
namespace {

void put_attr(std::ostringstream& s, const AttrValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) s << *i;
  else if (const auto* f = std::get_if<float>(&v)) s << *f;
  else if (const auto* str = std::get_if<std::string>(&v)) s << *str;
  else if (const auto* is = std::get_if<std::vector<int64_t>>(&v)) for (int64_t x : *is) s << x << ',';
  else if (const auto* fs = std::get_if<std::vector<float>>(&v)) for (float x : *fs) s << x << ',';
  else if (const auto* ss = std::get_if<std::vector<std::string>>(&v)) for (const auto& x : *ss) s << x << ',';
  else s << '?';
}

std::string dims_key(const std::vector<int64_t>& d) {
  std::ostringstream s;
  for (int64_t x : d) s << x << 'x';
  return s.str();
}

}  // namespace

std::optional<std::string> conv_timing_key(const Node& conv, int64_t block, bool x_plain) {
  const auto x = known_dims(conv.input(0));
  const auto y = known_dims(conv.output(0));
  const auto w = known_dims(conv.input(1));
  if (!x || !y || !w || x->size() != 4 || y->size() != 4) return std::nullopt;
  std::ostringstream key;
  key << "conv " << block << ' ' << x_plain << ' ' << dims_key(*x) << ' ' << dims_key(*w) << ' '
      << conv.has_input(2) << conv.has_input(3);
  for (const auto& [name, value] : conv.attrs) {
    key << ' ' << name << '=';
    put_attr(key, value);
  }
  return key.str();
}

std::string reorder_timing_key(const std::vector<int64_t>& dims, int64_t block) {
  return str_cat("reorder ", block, " ", dims_key(dims));
}

namespace {
constexpr double kReorderBytesPerMs = 2.5e7;  // ~25 GB/s read + write
constexpr double kReorderOverheadMs = 0.01;

EstimatingLayoutTimer::Rates rates_for(const Target& target) {
  // AVX-512: ~300 GFLOP/s for oneDNN's convs on 2 cores; nChw16c jit vs nhwc brgconv (above);
  // oneDNN runs a dilated conv on blocked data as brgconv on its own layout, reordering X and Y.
  // cpu.winograd on nChw16c against brgconv on nhwc, ResNet-50's 3x3 convs on an AMD EPYC Zen 5
  // (2 threads, per-node medians of 20 runs): 64 -> 64 on 56x56 381-431 us against 573-593,
  // 128 -> 128 on 28x28 429-456 against 530-545, 256 -> 256 on 14x14 472-529 against 526-579.
  if (target.has_avx512()) return {3e8, 1.25, 1.0, 1.0, true, 0.8};
  // AVX2 (measured with --target avx2, docs/benchmarks.md): half the vector width. Dilated dense
  // convs run in place on nChw8c (cpu.conv, or onednn.tap_regions's own copies), while oneDNN
  // 2.6 runs them on nhwc as jit:avx2 at 1.25x cpu.conv's time or as gemm:jit at 4x (fr_detect's
  // 16 -> 16 3x3 convs of dilation 2, 3 and 5 on 30x40: 49, 48 and 166 us against 39, 39, 42).
  // Winograd is not counted: blocked dense convs already cost what nhwc ones do here, and the
  // layouts chosen with that were measured with cpu.winograd running (docs/benchmarks.md, wave 20).
  return {1.5e8, 1.0, 1.0, 2.0, false, 1.0};
}
}  // namespace

bool estimated_as_winograd(const Node& conv, int64_t block, const Target& target) {
  const auto y = known_dims(conv.output(0));
  const auto w = known_dims(conv.input(1));
  if (block <= 0 || !y || !w || y->size() != 4 || w->size() != 4 || (*w)[2] != 3 || (*w)[3] != 3) return false;
  const AttrReader attrs(conv);
  if (attrs.has("group") && attrs.get_int("group") != 1) return false;
  if (attrs.has("dilations")) {
    for (int64_t v : attrs.get_ints("dilations")) {
      if (v != 1) return false;
    }
  }
  // Stride 1, or 2 on both sides (the stride-2 form: 25 transformed positions per tile, not 16).
  int64_t stride = 1;
  if (attrs.has("strides")) {
    const std::vector<int64_t> strides = attrs.get_ints("strides");
    if (strides.size() != 2 || strides[0] != strides[1] || strides[0] < 1 || strides[0] > 2) return false;
    stride = strides[0];
  }
  const int64_t positions = stride == 1 ? 16 : 25;
  // cpu.conv's panels take output blocks in pairs.
  const int64_t c = (*w)[1], m = (*w)[0];
  const int64_t groups = (c + block - 1) / block, out_blocks = (m + block - 1) / block;
  if (out_blocks % 2 != 0) return false;
  // cpu.winograd's decline (plan_of in kernels/cpu/winograd_conv_kernel.cc): chunks of fewer
  // than 6 tiles with transformed filters over half of L2, at stride 2 or where the image has
  // fewer than 6 tiles or fewer panels of output blocks than threads to split the products by. It
  // sizes chunks for the threads it runs on; a compile is for the target's cores.
  const int64_t tile_rows = ((*y)[2] + 1) / 2, row_tiles = ((*y)[3] + 1) / 2;
  const int64_t threads = std::max(1, target.cores);
  const int64_t l2 = target.l2_bytes > 0 ? target.l2_bytes : 512 * 1024;
  const int64_t row_bytes = positions * row_tiles * (groups + out_blocks) * block * 4;
  const int64_t spread = (tile_rows + 2 * threads - 1) / (2 * threads);
  const int64_t chunk_rows = std::clamp<int64_t>(std::min(l2 / 2 / row_bytes, spread), 1, tile_rows);
  const int64_t filter_bytes = 16 * groups * out_blocks * block * block * 4;
  const int64_t panels = out_blocks / (out_blocks % 4 == 0 ? 4 : 2);
  return chunk_rows * row_tiles >= 6 || filter_bytes <= l2 / 2 ||
         (stride == 1 && tile_rows * row_tiles >= 6 && panels >= threads);
}

EstimatingLayoutTimer::EstimatingLayoutTimer(const Target& target) : target_(target), rates_(rates_for(target)) {}

double EstimatingLayoutTimer::conv_ms(const Node& conv, int64_t block, bool x_plain) {
  const auto x = known_dims(conv.input(0));
  const auto y = known_dims(conv.output(0));
  const auto w = known_dims(conv.input(1));
  if (!x || !y || !w || x->size() != 4 || y->size() != 4 || w->size() != 4) return -1;
  const AttrReader attrs(conv);
  const bool grouped = attrs.has("group") && attrs.get_int("group") != 1;
  const bool dense_window = !grouped && ((*w)[2] > 1 || (*w)[3] > 1);
  bool dilated = false;
  if (attrs.has("dilations")) {
    for (int64_t d : attrs.get_ints("dilations")) dilated |= d > 1;
  }
  double flops = 2.0;
  for (int64_t d : *y) flops *= static_cast<double>(d);
  for (size_t i = 1; i < 4; ++i) flops *= static_cast<double>((*w)[i]);
  double ms = flops / rates_.flops_per_ms;
  if (block == 0) return dense_window && dilated ? ms * rates_.nhwc_dilated_factor : ms;
  // A first conv reading the plain image when blocked runs oneDNN's dedicated kernel for it;
  // cpu.winograd needs X blocked.
  if (!x_plain && estimated_as_winograd(conv, block, target_)) return ms * rates_.winograd_factor;
  if (!x_plain) ms *= dense_window ? rates_.blocked_window_factor : rates_.blocked_pointwise_factor;
  if (dense_window && dilated && rates_.blocked_dilated_reorders) ms += reorder_ms(*x, block) + reorder_ms(*y, block);
  return ms;
}

double EstimatingLayoutTimer::reorder_ms(const std::vector<int64_t>& dims, int64_t) {
  double bytes = 2.0 * sizeof(float);
  for (int64_t d : dims) bytes *= static_cast<double>(d);
  return kReorderOverheadMs + bytes / kReorderBytesPerMs;
}

RecordedLayoutTimer::RecordedLayoutTimer(const std::map<std::string, double>& timings, const Target& target)
    : timings_(timings), estimate_(target) {}

double RecordedLayoutTimer::conv_ms(const Node& conv, int64_t block, bool x_plain) {
  const auto key = conv_timing_key(conv, block, x_plain);
  const auto it = key ? timings_.find(*key) : timings_.end();
  return it != timings_.end() ? it->second : estimate_.conv_ms(conv, block, x_plain);
}

double RecordedLayoutTimer::reorder_ms(const std::vector<int64_t>& dims, int64_t block) {
  const auto it = timings_.find(reorder_timing_key(dims, block));
  return it != timings_.end() ? it->second : estimate_.reorder_ms(dims, block);
}

}  // namespace opfuse
