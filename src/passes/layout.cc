// Layout (O3): keep CNN activations in the blocked layout oneDNN's direct convolutions prefer
// (nChw16c on AVX-512, nChw8c on AVX2: the target's channel block), from the first conv to the
// last op that can read it, with reorders only at the boundaries. A blocked activation is an
// ordinary value whose dims are its physical layout (ops/layout_ops.cc): logical [N, C, H, W]
// -> f32[N, ceil(C/b), H, W, b]. The picture shows b = 16.
//
//   before                                 after
//     x: [1,3,H,W]                           x: [1,3,H,W]
//     Conv -> Relu -> MaxPool                BlockedConv(x) {epilogue}        -> [1,4,H,W,16]
//     Conv (+ residual Add) ...              MaxPool {kernel_shape=[3,3,1]}   -> [1,4,H',W',16]
//     GlobalAveragePool                      BlockedConv ...                  (blocked residual)
//     Flatten -> Gemm                        AveragePool {kernel_shape=[H,W,1]} -> [1,Cb,1,1,16]
//                                            FromBlocked {channels} -> Flatten -> Gemm
//
// Algorithm: one walk over the nodes in topological order, keeping for each plain value the
// blocked value that holds the same data (`blocked_`):
//  - Conv / opfuse::FusedConv (2-d, f32, static shapes, constant weights, group 1 or depthwise,
//    an epilogue oneDNN can run) become opfuse::BlockedConv: they start blocked regions. X is
//    read plain when it has few channels and no blocked node computed it (a first conv on an
//    image: oneDNN reads nchw there directly), else blocked when it has a blocked form, else
//    through a ToBlocked.
//  - opfuse::QuantizedConv (a dynamically quantized conv) runs blocked too, reading X
//    through a ToBlocked when no blocked node computed it.
//  - Followers join a region only when one of their data inputs is blocked already, so no
//    reorder is added for them: MaxPool / AveragePool (a 3-d pool whose last window axis is
//    trivial), GlobalAveragePool / GlobalMaxPool (the same with the whole H x W window),
//    elementwise and broadcast ops (operands blocked alike, per-channel constants re-laid out,
//    one-element constants as they are, plain per-channel values through a ToBlocked), Concat
//    on channels (in place when every input but the last is a whole number of blocks, else an
//    opfuse::ChannelGather copy, constant inputs laid out at compile time), Resize (nearest or
//    linear, constant scales or sizes, which get a trailing 1; not an upsampling that is only
//    a graph output or has at most 4 channels: it reads its small input plain instead),
//    opfuse::ChannelGather (whole channels in any order: passes/channel_gather.cc).
//  - Each rewritten node's original output becomes FromBlocked(blocked output) under the same
//    name, so graph outputs and plain consumers (Reshape, Flatten, Gemm, Softmax ...) read the
//    plain layout; DCE drops the FromBlocked nodes nobody reads.
// Padded lanes (C not a multiple of the block) hold arbitrary finite values; ops that could turn
// them into Inf/NaN (which a conv's zero weights would not cancel) stay plain on padded tensors.
// Layouts: blocked nChw<b>c with b = Target::channel_block() (one vector of the target: oneDNN
// 2.6 has no AVX2 kernels for nChw16c, whose convs, pools and binary ops fall to reference
// loops there, and on AVX-512 nChw8c runs its AVX2 kernels, 1.5-4x slower: docs/benchmarks.md)
// or channels-last nhwc (block 0: f32 [N, 1, H, W, C], where oneDNN picks its brgconv kernels on
// AVX-512), chosen per conv. On AVX-512, nhwc brgconv is 13-28% faster on ResNet-50's dense 3x3
// convs, 1x1 and depthwise convs have no consistent winner, and only the blocked layout lets a
// Concat on channels run in place. The choice:
//  1. a dry run of the walk below, in the blocked layout and without touching the graph, records which
//     nodes would run blocked and which blocked tensors each reads (their producer, if blocked);
//  2. each conv's cost in both layouts and each tensor's reorder blocked <-> nhwc are estimated
//     from the shapes for the target (layout_measure.h: EstimatingLayoutTimer, deterministic), or,
//     when FusionConfig::measure_layouts asks, timed by the runtime's timer (the BlockedConv kernel
//     graph mode would create, on its exact shapes, attributes and post-ops; cached per signature);
//  3. layout_choice.h picks the labelling minimising conv time plus one reorder per tensor
//     whose producer and readers disagree, exactly (a minimum cut: greedy walks along the chain
//     cannot see that one switched conv pays two reorders, nor ResNet's residual tensors that
//     are read by two convs far apart); a Concat on nhwc pays a copy of its output; other ops
//     count as layout-independent;
//  4. the walk runs for real with each conv's layout; other ops take the layout they were
//     labelled with, reading operands of another layout through opfuse::Reblock.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ops/fused.h"
#include "ops/layout_ops.h"
#include "passes/fusion_rules.h"
#include "passes/layout_choice.h"
#include "passes/layout_measure.h"
#include "passes/pass_util.h"
#include "passes/passes.h"
#include "passes/tuning_record.h"

namespace opfuse {
namespace {

constexpr std::string_view kPass = "layout";
// A conv reading at most this many plain channels takes them plain (oneDNN's first-conv kernel).
constexpr int64_t kPlainInputChannels = 4;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct BlockedValue {
  Value* value = nullptr;  // f32[N, ceil(C/b), H, W, b], or [N, 1, H, W, C] (block 0)
  int64_t channels = 0;    // C
  int64_t block = 0;
};

std::string suffix(int64_t block) { return block == 0 ? "_nhwc" : str_cat("_b", block); }
std::string layout_name(int64_t block) { return block == 0 ? "nhwc" : str_cat("nChw", block, "c"); }

// What the dry run (step 1 above) learns: the nodes that would run blocked and, per tensor they
// read blocked, its producer among them (-1: a plain tensor, reordered at the boundary) and readers.
struct LayoutStructure {
  struct Item {
    const Node* node = nullptr;
    bool conv = false;
    bool x_plain = false;  // a first conv reading nchw directly when blocked
  };
  std::vector<Item> items;
  struct Operand {
    int producer = -1;
    std::vector<int> readers;
    std::vector<int64_t> dims;  // logical
  };
  std::vector<Operand> tensors;
};

class LayoutPass {
 public:
  // `choice`: the layout of each node that runs blocked, by name (others: the target's block, or
  // the layout of their first blocked operand). `dry`: collect the structure, change nothing.
  LayoutPass(Graph& graph, PassContext& ctx, std::map<std::string, int64_t> choice,
             std::map<std::string, std::string> why, LayoutStructure* dry)
      : graph_(graph), ctx_(ctx), choice_(std::move(choice)), why_(std::move(why)), dry_(dry),
        default_block_(ctx.target.channel_block()), block_(default_block_) {}

  Result<bool> run() {
    bool changed = false;
    for (Node* node : graph_.nodes()) {
      if (node->outputs().size() != 1 && !(node->op_type() == "MaxPool" && node->outputs().size() == 2 &&
                                           node->output(1) == nullptr)) {
        continue;
      }
      if (!ctx_.fusion.node_fusible(*node)) continue;
      // Dead nodes are DCE's business (and replace() needs a reader or an output to re-point).
      if (node->output(0)->uses().empty() && !node->output(0)->is_graph_output()) continue;
      OPFUSE_ASSIGN_OR_RETURN(bool rewritten, rewrite(node));
      changed |= rewritten;
    }
    if (changed && dry_ == nullptr) {
      graph_.remove_dead_values();
      OPFUSE_TRY(graph_.topological_sort());
    }
    return changed;
  }

 private:
  // What the blocked node will be.
  struct Plan {
    std::string op_type;
    std::string domain;
    std::vector<Value*> inputs;
    Attributes attrs;
    int64_t out_channels = 0;
    std::vector<int64_t> out_dims;  // logical
  };

  // How a node that can run blocked is planned (null: it cannot); a plan may still refuse.
  using Planner = Result<std::optional<Plan>> (LayoutPass::*)(const Node&);
  static Planner planner_for(const Node& node) {
    const std::string& op = node.op_type();
    if (node.domain() == kFusedDomain) {
      if (op == "FusedConv") return &LayoutPass::plan_conv;
      if (op == "QuantizedConv") return &LayoutPass::plan_dynamic_quantized_conv;
      if (op == "ChannelGather") return &LayoutPass::plan_channel_gather;
      return nullptr;
    }
    if (!node.domain().empty()) return nullptr;
    if (op == "Conv") return &LayoutPass::plan_conv;
    if (op == "MaxPool" || op == "AveragePool") return &LayoutPass::plan_pool;
    if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return &LayoutPass::plan_global_pool;
    if (op == "Concat") return &LayoutPass::plan_concat;
    if (op == "Resize") return &LayoutPass::plan_resize;
    if (node.def().scalar != nullptr) return &LayoutPass::plan_elementwise;
    return nullptr;
  }

  // The layout `node` runs in when it runs blocked.
  int64_t layout_of(const Node& node, bool conv) const {
    if (dry_ != nullptr) return default_block_;
    if (auto it = choice_.find(node.name()); it != choice_.end()) return it->second;
    if (!conv) {
      for (const Value* in : node.inputs()) {
        if (const BlockedValue* b = blocked(in)) return b->block;
      }
    }
    return default_block_;
  }

  Result<bool> rewrite(Node* node) {
    const std::string& op = node->op_type();
    const bool conv = (node->domain().empty() && op == "Conv") || (op == "FusedConv" && node->domain() == kFusedDomain);
    block_ = layout_of(*node, conv);
    pending_reads_.clear();
    x_plain_ = false;
    if (node->domain().empty() && op == "Transpose") return rewrite_transpose_to_nhwc(node);
    const Planner planner = planner_for(*node);
    if (planner == nullptr) return false;
    OPFUSE_ASSIGN_OR_RETURN(std::optional<Plan> plan, (this->*planner)(*node));
    if (!plan) return false;
    while (!plan->inputs.empty() && plan->inputs.back() == nullptr) plan->inputs.pop_back();
    OPFUSE_TRY(replace(node, std::move(*plan)));
    return true;
  }

  // ------------------------------------------------------------ operands

  static std::optional<std::vector<int64_t>> dims4(const Value* v) {
    if (v == nullptr || v->dtype != DType::kF32) return std::nullopt;
    auto d = known_dims(v);
    if (!d || d->size() != 4) return std::nullopt;
    return d;
  }

  const BlockedValue* blocked(const Value* v) const {
    auto it = blocked_.find(v);
    return it == blocked_.end() ? nullptr : &it->second;
  }

  // `v` in the current node's layout: its blocked form, a Reblock of it from another layout, or
  // a new ToBlocked of the plain tensor; each shared by every reader in that layout.
  Result<Value*> to_blocked(Value* v) {
    const auto d = dims4(v);
    if (!d) return Status::internal_error(str_cat("layout: ", v->name(), " is not a static 4-d f32 value"));
    if (dry_ != nullptr) {
      pending_reads_.push_back(v);
      if (!blocked(v)) blocked_[v] = {v, (*d)[1], block_};
      return v;
    }
    const BlockedValue* home = blocked(v);
    if (home != nullptr && home->block == block_) return home->value;
    if (auto it = forms_.find({v, block_}); it != forms_.end()) return it->second;
    Attributes attrs;
    attrs["block"] = AttrValue(block_);
    Node* n = nullptr;
    if (home != nullptr) {
      attrs["channels"] = AttrValue(home->channels);
      OPFUSE_ASSIGN_OR_RETURN(n, graph_.add_node("Reblock", {home->value}, {v->name() + suffix(block_)}, attrs,
                                                 v->name() + "_to" + suffix(block_), std::string(kFusedDomain)));
    } else {
      OPFUSE_ASSIGN_OR_RETURN(n, graph_.add_node("ToBlocked", {v}, {v->name() + suffix(block_)}, attrs,
                                                 v->name() + "_to_blocked", std::string(kFusedDomain)));
    }
    Value* out = n->output(0);
    out->dtype = DType::kF32;
    out->shape = make_shape(blocked_dims(*d));
    if (home == nullptr) blocked_[v] = {out, (*d)[1], block_};
    forms_[{v, block_}] = out;
    return out;
  }

  // Lanes of the last dim for `c` channels: the block, or every channel (channels-last).
  int64_t lanes(int64_t c) const { return block_ == 0 ? c : block_; }  // in the current layout
  bool padded(int64_t c) const { return c % lanes(c) != 0; }

  std::vector<int64_t> blocked_dims(const std::vector<int64_t>& d) const {
    return {d[0], ceil_div(d[1], lanes(d[1])), d[2], d[3], lanes(d[1])};
  }

  // A per-channel constant ([C], [C,1,1], [1,C,1,1]) laid out as [1, Cb, 1, 1, b]; padded
  // lanes get `pad`.
  Value* blocked_constant(Value* v, const Tensor& t, int64_t c, float pad) {
    if (dry_ != nullptr) return v;
    const std::string key = str_cat(v->name(), "#", pad, "#", block_);
    if (auto it = constants_.find(key); it != constants_.end()) return it->second;
    const int64_t cb = ceil_div(c, lanes(c));
    std::vector<float> data(static_cast<size_t>(cb * lanes(c)), pad);
    const std::vector<float> src = t.to_float_vector();
    std::copy(src.begin(), src.end(), data.begin());
    Value* out = graph_.add_constant(v->name() + suffix(block_), Tensor::from_vector<float>({1, cb, 1, 1, lanes(c)}, data));
    constants_[key] = out;
    return out;
  }

  // A constant activation-shaped [N, C, H, W] f32 value in the current layout, made at compile
  // time (padded lanes zero) rather than by a ToBlocked every run.
  Result<Value*> blocked_activation_constant(Value* v, const Tensor& t) {
    if (dry_ != nullptr) return v;
    if (auto it = forms_.find({v, block_}); it != forms_.end()) return it->second;
    OPFUSE_ASSIGN_OR_RETURN(Tensor laid_out, blocked_copy(t, lanes(t.dim(1))));
    Value* out = graph_.add_constant(graph_.unique_value_name(v->name() + suffix(block_)), std::move(laid_out));
    forms_[{v, block_}] = out;
    return out;
  }

  static bool is_per_channel(const std::vector<int64_t>& d, int64_t c) {
    if (d.size() > 4 || d.empty()) return false;
    std::vector<int64_t> d4(4 - d.size(), 1);
    d4.insert(d4.end(), d.begin(), d.end());
    return d4[0] == 1 && d4[1] == c && d4[2] == 1 && d4[3] == 1;
  }

  // ------------------------------------------------------------ plans

  Result<std::optional<Plan>> plan_conv(const Node& node) {
    const auto x = dims4(node.input(0));
    const auto y = dims4(node.output(0));
    const auto w = known_dims(node.input(1));
    const Tensor* wt = constant_data(node.input(1));
    auto refuse = [&](const std::string& why) -> Result<std::optional<Plan>> {
      ctx_.decide(refusal(std::string(kPass), node_label(node), why));
      return std::optional<Plan>();
    };
    if (!x || !y || !w || w->size() != 4) return refuse("not a 2-d f32 conv with static shapes");
    if (wt == nullptr || wt->dtype() != DType::kF32) return refuse("weights are not a constant");
    const int64_t group = AttrReader(node).get_int("group");
    const int64_t c = (*x)[1], m = (*y)[1];
    if (group != 1 && !(group == c && m == c)) return refuse("grouped conv that is not depthwise");
    if (node.has_input(2) && constant_data(node.input(2)) == nullptr) return refuse("bias is not a constant");
    Plan p{"BlockedConv", std::string(kFusedDomain), {}, node.attrs, m, *y};
    p.attrs["block"] = AttrValue(block_);
    Value* xin = node.input(0);
    // oneDNN's first-conv kernel reads nchw into nChw<b>c; channels-last convs want nhwc input.
    // Plain is read whenever it exists without a reorder: also when another conv read the same
    // image in another layout (a ToBlocked of it), never when a blocked node produced it.
    x_plain_ = !produced_blocked_.count(xin) && c <= kPlainInputChannels;
    if (x_plain_ && block_ != 0) {
      p.inputs.push_back(xin);
    } else {
      OPFUSE_ASSIGN_OR_RETURN(Value * xb, to_blocked(xin));
      p.inputs.push_back(xb);
    }
    p.inputs.push_back(node.input(1));
    p.inputs.push_back(node.input(2));
    if (node.has_input(3)) {
      if (!dims4(node.input(3)) || *dims4(node.input(3)) != *y) return refuse("residual shape differs");
      OPFUSE_ASSIGN_OR_RETURN(Value * rb, to_blocked(node.input(3)));
      p.inputs.push_back(rb);
    }
    if (node.has_input(kInputScale)) {
      // The input scale is read as C floats in channel order, which its plain form and its
      // blocked form in this layout both are: take whichever exists without a reorder.
      p.inputs.resize(kInputScale + 1, nullptr);
      Value* s = node.input(kInputScale);
      const BlockedValue* home = dry_ == nullptr ? blocked(s) : nullptr;
      p.inputs[kInputScale] = home != nullptr && home->block == block_ ? home->value : s;
    }
    return std::optional<Plan>(std::move(p));
  }

  // opfuse::QuantizedConv (ops/integer_conv.cc) on the blocked layout: X, R and Y blocked
  // (its kernel quantizes X as it copies it, so a blocked X costs nothing), in the layout of its
  // neighbours; channels-last it has no kernel, so it stays plain there.
  Result<std::optional<Plan>> plan_dynamic_quantized_conv(const Node& node) {
    const auto x = dims4(node.input(0));
    const auto y = dims4(node.output(0));
    if (!x || !y || AttrReader(node).get_int("block") != 0) return std::optional<Plan>();
    if (block_ == 0) {
      ctx_.decide(refusal(std::string(kPass), node_label(node), "no channels-last kernel; its neighbours run nhwc"));
      return std::optional<Plan>();
    }
    Plan p{node.op_type(), node.domain(), node.inputs(), node.attrs, (*y)[1], *y};
    p.attrs["block"] = AttrValue(block_);
    OPFUSE_ASSIGN_OR_RETURN(p.inputs[0], to_blocked(node.input(0)));
    if (node.has_input(3)) {
      if (!dims4(node.input(3)) || *dims4(node.input(3)) != *y) return std::optional<Plan>();
      OPFUSE_ASSIGN_OR_RETURN(p.inputs[3], to_blocked(node.input(3)));
    }
    return std::optional<Plan>(std::move(p));
  }

  Result<std::optional<Plan>> plan_pool(const Node& node) {
    const BlockedValue* xb = blocked(node.input(0));
    const auto y = dims4(node.output(0));
    if (xb == nullptr || !y) return std::optional<Plan>();
    const AttrReader attrs(node);
    const std::string auto_pad = attrs.get_string("auto_pad");
    if (auto_pad != "NOTSET" && auto_pad != "VALID") return std::optional<Plan>();
    std::vector<int64_t> k = attrs.get_ints("kernel_shape");
    if (k.size() != 2) return std::optional<Plan>();
    Plan p{node.op_type(), "", {nullptr}, node.attrs, xb->channels, *y};
    auto extend = [&](const std::string& name, std::vector<int64_t> v, int64_t fill) {
      if (v.empty()) v.assign(2, fill);
      v.push_back(fill);
      p.attrs[name] = AttrValue(v);
    };
    extend("kernel_shape", k, 1);
    extend("strides", attrs.has("strides") ? attrs.get_ints("strides") : std::vector<int64_t>{}, 1);
    if (attrs.has("dilations")) extend("dilations", attrs.get_ints("dilations"), 1);
    if (attrs.has("pads")) {
      const std::vector<int64_t> pads = attrs.get_ints("pads");
      if (pads.size() != 4) return std::optional<Plan>();
      p.attrs["pads"] = AttrValue(std::vector<int64_t>{pads[0], pads[1], 0, pads[2], pads[3], 0});
    }
    OPFUSE_ASSIGN_OR_RETURN(p.inputs[0], to_blocked(node.input(0)));
    return std::optional<Plan>(std::move(p));
  }

  Result<std::optional<Plan>> plan_global_pool(const Node& node) {
    const BlockedValue* xb = blocked(node.input(0));
    const auto x = dims4(node.input(0));
    const auto y = dims4(node.output(0));
    if (xb == nullptr || !x || !y) return std::optional<Plan>();
    OPFUSE_ASSIGN_OR_RETURN(Value * xv, to_blocked(node.input(0)));
    const bool is_max = node.op_type() == "GlobalMaxPool";
    Plan p{is_max ? "MaxPool" : "AveragePool", "", {xv}, {}, xb->channels, *y};
    p.attrs["kernel_shape"] = AttrValue(std::vector<int64_t>{(*x)[2], (*x)[3], 1});
    return std::optional<Plan>(std::move(p));
  }

  Result<std::optional<Plan>> plan_concat(const Node& node) {
    const auto y = dims4(node.output(0));
    const int64_t axis = AttrReader(node).get_int("axis");
    if (!y || (axis != 1 && axis != -3) || node.output(0)->dtype != DType::kF32) return std::optional<Plan>();
    bool any_blocked = false, whole_blocks = true;
    for (size_t i = 0; i < node.inputs().size(); ++i) {
      const auto d = dims4(node.input(i));
      if (!d) return std::optional<Plan>();
      // Blocks of the output are blocks of the inputs when the channels of every input but the
      // last fill whole blocks: then the next input's channels start at a block boundary.
      if (i + 1 < node.inputs().size() && padded((*d)[1])) whole_blocks = false;
      any_blocked |= blocked(node.input(i)) != nullptr;
    }
    if (!any_blocked) return std::optional<Plan>();
    if (!whole_blocks) {
      // A copy either way: blocked only when what reads it can run blocked too (else it would
      // pay a FromBlocked on top, as in a ShuffleNet stage's plain Reshape chain).
      const Value* out = node.output(0);
      const bool readers_blocked = std::all_of(out->uses().begin(), out->uses().end(),
                                               [](const Use& u) { return planner_for(*u.node) != nullptr; });
      if (out->is_graph_output() || !readers_blocked) return std::optional<Plan>();
      return plan_concat_as_gather(node, *y);
    }
    Plan p{"Concat", "", {}, node.attrs, (*y)[1], *y};
    // Channels are blocks (axis 1) of whole blocks, or the lanes (axis 4) of one block.
    p.attrs["axis"] = AttrValue(int64_t{block_ == 0 ? 4 : 1});
    for (Value* in : node.inputs()) {
      OPFUSE_ASSIGN_OR_RETURN(Value * b, to_blocked(in));
      p.inputs.push_back(b);
    }
    return std::optional<Plan>(std::move(p));
  }

  // A Concat on channels whose inputs do not fill whole blocks (a TensorFlow export's channel
  // padding, Concat(x, zeros) with 24 + 4 channels: BlazeFace's residuals) as one
  // opfuse::ChannelGather copy in the blocked layout, instead of a FromBlocked, a plain Concat
  // and a ToBlocked. Constant inputs are laid out blocked here, once.
  Result<std::optional<Plan>> plan_concat_as_gather(const Node& node, const std::vector<int64_t>& y) {
    Plan p{"ChannelGather", std::string(kFusedDomain), {}, {}, y[1], y};
    std::vector<int64_t> sources, channels;
    for (size_t i = 0; i < node.inputs().size(); ++i) {
      Value* in = node.input(i);
      const int64_t c = (*dims4(in))[1];
      for (int64_t k = 0; k < c; ++k) {
        sources.push_back(static_cast<int64_t>(i));
        channels.push_back(k);
      }
      Value* b = nullptr;
      if (const Tensor* t = blocked(in) == nullptr ? constant_data(in) : nullptr) {
        OPFUSE_ASSIGN_OR_RETURN(b, blocked_activation_constant(in, *t));
      } else {
        OPFUSE_ASSIGN_OR_RETURN(b, to_blocked(in));
      }
      p.inputs.push_back(b);
    }
    p.attrs["sources"] = AttrValue(std::move(sources));
    p.attrs["channels"] = AttrValue(std::move(channels));
    p.attrs["block"] = AttrValue(block_);
    return std::optional<Plan>(std::move(p));
  }

  // Whole channels in any order: any layout's lanes are addressable channels, so each input is
  // read in the gather's layout and the output's padded lanes are written as zeros.
  Result<std::optional<Plan>> plan_channel_gather(const Node& node) {
    const auto y = dims4(node.output(0));
    if (!y) return std::optional<Plan>();
    bool any_blocked = false;
    for (const Value* in : node.inputs()) {
      if (!dims4(in)) return std::optional<Plan>();
      any_blocked |= blocked(in) != nullptr;
    }
    if (!any_blocked) return std::optional<Plan>();
    Plan p{"ChannelGather", std::string(kFusedDomain), {}, node.attrs, (*y)[1], *y};
    p.attrs["block"] = AttrValue(block_);
    for (Value* in : node.inputs()) {
      OPFUSE_ASSIGN_OR_RETURN(Value * b, to_blocked(in));
      p.inputs.push_back(b);
    }
    return std::optional<Plan>(std::move(p));
  }

  Result<std::optional<Plan>> plan_resize(const Node& node) {
    const BlockedValue* xb = blocked(node.input(0));
    const auto y = dims4(node.output(0));
    if (xb == nullptr || !y) return std::optional<Plan>();
    // An upsampling stays plain, reading its small input through a reorder instead of
    // reordering its large output, when its result only leaves the graph, or when it has so few
    // channels that blocked it would be mostly padding (a conv reads those plain anyway).
    // DeepLabV3's final 21 x 65 x 65 -> 520 x 520 on a Zen 3 (AVX2): 2.1 ms blocked + 4.1 ms
    // reorder, against 2.9 ms plain; IS-Net's one-channel side outputs, upsampled to 1024 x 1024
    // in 8-channel blocks, took 1.5 ms + 8.7 ms each.
    const auto x = dims4(node.input(0));
    const bool only_returned = node.output(0)->is_graph_output() && node.output(0)->uses().empty();
    if (x && (*y)[2] * (*y)[3] > (*x)[2] * (*x)[3] && (only_returned || (*y)[1] <= kPlainInputChannels)) {
      return std::optional<Plan>();
    }
    const AttrReader attrs(node);
    const std::string mode = attrs.get_string("mode");
    if ((mode != "nearest" && mode != "linear") ||
        attrs.get_string("coordinate_transformation_mode") == "tf_crop_and_resize") {
      return std::optional<Plan>();
    }
    Plan p{"Resize", "", {nullptr, nullptr, nullptr, nullptr}, node.attrs, xb->channels, *y};
    const Tensor* scales = node.has_input(2) ? constant_data(node.input(2)) : nullptr;
    const Tensor* sizes = node.has_input(3) ? constant_data(node.input(3)) : nullptr;
    if (scales != nullptr && scales->numel() == 4 && scales->dtype() == DType::kF32) {
      std::vector<float> s = scales->to_float_vector();
      if (s[0] != 1.0f || s[1] != 1.0f) return std::optional<Plan>();
      s.push_back(1.0f);
      p.inputs[2] = dry_ != nullptr ? node.input(2)
                                    : graph_.add_constant(node.input(2)->name() + suffix(block_), Tensor::from_vector<float>({5}, s));
    } else if (sizes != nullptr && sizes->numel() == 4) {
      std::vector<int64_t> s = sizes->to_int_vector();
      if (s[1] != xb->channels) return std::optional<Plan>();
      const int64_t l = lanes(s[1]);
      s[1] = ceil_div(s[1], l);
      s.push_back(l);
      p.inputs[3] = dry_ != nullptr ? node.input(3)
                                    : graph_.add_constant(node.input(3)->name() + suffix(block_), Tensor::from_vector<int64_t>({5}, s));
    } else {
      return std::optional<Plan>();
    }
    if (p.inputs[3] == nullptr) p.inputs.pop_back();
    OPFUSE_ASSIGN_OR_RETURN(p.inputs[0], to_blocked(node.input(0)));
    return std::optional<Plan>(std::move(p));
  }

  Result<std::optional<Plan>> plan_elementwise(const Node& node) {
    const auto y = dims4(node.output(0));
    const FusionKind kind = node.def().kind;
    if (!y || (kind != FusionKind::kElementwise && kind != FusionKind::kBroadcast)) {
      return std::optional<Plan>();
    }
    const int64_t c = (*y)[1];
    if (padded(c) && !is_finite_preserving(node)) return std::optional<Plan>();
    bool any_blocked = false;
    for (const Value* in : node.inputs()) any_blocked |= in != nullptr && blocked(in) != nullptr;
    if (!any_blocked) return std::optional<Plan>();
    Plan p{node.op_type(), "", {}, node.attrs, c, *y};
    for (size_t i = 0; i < node.inputs().size(); ++i) {
      Value* in = node.input(i);
      if (in == nullptr) {
        p.inputs.push_back(nullptr);
        continue;
      }
      if (in->dtype != DType::kF32) return std::optional<Plan>();
      if (const BlockedValue* b = blocked(in)) {
        if (b->channels != c) return std::optional<Plan>();
        OPFUSE_ASSIGN_OR_RETURN(Value * bv, to_blocked(in));
        p.inputs.push_back(bv);
        continue;
      }
      const auto d = known_dims(in);
      if (!d) return std::optional<Plan>();
      if (const Tensor* t = constant_data(in)) {
        if (t->numel() == 1) {
          p.inputs.push_back(in);
        } else if (is_per_channel(*d, c) && t->dtype() == DType::kF32) {
          p.inputs.push_back(blocked_constant(in, *t, c, 0.0f));
        } else {
          return std::optional<Plan>();
        }
        continue;
      }
      // A plain activation broadcast against the output: same channels, batch and spatial
      // dims equal or 1.
      if (d->size() != 4 || (*d)[1] != c) return std::optional<Plan>();
      for (size_t a : {0, 2, 3}) {
        if ((*d)[a] != (*y)[a] && (*d)[a] != 1) return std::optional<Plan>();
      }
      OPFUSE_ASSIGN_OR_RETURN(Value * b, to_blocked(in));
      p.inputs.push_back(b);
    }
    return std::optional<Plan>(std::move(p));
  }

  // ------------------------------------------------------------ rewrite

  // Transpose(0,2,3,1) of a value with a blocked form: NCHW -> NHWC is the channels-last layout
  // itself, [N,1,H,W,C] read as [N,H,W,C], so the Transpose becomes a Reshape (a view) of the
  // value's nhwc form: the one a channels-last conv wrote (a detector head's output), or one
  // Reblock instead of a FromBlocked and a transposition. Not part of the layout choice: it only
  // reads what the choice made.
  Result<bool> rewrite_transpose_to_nhwc(Node* node) {
    if (dry_ != nullptr || !blocked(node->input(0))) return false;
    const auto x = dims4(node->input(0));
    const std::vector<int64_t> nhwc = {0, 2, 3, 1};
    if (!x || !node->attrs.count("perm") || AttrReader(*node).get_ints("perm") != nhwc) return false;
    block_ = 0;
    OPFUSE_ASSIGN_OR_RETURN(Value * xn, to_blocked(node->input(0)));
    Value* old_out = node->output(0);
    const std::string node_name = node->name(), out_name = old_out->name(), what = node_label(*node);
    Value* hold = graph_.add_value(out_name + "_layout_hold", old_out->dtype, old_out->shape);
    graph_.replace_all_uses(old_out, hold);
    OPFUSE_TRY(graph_.remove_node(node));
    graph_.remove_dead_values();
    const std::vector<int64_t> dims = {(*x)[0], (*x)[2], (*x)[3], (*x)[1]};
    Value* shape = graph_.add_constant(out_name + "_nhwc_shape", Tensor::from_vector<int64_t>({4}, dims));
    OPFUSE_ASSIGN_OR_RETURN(Node * r, graph_.add_node("Reshape", {xn, shape}, {out_name}, {}, node_name));
    r->output(0)->dtype = DType::kF32;
    r->output(0)->shape = make_shape(dims);
    graph_.replace_all_uses(hold, r->output(0));
    ctx_.decide(application(std::string(kPass), str_cat(what, " as a view of the nhwc layout"), {node_name}, node_name));
    return true;
  }

  // Builds the blocked node under `node`'s name, and FromBlocked under its output's name.
  Status replace(Node* node, Plan plan) {
    if (dry_ != nullptr) return record_dry(*node, plan);
    Value* old_out = node->output(0);
    const std::string node_name = node->name(), out_name = old_out->name();
    const std::string what = node_label(*node);
    // Names are unique: park the readers on a placeholder, drop the node and its output, then
    // build the new nodes under the freed names.
    Value* hold = graph_.add_value(out_name + "_layout_hold", old_out->dtype, old_out->shape);
    graph_.replace_all_uses(old_out, hold);
    OPFUSE_TRY(graph_.remove_node(node));
    OPFUSE_ASSIGN_OR_RETURN(Node * nb, graph_.add_node(plan.op_type, plan.inputs, {out_name + suffix(block_)},
                                                       plan.attrs, node_name, plan.domain));
    Value* yb = nb->output(0);
    yb->dtype = DType::kF32;
    yb->shape = make_shape(blocked_dims(plan.out_dims));
    graph_.remove_dead_values();  // frees `out_name` (plain inputs of nb are in use, so kept)
    Attributes fa;
    fa["channels"] = AttrValue(plan.out_channels);
    OPFUSE_ASSIGN_OR_RETURN(Node * fb, graph_.add_node("FromBlocked", {yb}, {out_name}, fa,
                                                       node_name + "_to_plain", std::string(kFusedDomain)));
    Value* plain = fb->output(0);
    plain->dtype = DType::kF32;
    plain->shape = make_shape(plan.out_dims);
    graph_.replace_all_uses(hold, plain);
    blocked_[plain] = {yb, plan.out_channels, block_};
    produced_blocked_.insert(plain);
    PassDecision d;
    d.pass = std::string(kPass);
    d.rule = std::string(kPass);
    d.what = str_cat(what, " on ", layout_name(block_));
    if (auto it = why_.find(node_name); it != why_.end()) d.what += str_cat(" (", it->second, ")");
    d.applied = true;
    d.members = {node_name};
    d.result = node_name;
    ctx_.decide(std::move(d));
    return Status::ok();
  }

  // Dry run: `node` would run blocked, reading `pending_reads_` blocked.
  Status record_dry(const Node& node, const Plan& plan) {
    const int index = static_cast<int>(dry_->items.size());
    dry_->items.push_back({&node, plan.op_type == "BlockedConv", x_plain_});
    for (const Value* v : pending_reads_) {
      auto [it, added] = tensor_index_.try_emplace(v, static_cast<int>(dry_->tensors.size()));
      if (added) dry_->tensors.push_back({-1, {}, *dims4(v)});
      auto& readers = dry_->tensors[it->second].readers;
      if (std::find(readers.begin(), readers.end(), index) == readers.end()) readers.push_back(index);
    }
    const Value* out = node.output(0);
    blocked_[out] = {const_cast<Value*>(out), plan.out_channels, block_};
    produced_blocked_.insert(out);
    tensor_index_[out] = static_cast<int>(dry_->tensors.size());
    dry_->tensors.push_back({index, {}, plan.out_dims});
    return Status::ok();
  }

  Graph& graph_;
  PassContext& ctx_;
  std::map<std::string, int64_t> choice_;
  std::map<std::string, std::string> why_;  // node name -> the measurement behind its layout
  LayoutStructure* dry_;
  const int64_t default_block_;  // the target's channel block: the dry run's layout
  int64_t block_;                // the layout of the node being rewritten: default_block_ or 0 (nhwc)
  std::vector<Value*> pending_reads_;  // dry run: blocked operands of the node being planned
  bool x_plain_ = false;               // dry run: the conv being planned reads nchw when blocked
  std::unordered_map<const Value*, int> tensor_index_;
  std::unordered_map<const Value*, BlockedValue> blocked_;
  std::unordered_set<const Value*> produced_blocked_;  // plain values a blocked node computes
  std::map<std::pair<const Value*, int64_t>, Value*> forms_;  // Reblocks / ToBlockeds by layout
  std::unordered_map<std::string, Value*> constants_;
};

std::string fmt_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f ms", ms);
  return buf;
}

// Steps 2 and 3 of the note at the top: each conv's layout and the estimate or measurement behind
// it (`basis` says which).
// `block`: the target's blocked layout, the alternative to nhwc.
void choose_layouts(const LayoutStructure& s, int64_t block, LayoutTimer& timer, const char* basis,
                    std::map<std::string, int64_t>& choice, std::map<std::string, std::string>& why) {
  const std::string blocked_name = layout_name(block);
  constexpr double kUnavailable = 1e9;  // a layout without a fast kernel is never chosen
  constexpr double kNoiseMargin = 0.05;
  LayoutProblem problem;
  std::vector<std::array<double, 2>> conv_ms(s.items.size(), {0, 0});
  std::vector<double> image_reorder(s.items.size(), 0);
  for (size_t i = 0; i < s.items.size(); ++i) {
    const auto& item = s.items[i];
    std::array<double, 2> cost = {0, 0};
    if (item.conv) {
      const double blocked = timer.conv_ms(*item.node, block, item.x_plain);
      const double nhwc = timer.conv_ms(*item.node, 0, false);
      // On nhwc a first conv's image needs a reorder that the blocked layout reads without.
      if (item.x_plain) image_reorder[i] = std::max(0.0, timer.reorder_ms(*known_dims(item.node->input(0)), block));
      conv_ms[i] = {blocked, nhwc};
      // nhwc must win by kNoiseMargin: a measurement a few percent apart is noise on a busy
      // machine, and flipping on noise only adds reorders.
      cost = {blocked < 0 ? kUnavailable : blocked,
              nhwc < 0 ? kUnavailable : nhwc * (1 + kNoiseMargin) + image_reorder[i]};
      if (blocked < 0 && nhwc < 0) cost = {0, kUnavailable};
    } else if (item.node->op_type() == "Concat") {
      // Blocked, a Concat of whole channel blocks runs no kernel (its inputs are written in
      // place, runtime/compiled_plan.cc), other ones copy (a ChannelGather); on nhwc channels
      // are innermost, so it copies them.
      const double copy = std::max(0.0, timer.reorder_ms(*known_dims(item.node->output(0)), block));
      const auto& ins = item.node->inputs();
      const bool whole_blocks = std::all_of(ins.begin(), ins.end() - 1, [&](const Value* in) {
        return (*known_dims(in))[1] % block == 0;
      });
      cost = {whole_blocks ? 0 : copy, copy};
    }
    problem.cost.push_back(cost);
  }
  for (const auto& t : s.tensors) {
    LayoutProblem::Group g;
    if (t.producer >= 0) g.members.push_back(t.producer);
    g.members.insert(g.members.end(), t.readers.begin(), t.readers.end());
    if (g.members.size() < 2) continue;
    g.cost = std::max(0.0, timer.reorder_ms(t.dims, block));
    problem.groups.push_back(std::move(g));
  }
  std::vector<int> labels = solve_layouts(problem);
  const double best = total_cost(problem, labels);
  for (size_t i = 0; i < s.items.size(); ++i) {
    const auto& item = s.items[i];
    choice[item.node->name()] = labels[i] == 1 ? 0 : block;
    if (!item.conv) continue;
    // What keeping the other layout for this conv alone would cost, reorders included.
    labels[i] ^= 1;
    const double flipped = total_cost(problem, labels) - best;
    labels[i] ^= 1;
    auto show = [&](double ms) { return ms < 0 ? std::string("no fast kernel") : fmt_ms(ms); };
    std::string text = str_cat(basis, " ", blocked_name, " ", show(conv_ms[i][0]), ", nhwc ", show(conv_ms[i][1]));
    if (image_reorder[i] > 0) text += str_cat(" + image reorder ", fmt_ms(image_reorder[i]));
    if (flipped < kUnavailable / 2) {
      text += str_cat("; ", labels[i] == 1 ? blocked_name : "nhwc", " would cost ", fmt_ms(flipped), " more with reorders");
    }
    why[item.node->name()] = std::move(text);
  }
}

}  // namespace

Result<bool> run_layout_pass(Graph& graph, PassContext& context) {
  if (!context.fusion.rule_enabled(kPass)) return false;
  std::map<std::string, int64_t> choice;
  std::map<std::string, std::string> why;
  LayoutStructure structure;
  PassContext scratch;  // the dry run's refusals are recorded by the real run
  scratch.fusion = context.fusion;
  scratch.target = context.target;
  OPFUSE_TRY(LayoutPass(graph, scratch, {}, {}, &structure).run().status());
  bool any_conv = false;
  for (const auto& item : structure.items) any_conv |= item.conv;
  if (any_conv) {
    // Which timings decide, first that applies: a timer the caller supplied (the runtime's for
    // --measure-layouts and the tuner, a test's), a tuning record's (replayed), the estimate.
    EstimatingLayoutTimer estimating(context.target);
    const TuningRecord* tuning = context.fusion.tuning.get();
    std::optional<RecordedLayoutTimer> recorded;
    if (tuning != nullptr && tuning->use_layouts) recorded.emplace(tuning->layout_ms, context.target);
    LayoutTimer* timer = context.layout_timer;
    const char* basis = "measured";
    if (timer == nullptr && recorded) {
      timer = &*recorded;
      basis = "tuning record:";
    } else if (timer == nullptr) {
      if (context.fusion.measure_layouts) {
        return Status::user_error(
            "measure_layouts needs a layout timer: compile through Session (or analyze_fusion), which "
            "supplies one, or set PipelineOptions::layout_timer");
      }
      timer = &estimating;
      basis = "estimated";
    }
    choose_layouts(structure, context.target.channel_block(), *timer, basis, choice, why);
  }
  return LayoutPass(graph, context, std::move(choice), std::move(why), nullptr).run();
}

}  // namespace opfuse
