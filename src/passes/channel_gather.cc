// Channel gathers: a chain of data-movement ops whose result is only whole channels of its
// sources, reordered, becomes one opfuse::ChannelGather (ops/channel_gather.cc). ShuffleNet's
// channel shuffle is the case in point:
//
//   before                                          after
//     a, b: [1,58,28,28]                              a, b: [1,58,28,28]
//     Concat(a, b) -> Reshape [1,2,58,28,28]          l = ChannelGather(a, b) {channel 2i+j of the
//     -> Transpose(0,2,1,3,4) -> Reshape [1,116,..]       shuffle for its first 58 channels}
//     -> Split(58, 58) -> l, r                        r = ChannelGather(a, b) {the other 58}
//     Conv(r) ...                                     Conv(r) ...
//
// The chain ran as a generated kernel reading through a per-element index table (the Reshape
// pair is not affine), on the plain layout only: at O3 every ShuffleNet unit paid a FromBlocked
// and a ToBlocked around it. A ChannelGather is a plane (or block) copy, and the layout pass runs
// it on blocked activations.
//
// How: one walk in topological order evaluates every movement op (Concat, Reshape, Transpose,
// Split, Slice, Squeeze, Unsqueeze, Flatten, Identity, Gather by constant indices) with its
// reference kernel on probes: int64 tensors whose elements name themselves ((source + 1) << 40
// | flat index), a source being any value that no evaluated movement op produced. So the probe of
// a chain's output says, element by element, where the chain reads it from, whatever the ops and
// attributes were. A value read by something other than a movement op is rewritten when its probe
// shows that every element (n, c, rest) comes from (n, c', rest) of one source with the same
// dims outside axis 1, c' and the source depending on c alone. Chains through units are followed
// back to where their data was computed (ShuffleNet's passed-through half crosses every unit of a
// stage), so each gather copies once from the convs' outputs. Only chains through a Reshape,
// Transpose, Gather, Flatten, Squeeze or Unsqueeze are rewritten (a Concat or Split alone runs in
// place already, runtime/compiled_plan.cc), and only for a reader that is not elementwise (region
// fusion absorbs a chain into an elementwise reader without copying it). A chain that gives back
// one source unchanged (a Reshape round trip) is dropped: its readers read the source. Exact.
#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "ops/fused.h"
#include "ops/reference.h"
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace opfuse {
namespace {

constexpr std::string_view kPass = "channel_gather";
constexpr int kSourceShift = 40;
constexpr int64_t kFlatMask = (int64_t{1} << kSourceShift) - 1;
// Probes alive at once, in elements (8 bytes each): bounds the pass's memory on big images.
constexpr int64_t kMaxProbeElements = int64_t{1} << 22;

// Movement ops and which of their inputs carry data (the others must be constants).
bool is_movement(const Node& node) {
  static const std::unordered_set<std::string> ops = {"Concat",    "Reshape", "Transpose", "Split",
                                                      "Slice",     "Squeeze", "Unsqueeze", "Flatten",
                                                      "Identity",  "Gather"};
  return node.domain().empty() && ops.count(node.op_type()) > 0;
}
bool is_data_input(const Node& node, size_t i) { return i == 0 || node.op_type() == "Concat"; }
// Ops that only cut or join along one axis: chains of these alone already run in place.
bool only_cuts_or_joins(const Node& node) {
  const std::string& op = node.op_type();
  return op == "Concat" || op == "Split" || op == "Slice" || op == "Identity";
}

struct Probe {
  Tensor data;                       // int64, the value's dims
  bool reshaped = false;             // the chain has an op other than Concat/Split/Slice/Identity
  std::vector<std::string> members;  // the movement nodes of the chain
};

class ChannelGatherPass {
 public:
  ChannelGatherPass(Graph& graph, PassContext& ctx) : graph_(graph), ctx_(ctx) {}

  Result<bool> run() {
    for (Node* node : graph_.nodes()) {
      if (!is_movement(*node)) continue;
      for (size_t i = 0; i < node->inputs().size(); ++i) {
        if (node->input(i) != nullptr && is_data_input(*node, i)) ++pending_[node->input(i)];
      }
    }
    bool changed = false;
    for (Node* node : graph_.nodes()) {
      if (!is_movement(*node)) continue;
      OPFUSE_ASSIGN_OR_RETURN(bool probed, probe(*node));
      if (probed) {
        for (Value* out : node->outputs()) {
          if (out == nullptr) continue;
          changed |= rewrite_readers(out);
          if (!wanted(out)) release(out);
        }
      }
      for (size_t i = 0; i < node->inputs().size(); ++i) {
        Value* in = node->input(i);
        if (in != nullptr && is_data_input(*node, i) && --pending_[in] == 0) release(in);
      }
    }
    if (changed) {
      graph_.remove_dead_values();
      OPFUSE_TRY(graph_.topological_sort());
    }
    return changed;
  }

 private:
  // The probe of `v` as a source: each element holds (its source number + 1) << 40 | its index.
  const Probe* source_probe(Value* v) {
    if (auto it = probes_.find(v); it != probes_.end()) return &it->second;
    const auto dims = known_dims(v);
    if (!dims || v->is_constant()) return nullptr;
    int64_t numel = 1;
    for (int64_t d : *dims) numel *= d;
    if (numel > kFlatMask || live_ + numel > kMaxProbeElements) return nullptr;
    auto t = Tensor::zeros(DType::kI64, *dims);
    if (!t.is_ok()) return nullptr;
    const int64_t tag = static_cast<int64_t>(sources_.size() + 1) << kSourceShift;
    int64_t* p = t->data<int64_t>();
    for (int64_t i = 0; i < numel; ++i) p[i] = tag | i;
    sources_.push_back(v);
    live_ += numel;
    return &probes_.emplace(v, Probe{std::move(*t), false, {}}).first->second;
  }

  // Evaluates `node` on probes; false when some input cannot be probed.
  Result<bool> probe(const Node& node) {
    std::vector<const Tensor*> inputs;
    bool reshaped = !only_cuts_or_joins(node);
    std::vector<std::string> members;
    for (size_t i = 0; i < node.inputs().size(); ++i) {
      Value* in = node.input(i);
      if (in == nullptr) {
        inputs.push_back(nullptr);
        continue;
      }
      if (!is_data_input(node, i)) {
        const Tensor* t = constant_data(in);
        if (t == nullptr) return false;
        inputs.push_back(t);
        continue;
      }
      const Probe* p = source_probe(in);
      if (p == nullptr) return false;
      inputs.push_back(&p->data);
      reshaped |= p->reshaped;
      members.insert(members.end(), p->members.begin(), p->members.end());
    }
    int64_t out_elements = 0;
    for (const Value* out : node.outputs()) {
      const auto dims = out != nullptr ? known_dims(out) : std::nullopt;
      if (!dims) return false;
      int64_t numel = 1;
      for (int64_t d : *dims) numel *= d;
      out_elements += numel;
    }
    if (live_ + out_elements > kMaxProbeElements) return false;
    auto outputs = run_reference(node, std::move(inputs));
    if (!outputs.is_ok()) return false;  // the real kernel will report it with real data
    members.push_back(node.name());
    std::sort(members.begin(), members.end());
    members.erase(std::unique(members.begin(), members.end()), members.end());
    for (size_t i = 0; i < node.outputs().size(); ++i) {
      live_ += (*outputs)[i].numel();
      probes_[node.output(i)] = Probe{std::move((*outputs)[i]), reshaped, members};
    }
    return true;
  }

  // Frees a probe no later movement op reads.
  void release(const Value* v) {
    if (auto it = probes_.find(v); it != probes_.end()) {
      live_ -= it->second.data.numel();
      probes_.erase(it);
    }
  }
  bool wanted(const Value* v) const {
    auto it = pending_.find(v);
    return it != pending_.end() && it->second > 0;
  }

  // What `v`'s probe says: per channel, its source and the channel there; nullopt when some
  // element comes from elsewhere than (n, c', rest) of a source shaped like `v` outside axis 1.
  // `alike`: whether every source read is shaped like `v` outside axis 1 (a chain that changes
  // ranks, such as attention's head split, is no candidate: not worth a refusal).
  struct Gather {
    std::vector<Value*> inputs;
    std::vector<int64_t> sources, channels;
  };
  std::optional<Gather> as_gather(const Value* v, const Tensor& probe, bool& alike) const {
    alike = true;
    const std::vector<int64_t>& dims = probe.dims();
    const int64_t batch = dims[0], c_out = dims[1];
    int64_t positions = 1;
    for (size_t i = 2; i < dims.size(); ++i) positions *= dims[i];
    std::vector<int64_t> source(static_cast<size_t>(c_out), -1), channel(static_cast<size_t>(c_out), -1);
    const int64_t* p = probe.data<int64_t>();
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t c = 0; c < c_out; ++c) {
        const int64_t* row = p + (n * c_out + c) * positions;
        const int64_t k = (row[0] >> kSourceShift) - 1;
        if (k < 0 || k >= static_cast<int64_t>(sources_.size())) return std::nullopt;
        const Value* src = sources_[static_cast<size_t>(k)];
        const auto sd = known_dims(src);
        bool same = sd && sd->size() == dims.size() && src->dtype == v->dtype;
        for (size_t i = 0; same && i < dims.size(); ++i) same = i == 1 || (*sd)[i] == dims[i];
        if (!same) {
          alike = false;
          return std::nullopt;
        }
        const int64_t first = row[0] & kFlatMask;
        const int64_t c_src = (first / positions) % (*sd)[1];
        if (first != (n * (*sd)[1] + c_src) * positions) return std::nullopt;
        if (n == 0) {
          source[c] = k;
          channel[c] = c_src;
        } else if (source[c] != k || channel[c] != c_src) {
          return std::nullopt;
        }
        // Every position of the channel, in order, from the same source channel.
        const int64_t expect = (static_cast<int64_t>(k + 1) << kSourceShift) | first;
        for (int64_t s = 0; s < positions; ++s) {
          if (row[s] != expect + s) return std::nullopt;
        }
      }
    }
    Gather g;
    std::unordered_map<int64_t, int64_t> input_of;
    for (int64_t c = 0; c < c_out; ++c) {
      auto [it, added] = input_of.try_emplace(source[c], static_cast<int64_t>(g.inputs.size()));
      if (added) g.inputs.push_back(sources_[static_cast<size_t>(source[c])]);
      g.sources.push_back(it->second);
      g.channels.push_back(channel[c]);
    }
    return g;
  }

  // Points the readers of `v` that are not movement ops at a ChannelGather of its sources.
  bool rewrite_readers(Value* v) {
    const auto pit = probes_.find(v);
    if (pit == probes_.end() || !pit->second.reshaped || pit->second.data.rank() < 3) return false;
    std::vector<Use> readers;
    bool needs_copy = false;
    for (const Use& u : v->uses()) {
      if (is_movement(*u.node)) continue;
      readers.push_back(u);
      const FusionKind kind = u.node->def().kind;
      needs_copy |= kind != FusionKind::kElementwise && kind != FusionKind::kBroadcast;
    }
    if (readers.empty() || !needs_copy) return false;
    const Probe& probe = pit->second;
    bool alike = false;
    const std::optional<Gather> g = as_gather(v, probe.data, alike);
    if (!g) {
      if (alike) ctx_.decide(refusal(std::string(kPass), str_cat("'", v->name(), "'"),
                          "its chain moves data across positions or batches, not whole channels", probe.members));
      return false;
    }
    Value* replacement = nullptr;
    std::string what;
    bool identity = g->inputs.size() == 1 && known_dims(g->inputs[0]) == known_dims(v);
    for (size_t c = 0; identity && c < g->channels.size(); ++c) identity = g->channels[c] == static_cast<int64_t>(c);
    if (identity) {
      replacement = g->inputs[0];
      what = str_cat("'", v->name(), "' is '", replacement->name(), "' unchanged: its readers read that");
    } else {
      Attributes attrs;
      attrs["sources"] = AttrValue(g->sources);
      attrs["channels"] = AttrValue(g->channels);
      auto node = graph_.add_node("ChannelGather", g->inputs, {graph_.unique_value_name(v->name() + "_gathered")}, attrs,
                                  v->name() + "_channel_gather", std::string(kFusedDomain));
      if (!node.is_ok()) return false;
      replacement = (*node)->output(0);
      replacement->dtype = v->dtype;
      replacement->shape = v->shape;
      what = str_cat("'", v->name(), "' as one ChannelGather of ", g->inputs.size(), " values (",
                     probe.members.size(), " movement ops)");
    }
    for (const Use& u : readers) graph_.set_input(u.node, static_cast<size_t>(u.input_index), replacement);
    PassDecision d = application(std::string(kPass), what, probe.members,
                                 replacement->producer() != nullptr ? replacement->producer()->name() : "");
    ctx_.decide(std::move(d));
    return true;
  }

  Graph& graph_;
  PassContext& ctx_;
  std::unordered_map<const Value*, Probe> probes_;
  std::unordered_map<const Value*, int> pending_;  // movement ops yet to read each value
  std::vector<Value*> sources_;                    // by source number
  int64_t live_ = 0;                               // elements in probes_
};

}  // namespace

Result<bool> run_channel_gather_pass(Graph& graph, PassContext& context) {
  if (!context.fusion.rule_enabled(kPass)) return false;
  return ChannelGatherPass(graph, context).run();
}

}  // namespace opfuse
