// A pointwise conv and the 3x3 depthwise conv reading its output as one kernel, so the expanded
// tensor between them (MobileNet's inverted residuals: 16 -> 96 channels at 112x112, 4.8 MB) is
// never written out: each thread computes a few rows of it into its cache and convolves them.
//
//   before                                              after
//     e = BlockedConv(x, W, B) {1x1, epilogue}            y = BlockedConvDepthwise(x, W, B, Wd, Bd)
//     y = BlockedConv(e, Wd, Bd) {group = M, 3x3,             {epilogue, depthwise_stride = s,
//           pads 1, strides s, depthwise epilogue}             depthwise_epilogue}
//
// Exact: the kernel computes the same sums (ops/layout_ops.cc defines the op as the two convs).
// oneDNN 2.6 runs it as one jit kernel (jit_1x1 with its depthwise post-op) only when the
// expanded tensor exceeds twice the L2 of the threads running it; below that it would run the two
// convs one after the other through a scratch buffer (ref_fused_convolution), which gains nothing
// since the tensor stays in cache anyway (measured on a Zen 5 with MobileNetV2's blocks: 0.61 of
// the separate pair's time at 4.8 MB, 0.99-1.03 at 0.3-1.8 MB). So the pass fuses only above that
// size, from the target's L2 and cores; the kernel checks what oneDNN chose and runs the stages
// apart when it is not the fused jit kernel (kernels/cpu/onednn_blocked.cc). Fused from AVX2 up.
#include "ops/fused.h"
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace opfuse {
namespace {

constexpr std::string_view kPass = "depthwise_into_pointwise";

bool ints_are(const AttrReader& attrs, const char* name, const std::vector<int64_t>& want) {
  const auto v = attrs.get_ints(name);
  return v.empty() || v == want;
}

// Why the pointwise BlockedConv `p` cannot take the depthwise conv `d` reading its output, or "".
std::string refusal_reason(const Node& p, const Node& d, const PassContext& ctx) {
  const AttrReader pa(p), da(d);
  const Tensor* w = constant_data(p.input(1));
  const Tensor* wd = constant_data(d.input(1));
  const auto x = known_dims(p.input(0));
  const auto e = known_dims(p.output(0));
  if (ctx.target.isa < IsaTier::kAvx2) {
    // Measured with oneDNN's SSE4.1 kernels: 0.95 of the separate pair's time at 4.8 MB, but
    // 1.31-1.42 at 1.8 MB on one thread, where oneDNN fuses too.
    return "below AVX2 oneDNN's fused kernel gains little or loses";
  }
  if (!w || !wd || !x || !e || w->rank() != 4) return "needs constant weights and static shapes";
  if (w->dim(2) != 1 || w->dim(3) != 1 || pa.get_int("group") != 1 || !ints_are(pa, "strides", {1, 1}) ||
      !ints_are(pa, "pads", {0, 0, 0, 0}) || !ints_are(pa, "dilations", {1, 1})) {
    return "the first conv is not pointwise (1x1, stride 1, no padding, one group)";
  }
  if (x->size() != 5) return "the pointwise conv reads a plain tensor";
  const int64_t m = w->dim(0), block = pa.get_int("block");
  if (p.has_input(3) || p.has_input(kInputScale)) return "the pointwise conv adds a residual or scales its input";
  if (block != 8 && block != 16) return "not in the nChw8c / nChw16c layout";
  if (m % block != 0) return str_cat(m, " channels do not fill whole blocks of ", block);
  const auto ds = da.get_ints("strides");
  if (wd->rank() != 4 || wd->dim(0) != m || wd->dim(1) != 1 || wd->dim(2) != 3 || wd->dim(3) != 3 ||
      da.get_int("group") != m || da.get_ints("pads") != std::vector<int64_t>{1, 1, 1, 1} ||
      (d.attrs.count("auto_pad") && da.get_string("auto_pad") != "NOTSET") || !ints_are(da, "dilations", {1, 1}) ||
      da.get_int("block") != block || (ds.size() == 2 && (ds[0] != ds[1] || ds[0] > 2))) {
    return "the second conv is not a 3x3 depthwise conv with padding 1 and stride 1 or 2";
  }
  if (d.has_input(3) || d.has_input(kInputScale)) return "the depthwise conv adds a residual or scales its input";
  const int64_t bytes = value_bytes(p.output(0));
  const int64_t l2 = ctx.target.l2_bytes * ctx.target.cores;
  if (l2 <= 0) return "the target's L2 size is unknown";
  if (bytes <= 2 * l2) {
    return str_cat("the expanded tensor (", bytes, " bytes) fits in twice the cores' L2 (", 2 * l2,
                   "): oneDNN would run the convs apart");
  }
  return "";
}

// The pointwise BlockedConvs whose output only a depthwise BlockedConv reads, with that conv.
std::vector<std::pair<Node*, Node*>> candidates(const Graph& graph) {
  std::vector<std::pair<Node*, Node*>> pairs;
  for (Node* p : graph.nodes()) {
    if (p->op_type() != "BlockedConv" || p->domain() != kFusedDomain) continue;
    const Value* e = p->output(0);
    if (e->is_graph_output() || e->uses().size() != 1 || e->uses()[0].input_index != 0) continue;
    Node* d = e->uses()[0].node;
    if (d->op_type() != "BlockedConv" || d->domain() != kFusedDomain) continue;
    const Tensor* wd = constant_data(d->input(1));
    if (wd == nullptr || wd->rank() != 4 || wd->dim(1) != 1 || AttrReader(*d).get_int("group") != wd->dim(0)) {
      continue;  // not depthwise: nothing to decide
    }
    pairs.emplace_back(p, d);
  }
  return pairs;
}

Result<bool> run(Graph& graph, PassContext& ctx) {
  if (!ctx.fusion.rule_enabled(kPass)) return false;
  bool changed = false;
  for (auto [p, d] : candidates(graph)) {
    const std::string what = str_cat(node_label(*p), " and the depthwise ", node_label(*d), " as one kernel");
    if (!ctx.fusion.node_fusible(*p) || !ctx.fusion.node_fusible(*d)) {
      ctx.decide(refusal(std::string(kPass), what,
                         ctx.fusion.node_fusible(*p) ? ctx.fusion.node_refusal(*d) : ctx.fusion.node_refusal(*p),
                         {p->name(), d->name()}));
      continue;
    }
    if (const std::string why = refusal_reason(*p, *d, ctx); !why.empty()) {
      ctx.decide(refusal(std::string(kPass), what, why, {p->name(), d->name()}));
      continue;
    }
    Attributes attrs = p->attrs;
    const auto ds = AttrReader(*d).get_ints("strides");
    attrs["depthwise_stride"] = AttrValue(ds.empty() ? int64_t{1} : ds[0]);
    if (d->attrs.count("epilogue")) attrs["depthwise_epilogue"] = d->attrs.at("epilogue");
    OPFUSE_ASSIGN_OR_RETURN(
        Node * fused,
        graph.add_node("BlockedConvDepthwise",
                       {p->input(0), p->input(1), p->has_input(2) ? p->input(2) : nullptr, d->input(1),
                        d->has_input(2) ? d->input(2) : nullptr},
                       {graph.unique_value_name(d->output(0)->name() + "_dw")}, std::move(attrs),
                       p->name() + "_depthwise", std::string(kFusedDomain)));
    fused->output(0)->dtype = d->output(0)->dtype;
    fused->output(0)->shape = d->output(0)->shape;
    graph.replace_all_uses(d->output(0), fused->output(0));
    PassDecision decision = application(std::string(kPass), what, {p->name(), d->name()}, fused->name());
    decision.bytes_saved = 2 * value_bytes(p->output(0));
    ctx.decide(std::move(decision));
    OPFUSE_TRY(graph.remove_node(d));
    OPFUSE_TRY(graph.remove_node(p));
    changed = true;
  }
  if (changed) {
    graph.remove_dead_values();
    OPFUSE_TRY(graph.topological_sort());
  }
  return changed;
}

}  // namespace

Result<bool> run_depthwise_into_pointwise_pass(Graph& graph, PassContext& ctx) { return run(graph, ctx); }

}  // namespace opfuse
