// Prune conv taps that only ever read padding: a kernel row (column) whose every output position
// lands in the zero padding contributes nothing, so the conv equals one with those rows dropped.
// DeepLabV3's ASPP convs have dilations larger than the feature map (3x3, dilation 36 on 32x32):
// every off-centre tap reads padding, and the conv is exactly a 1x1 conv without padding.
//
//   before                                        after
//     Conv(x: [1,960,32,32], W: [256,960,3,3])      Conv(x, W[:, :, 1:2, 1:2]) {kernel_shape = [1, 1],
//       {dilations = [36,36], pads = [36,36,36,36]}     dilations = [36, 36], pads = [0, 0, 0, 0]}
//
// Algebra, per spatial axis with input size I, output size O, stride s, dilation d, begin pad p:
// tap k reads x[o*s - p + k*d]; it is live when 0 <= o*s - p + k*d < I for some o in [0, O).
// Keeping the live range [lo, hi] (dead taps outside it read zeros only): p' = p - lo*d and
// p_end' = (O-1)*s + (hi-lo)*d + 1 - I - p', so every output reads the same live taps. Refused
// when a dead tap lies between live ones (not a range) or a new pad would be negative. Exact.
// Also for opfuse::QuantizedConv (integer weights), whose padding is x's zero point: a
// dead tap adds (z - z) * w = 0 there too.
#include <cstring>

#include "ops/fused.h"
#include "ops/nn_common.h"
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace opfuse {
namespace {

constexpr std::string_view kPass = "prune_conv_taps";

struct AxisPrune {
  int64_t lo = 0, hi = 0, pad_begin = 0, pad_end = 0;
};

// The live tap range of one axis, or nullopt when it cannot be pruned to a range.
std::optional<AxisPrune> prune_axis(int64_t in, int64_t out, int64_t k, int64_t s, int64_t d, int64_t p) {
  int64_t lo = -1, hi = -1;
  for (int64_t t = 0; t < k; ++t) {
    bool live = false;
    for (int64_t o = 0; o < out && !live; ++o) {
      const int64_t i = o * s - p + t * d;
      live = i >= 0 && i < in;
    }
    if (!live) continue;
    if (lo < 0) lo = t;
    if (hi >= 0 && hi != t - 1) return std::nullopt;  // a dead tap between live ones
    hi = t;
  }
  if (lo < 0) return std::nullopt;  // nothing live: the output is the bias; leave it alone
  AxisPrune a{lo, hi, p - lo * d, 0};
  a.pad_end = (out - 1) * s + (hi - lo) * d + 1 - in - a.pad_begin;
  if (a.pad_begin < 0 || a.pad_end < 0) return std::nullopt;
  return a;
}

Result<bool> prune(Graph& graph, PassContext& ctx, Node* node) {
  const auto x = known_dims(node->input(0));
  const auto y = known_dims(node->output(0));
  const Tensor* w = constant_data(node->input(1));
  const bool integer = node->op_type() == "QuantizedConv";
  if (!x || !y || x->size() != 4 || y->size() != 4 || w == nullptr || w->rank() != 4 ||
      w->dtype() != (integer ? w->dtype() : DType::kF32) || (integer && dtype_size(w->dtype()) != 1)) {
    return false;
  }
  const AttrReader attrs(*node);
  const std::vector<int64_t> kernel = {w->dim(2), w->dim(3)};
  auto wa = read_window_attrs(attrs, 2, kernel, true, node->describe());
  if (!wa.is_ok()) return false;
  AxisPrune axes[2];
  bool smaller = false;
  for (size_t a = 0; a < 2; ++a) {
    auto dim = window_dim(*wa, a, (*x)[2 + a], false, node->describe());
    if (!dim.is_ok() || dim->out != (*y)[2 + a]) return false;
    auto p = prune_axis((*x)[2 + a], dim->out, kernel[a], wa->strides[a], wa->dilations[a], dim->pad_begin);
    if (!p) return false;
    axes[a] = *p;
    smaller |= p->hi - p->lo + 1 < kernel[a];
  }
  if (!smaller) return false;
  const int64_t kh = axes[0].hi - axes[0].lo + 1, kw = axes[1].hi - axes[1].lo + 1;
  const int64_t m = w->dim(0), cg = w->dim(1);
  OPFUSE_ASSIGN_OR_RETURN(Tensor data, Tensor::uninitialized(w->dtype(), {m, cg, kh, kw}, "pruned conv weights"));
  const size_t bytes = dtype_size(w->dtype());
  const char* src = static_cast<const char*>(w->raw_data());
  char* dst = static_cast<char*>(data.raw_data());
  for (int64_t i = 0; i < m * cg; ++i) {
    for (int64_t r = 0; r < kh; ++r) {
      for (int64_t c = 0; c < kw; ++c) {
        std::memcpy(dst + ((i * kh + r) * kw + c) * bytes,
                    src + ((i * w->dim(2) + axes[0].lo + r) * w->dim(3) + axes[1].lo + c) * bytes, bytes);
      }
    }
  }
  Value* pruned = graph.add_constant(node->input(1)->name() + "_pruned", std::move(data));
  graph.set_input(node, 1, pruned);
  node->attrs["kernel_shape"] = AttrValue(std::vector<int64_t>{kh, kw});
  node->attrs["pads"] = AttrValue(std::vector<int64_t>{axes[0].pad_begin, axes[1].pad_begin,
                                                       axes[0].pad_end, axes[1].pad_end});
  node->attrs["auto_pad"] = AttrValue(std::string("NOTSET"));
  PassDecision d;
  d.pass = d.rule = std::string(kPass);
  d.what = str_cat(node_label(*node), ": ", kernel[0], "x", kernel[1], " taps -> ", kh, "x", kw,
                   " (the others read only padding)");
  d.applied = true;
  d.members = {node->name()};
  d.result = node->name();
  ctx.decide(std::move(d));
  return true;
}

}  // namespace

Result<bool> run_prune_conv_taps_pass(Graph& graph, PassContext& context) {
  if (!context.fusion.rule_enabled(kPass)) return false;
  bool changed = false;
  for (Node* node : graph.nodes()) {
    const bool conv = (node->domain().empty() && node->op_type() == "Conv") ||
                      (node->domain() == kFusedDomain &&
                       (node->op_type() == "FusedConv" || node->op_type() == "QuantizedConv"));
    if (!conv) continue;
    OPFUSE_ASSIGN_OR_RETURN(bool done, prune(graph, context, node));
    changed |= done;
  }
  if (changed) graph.remove_dead_values();
  return changed;
}

}  // namespace opfuse
