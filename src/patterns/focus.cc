// The YOLOv5 Focus block: four strided Slices of the input (a space-to-depth) concatenated on
// channels and fed to a Conv, folded into one stride-2 Conv on the original input.
//
//   before                                             after
//     x ─┬─► Slice(h 0::2) ─► Slice(w 0::2) ─┐            x ─► Conv {kernel 2K, stride 2s,
//        ├─► Slice(h 1::2) ─► Slice(w 0::2) ─┤                       pads 2p} ─► y
//        ├─► Slice(h 0::2) ─► Slice(w 1::2) ─┼─► Concat(axis 1) ─► Conv(W, B) {kernel K, stride s, pads p} ─► y
//        └─► Slice(h 1::2) ─► Slice(w 1::2) ─┘
//
// Algebra: with block j of the Concat reading x at offsets (dh_j, dw_j),
//   Conv(S2D(x), W)[m,i,k] = Σ W[m, jC+c, a, b] · x[c, 2(s·i+a-p) + dh_j, 2(s·k+b-p) + dw_j]
//                          = Conv(x, W'){stride 2s, pads 2p}  with  W'[m, c, 2a+dh_j, 2b+dw_j] = W[m, jC+c, a, b].
// Exact: the same products, only summed in another order; zero padding of p rows of S2D(x) is
// 2p zero rows of x. Chosen over a SpaceToDepth step because it removes the rearranging pass
// over the input entirely (YOLOv5 v6 made the same change to its architecture: a 6x6 s2 conv),
// and the FLOPs are unchanged (4C·K² = C·(2K)² per output). Conditions: H and W even and
// static, every slice of step 2 running to the end, the four offsets distinct, the Conv
// ungrouped and undilated with explicit pads, constant f32 weights. Any epilogue of a
// FusedConv root stays as it is.
#include <array>
#include <climits>

#include "ops/fused.h"
#include "ops/op_def.h"
#include "passes/pass_util.h"
#include "patterns/families.h"

namespace opfuse::patterns {
namespace {

PatternNode slice_pair(int branch) {
  const std::string n = std::to_string(branch);
  return op_head("Slice", {op_head("Slice", {any("x")}).as("inner" + n)}).as("outer" + n);
}

// One Slice's (axis, start) when it takes every second element to the end of `dims`.
std::optional<std::pair<int64_t, int64_t>> strided_half(const Node& slice, const std::vector<int64_t>& dims) {
  const Tensor* t[4];
  for (size_t i = 1; i < 5; ++i) {
    t[i - 1] = constant_operand(slice.input(i));
    if (t[i - 1] == nullptr || t[i - 1]->numel() != 1) return std::nullopt;
  }
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t axis = t[2]->get_int(0);
  if (axis < 0) axis += rank;
  const int64_t start = t[0]->get_int(0), end = t[1]->get_int(0), step = t[3]->get_int(0);
  if ((axis != 2 && axis != 3) || step != 2 || (start != 0 && start != 1) || end < dims[axis]) {
    return std::nullopt;
  }
  return std::make_pair(axis, start);
}

struct FocusLayout {
  std::array<int, 4> offset_h, offset_w;  // per Concat block
};

std::optional<FocusLayout> focus_layout(const Match& m) {
  const auto dims = known_dims(m.value("x"));
  if (!dims || dims->size() != 4 || (*dims)[2] % 2 || (*dims)[3] % 2) return std::nullopt;
  FocusLayout out;
  int seen = 0;
  for (int j = 0; j < 4; ++j) {
    const std::string n = std::to_string(j);
    auto a = strided_half(*m.node("inner" + n), *dims);
    auto b = strided_half(*m.node("outer" + n), *dims);
    if (!a || !b || a->first == b->first) return std::nullopt;
    out.offset_h[j] = static_cast<int>(a->first == 2 ? a->second : b->second);
    out.offset_w[j] = static_cast<int>(a->first == 3 ? a->second : b->second);
    seen |= 1 << (out.offset_h[j] * 2 + out.offset_w[j]);
  }
  if (seen != 15) return std::nullopt;
  const Node& concat = *m.node("concat");
  int64_t axis = AttrReader(concat).get_int("axis");
  if (axis < 0) axis += 4;
  if (axis != 1) return std::nullopt;
  return out;
}

Reason check_focus(const Match& m, const PassContext&) {
  const Node& conv = *m.root;
  const AttrReader a(conv);
  if (a.has("auto_pad") && a.get_string("auto_pad") != "NOTSET") return "Conv uses auto_pad";
  if (a.get_int("group") != 1) return "grouped Conv";
  for (int64_t d : a.get_ints("dilations")) {
    if (d != 1) return "dilated Conv";
  }
  const Tensor* w = constant_operand(conv.input(1));
  if (w == nullptr || w->dtype() != DType::kF32 || w->rank() != 4) return "non-constant weights";
  if (Reason why = is_f32(m.value("x")); !why.empty()) return why;
  return {};
}

std::vector<int64_t> doubled(std::vector<int64_t> v, size_t n, int64_t fill) {
  if (v.empty()) v.assign(n, fill);
  for (int64_t& x : v) x *= 2;
  return v;
}

Result<Node*> rewrite_focus(Graph& graph, const Match& m) {
  const Node& conv = *m.root;
  const FocusLayout layout = *focus_layout(m);
  const Tensor& w = *constant_operand(conv.input(1));
  const int64_t mo = w.dim(0), c4 = w.dim(1), kh = w.dim(2), kw = w.dim(3), c = c4 / 4;
  OPFUSE_ASSIGN_OR_RETURN(Tensor w2, Tensor::zeros(DType::kF32, {mo, c, 2 * kh, 2 * kw}));
  const float* src = w.data<float>();
  float* dst = w2.data<float>();
  for (int64_t o = 0; o < mo; ++o) {
    for (int j = 0; j < 4; ++j) {
      for (int64_t ci = 0; ci < c; ++ci) {
        for (int64_t y = 0; y < kh; ++y) {
          for (int64_t x = 0; x < kw; ++x) {
            const int64_t from = ((o * c4 + j * c + ci) * kh + y) * kw + x;
            const int64_t to = ((o * c + ci) * 2 * kh + 2 * y + layout.offset_h[j]) * 2 * kw + 2 * x +
                               layout.offset_w[j];
            dst[to] = src[from];
          }
        }
      }
    }
  }
  Attributes attrs = conv.attrs;
  const AttrReader a(conv);
  attrs["kernel_shape"] = std::vector<int64_t>{2 * kh, 2 * kw};
  attrs["strides"] = doubled(a.get_ints("strides"), 2, 1);
  attrs["pads"] = doubled(a.get_ints("pads"), 4, 0);
  attrs.erase("dilations");
  std::vector<Value*> inputs = conv.inputs();
  inputs[0] = m.value("x");
  inputs[1] = graph.add_constant(conv.input(1)->name() + "_focus", std::move(w2));
  return replace_match(graph, m, conv.op_type(), conv.domain(), std::move(inputs), std::move(attrs),
                       conv.name());
}

}  // namespace

std::vector<Pattern> focus_patterns() {
  Pattern p;
  p.name = "focus_conv";
  p.family = "focus";
  p.tree = op_head("Conv|opfuse::FusedConv",
                   {op("Concat", {slice_pair(0), slice_pair(1), slice_pair(2), slice_pair(3)}).as("concat")});
  p.condition = [](const Match& m) { return focus_layout(m).has_value(); };
  p.check = check_focus;
  p.rewrite = rewrite_focus;
  p.benefit = 10;
  return {p};
}

}  // namespace opfuse::patterns
