// Consecutive one-step recurrences become one over the whole sequence. An exporter that unrolls
// a loop over time (PyTorch's nn.LSTMCell in a Python loop, after the lstm_cell pattern made
// every step an LSTM) leaves T nodes, each on one step, each reading the previous one's final
// state:
//
//   before                                           after
//     LSTM_0(Unsqueeze(X[0]), W, R, B, h0, c0)         LSTM(X[0:T], W, R, B, h0, c0) -> Y, Y_h, Y_c
//     LSTM_1(Unsqueeze(X[1]), W, R, B, Y_h0, Y_c0)     step k's Y_h (where read): Y[k] as [1, B, H]
//     ...                                              last step's Y_h, Y_c: Y_h, Y_c
//
// One node projects every step's input in one GEMM and keeps the weights packed across steps
// (kernels/cpu/rnn_kernel.cc) instead of T kernel calls. Conditions: the same op, attributes and
// W, R, B (the same values, as the lstm_cell pattern shares them, or equal constants), forward, no sequence lengths or peepholes,
// each step's X one step; step k+1's initial state is exactly step k's final one, and an inner
// step's final cell state is read by nothing else (the merged node only gives the last one). The
// steps' inputs are stacked: a Slice of the tensor they were gathered from, when they are its
// consecutive steps (X[k] by Gather on axis 0, then Unsqueeze), else a Concat. Exact: the merged
// node computes the same steps in the same order.
#include <algorithm>
#include <concepts>
#include <cstring>
#include <type_traits>
#include <variant>

#include "ops/fused.h"
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace opfuse {
namespace {

constexpr std::string_view kPass = "merge_rnn_steps";
constexpr size_t kX = 0, kW = 1, kR = 2, kB = 3, kSeqLens = 4, kInitialH = 5, kInitialC = 6, kPeephole = 7;

bool has_state_c(const Node& n) { return n.op_type() == "LSTM"; }

// A one-step, forward recurrence with constant weights, the candidates.
bool is_step(const Node& n) {
  if (!n.domain().empty() || (n.op_type() != "LSTM" && n.op_type() != "GRU" && n.op_type() != "RNN")) return false;
  const AttrReader attrs(n);
  if (attrs.get_string("direction") != "forward" || attrs.get_int("layout") != 0) return false;
  const auto x = known_dims(n.input(kX));
  if (!x || x->size() != 3 || (*x)[0] != 1 || n.input(kX)->dtype != DType::kF32) return false;
  if (n.has_input(kSeqLens) || n.has_input(kPeephole) || !n.has_input(kInitialH)) return false;
  if (has_state_c(n) && !n.has_input(kInitialC)) return false;
  for (size_t i : {kW, kR}) {
    if (constant_data(n.input(i)) == nullptr) return false;
  }
  return !n.has_input(kB) || constant_data(n.input(kB)) != nullptr;
}

// Equal attributes (tensor and graph attributes, which RNNs do not have, count as different).
bool same_attrs(const Attributes& a, const Attributes& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, value] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.index() != value.index()) return false;
    const bool equal = std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::equality_comparable<T>) {
            return v == std::get<T>(it->second);
          } else {
            return false;
          }
        },
        value);
    if (!equal) return false;
  }
  return true;
}

// The same value, or constants with the same bytes (a first step whose initial state is zero gets
// its biases from another folded constant than the later steps).
bool same_weights(const Value* a, const Value* b) {
  if (a == b) return true;
  const Tensor* ta = a != nullptr ? constant_data(a) : nullptr;
  const Tensor* tb = b != nullptr ? constant_data(b) : nullptr;
  return ta != nullptr && tb != nullptr && ta->dtype() == tb->dtype() && ta->dims() == tb->dims() &&
         std::memcmp(ta->raw_data(), tb->raw_data(), ta->nbytes()) == 0;
}

Value* output_or_null(const Node& n, size_t i) { return i < n.outputs().size() ? n.output(i) : nullptr; }

// The step after `n`: a step with the same op, attributes and weights whose initial state is
// n's final state.
Node* next_step(const Node& n) {
  Value* h = output_or_null(n, 1);
  if (h == nullptr) return nullptr;
  for (const Use& u : h->uses()) {
    Node* m = u.node;
    if (u.input_index != static_cast<int>(kInitialH) || !is_step(*m) || m->op_type() != n.op_type() ||
        !same_attrs(m->attrs, n.attrs)) {
      continue;
    }
    bool same = true;
    for (size_t i : {kW, kR, kB}) same = same && same_weights(m->input(i), n.input(i));
    if (has_state_c(n)) same = same && output_or_null(n, 2) != nullptr && m->input(kInitialC) == n.output(2);
    if (same) return m;
  }
  return nullptr;
}

// X[k] of `x` taken as Unsqueeze(Gather(x, k, axis 0), axes [0]): x and k.
std::optional<std::pair<Value*, int64_t>> step_of(const Value* x) {
  const Node* u = x->producer();
  if (u == nullptr || u->op_type() != "Unsqueeze" || !u->domain().empty()) return std::nullopt;
  const Tensor* axes = constant_data(u->input(1));
  const Node* g = u->input(0)->producer();
  if (axes == nullptr || axes->numel() != 1 || axes->get_int(0) != 0 || g == nullptr || g->op_type() != "Gather" ||
      !g->domain().empty() || AttrReader(*g).get_int("axis") != 0) {
    return std::nullopt;
  }
  const Tensor* k = constant_data(g->input(1));
  if (k == nullptr || k->numel() != 1 || k->rank() != 0) return std::nullopt;
  return std::make_pair(g->input(0), k->get_int(0));
}

class MergeRnnSteps {
 public:
  MergeRnnSteps(Graph& graph, PassContext& ctx) : graph_(graph), ctx_(ctx) {}

  Result<bool> run() {
    bool changed = false;
    std::vector<const Node*> done;
    for (Node* first : graph_.nodes()) {
      if (!is_step(*first) || std::find(done.begin(), done.end(), first) != done.end()) continue;
      // Chains are walked from their first step: one that no step of the same chain precedes.
      const Value* h0 = first->input(kInitialH);
      if (h0->producer() != nullptr && is_step(*h0->producer()) && next_step(*h0->producer()) == first) continue;
      std::vector<Node*> chain = {first};
      while (Node* next = next_step(*chain.back())) chain.push_back(next);
      done.insert(done.end(), chain.begin(), chain.end());
      if (chain.size() < 2) continue;
      OPFUSE_ASSIGN_OR_RETURN(bool merged, merge(chain));
      changed |= merged;
    }
    if (changed) {
      graph_.remove_dead_values();
      OPFUSE_TRY(graph_.topological_sort());
    }
    return changed;
  }

 private:
  Result<bool> merge(const std::vector<Node*>& chain) {
    const Node& first = *chain.front();
    const std::string name = first.name() + "_steps";
    const std::string what = str_cat(chain.size(), " one-step ", first.op_type(), " nodes from '", first.name(), "'");
    for (const Node* n : chain) {
      for (const Value* out : n->outputs()) {
        if (out != nullptr && out->is_graph_output()) {
          ctx_.decide(refusal(std::string(kPass), what, "a step's own output is a graph output"));
          return false;
        }
      }
    }
    for (size_t k = 0; k + 1 < chain.size(); ++k) {
      const Value* c = has_state_c(*chain[k]) ? chain[k]->output(2) : nullptr;
      if (c != nullptr && c->uses().size() != 1) {
        ctx_.decide(refusal(std::string(kPass), what, "an inner step's cell state is read elsewhere"));
        return false;
      }
    }
    const int64_t steps = static_cast<int64_t>(chain.size());
    const std::vector<int64_t> x1 = *known_dims(first.input(kX));
    // The stacked inputs: a Slice of the sequence the steps were gathered from, or a Concat.
    Value* x = nullptr;
    auto s0 = step_of(first.input(kX));
    bool consecutive = s0.has_value();
    for (int64_t k = 1; consecutive && k < steps; ++k) {
      auto sk = step_of(chain[static_cast<size_t>(k)]->input(kX));
      consecutive = sk && sk->first == s0->first && sk->second == s0->second + k;
    }
    const std::vector<int64_t> xs = {steps, x1[1], x1[2]};
    if (consecutive) {
      Value* starts = graph_.add_constant(name + "_start", Tensor::from_vector<int64_t>({1}, {s0->second}));
      Value* ends = graph_.add_constant(name + "_end", Tensor::from_vector<int64_t>({1}, {s0->second + steps}));
      Value* axes = graph_.add_constant(name + "_axis", Tensor::from_vector<int64_t>({1}, {0}));
      OPFUSE_ASSIGN_OR_RETURN(Node * slice, graph_.add_node("Slice", {s0->first, starts, ends, axes}, {name + "_x"}, {}, name + "_x"));
      x = slice->output(0);
    } else {
      std::vector<Value*> parts;
      for (const Node* n : chain) parts.push_back(n->input(kX));
      Attributes attrs;
      attrs["axis"] = AttrValue(int64_t{0});
      OPFUSE_ASSIGN_OR_RETURN(Node * cat, graph_.add_node("Concat", parts, {name + "_x"}, attrs, name + "_x"));
      x = cat->output(0);
    }
    x->dtype = DType::kF32;
    x->shape = make_shape(xs);
    std::vector<Value*> inputs = {x, first.input(kW), first.input(kR), first.input(kB), nullptr, first.input(kInitialH)};
    if (has_state_c(first)) inputs.push_back(first.input(kInitialC));
    const bool c = has_state_c(first);
    std::vector<std::string> outs = {name + "_Y", name + "_Y_h"};
    if (c) outs.push_back(name + "_Y_c");
    OPFUSE_ASSIGN_OR_RETURN(Node * merged, graph_.add_node(first.op_type(), inputs, outs, first.attrs, name));
    const Value* last_h = chain.back()->output(1);
    const std::vector<int64_t> state = *known_dims(last_h);  // [1, B, H]
    merged->output(0)->dtype = DType::kF32;
    merged->output(0)->shape = make_shape({steps, 1, state[1], state[2]});
    for (size_t i = 1; i < merged->outputs().size(); ++i) {
      merged->output(i)->dtype = DType::kF32;
      merged->output(i)->shape = make_shape(state);
    }
    // Step k's outputs where something other than step k + 1 reads them: Y[k] (its Y), or Y[k]
    // as [1, B, H] (its Y_h).
    Value* y_axis = graph_.add_constant(name + "_y_axis", Tensor::from_vector<int64_t>({1}, {0}));
    Value* state_shape = graph_.add_constant(name + "_state_shape", Tensor::from_vector<int64_t>({3}, state));
    for (int64_t k = 0; k < steps; ++k) {
      Node* n = chain[static_cast<size_t>(k)];
      const bool last = k + 1 == steps;
      Value* y_k = n->output(0);
      Value* h_k = n->output(1);
      const bool y_read = y_k != nullptr && !y_k->uses().empty();
      bool h_read = false;
      for (const Use& u : h_k->uses()) h_read = h_read || last || u.node != chain[static_cast<size_t>(k + 1)];
      if (!y_read && !h_read) continue;
      if (last) {
        graph_.replace_all_uses(h_k, merged->output(1));
      }
      if (!y_read && last) continue;
      Value* from = graph_.add_constant(str_cat(name, "_step", k), Tensor::from_vector<int64_t>({1}, {k}));
      Value* to = graph_.add_constant(str_cat(name, "_step", k, "_end"), Tensor::from_vector<int64_t>({1}, {k + 1}));
      OPFUSE_ASSIGN_OR_RETURN(Node * slice, graph_.add_node("Slice", {merged->output(0), from, to, y_axis},
                                                           {str_cat(name, "_y", k)}, {}, str_cat(name, "_y", k)));
      Value* yk = slice->output(0);
      yk->dtype = DType::kF32;
      yk->shape = make_shape({1, 1, state[1], state[2]});
      if (y_read) graph_.replace_all_uses(y_k, yk);
      if (!last && h_read) {
        OPFUSE_ASSIGN_OR_RETURN(Node * r, graph_.add_node("Reshape", {yk, state_shape}, {str_cat(name, "_h", k)}, {},
                                                         str_cat(name, "_h", k)));
        r->output(0)->dtype = DType::kF32;
        r->output(0)->shape = make_shape(state);
        for (const Use& u : std::vector<Use>(h_k->uses())) {
          if (u.node != chain[static_cast<size_t>(k + 1)]) graph_.set_input(u.node, static_cast<size_t>(u.input_index), r->output(0));
        }
      }
    }
    if (c) graph_.replace_all_uses(chain.back()->output(2), merged->output(2));
    std::vector<std::string> members;
    for (const Node* n : chain) members.push_back(n->name());
    ctx_.decide(application(std::string(kPass), str_cat(what, " as one ", first.op_type(), " over ", steps, " steps"),
                            members, name));
    return true;
  }

  Graph& graph_;
  PassContext& ctx_;
};

}  // namespace

Result<bool> run_merge_rnn_steps_pass(Graph& graph, PassContext& context) {
  if (!context.fusion.rule_enabled(kPass)) return false;
  return MergeRnnSteps(graph, context).run();
}

}  // namespace opfuse
