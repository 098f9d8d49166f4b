// Algebraic simplification: a table of small local rules, each with its algebra. A rule either
// forwards a node's input to its uses (the node then dies in dce) or rewires a node to read
// further up a chain (the intermediate then dies if nothing else reads it). A rule never moves
// the uses of a graph output, so graph output names never change.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "ops/op_def.h"
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace opfuse {
namespace {

using RuleFn = bool (*)(Graph&, Node&);

struct Rule {
  std::string_view op;       // the op the rule is anchored on (default domain)
  std::string_view algebra;  // what it rewrites, for readers and --help
  RuleFn apply;              // true when it changed the graph
};

// Moves the uses of the node's output 0 to `x`. Nothing to do when the output is unused (dce
// removes the node) and not allowed when it is a graph output.
bool forward(Graph& graph, Node& node, Value* x) {
  Value* y = node.output(0);
  if (x == nullptr || y->uses().empty()) return false;
  return replace_uses_keeping_outputs(graph, y, x);
}

// The producer of input `i` when it is an op of type `op` in the default domain.
Node* producer_of(const Node& node, size_t i, std::string_view op) {
  const Value* in = node.input(i);
  Node* p = in ? in->producer() : nullptr;
  return p && p->domain().empty() && p->op_type() == op ? p : nullptr;
}

std::optional<int64_t> rank_of(const Value* v) {
  if (v == nullptr || !v->shape) return std::nullopt;
  return static_cast<int64_t>(v->shape->size());
}

// ---- Identity / Dropout --------------------------------------------------------------------

bool identity_rule(Graph& graph, Node& node) { return forward(graph, node, node.input(0)); }

bool dropout_rule(Graph& graph, Node& node) {
  if (const Value* mask = node.output(1); mask && (!mask->uses().empty() || mask->is_graph_output())) {
    return false;
  }
  if (const Value* training = node.input(2)) {
    const Tensor* t = constant_data(training);
    if (t == nullptr || t->numel() != 1 || t->get_int(0) != 0) return false;
  }
  return forward(graph, node, node.input(0));
}

// ---- Neutral elements ----------------------------------------------------------------------

// True when input `const_index` is a constant equal to `neutral` everywhere whose broadcasting
// against input `x_index` leaves x's shape and dtype unchanged, so the op returns x itself.
bool is_neutral_operand(const Node& node, size_t x_index, size_t const_index, double neutral) {
  const Value* x = node.input(x_index);
  const Tensor* c = constant_data(node.input(const_index));
  const Value* y = node.output(0);
  if (x == nullptr || c == nullptr || !x->shape || x->dtype == DType::kUndefined) return false;
  if (c->dtype() != x->dtype || y->dtype != x->dtype) return false;
  if (c->rank() > static_cast<int64_t>(x->shape->size())) return false;
  const int64_t offset = static_cast<int64_t>(x->shape->size()) - c->rank();
  for (int64_t i = 0; i < c->rank(); ++i) {
    const Dim& d = (*x->shape)[offset + i];
    if (c->dim(i) != 1 && !(d.is_known() && d.value() == c->dim(i))) return false;
  }
  for (int64_t i = 0; i < c->numel(); ++i) {
    if (c->get_double(i) != neutral) return false;
  }
  return true;
}

bool mul_one_rule(Graph& graph, Node& node) {
  if (is_neutral_operand(node, 0, 1, 1.0)) return forward(graph, node, node.input(0));
  if (is_neutral_operand(node, 1, 0, 1.0)) return forward(graph, node, node.input(1));
  return false;
}

bool add_zero_rule(Graph& graph, Node& node) {
  if (is_neutral_operand(node, 0, 1, 0.0)) return forward(graph, node, node.input(0));
  if (is_neutral_operand(node, 1, 0, 0.0)) return forward(graph, node, node.input(1));
  return false;
}

bool sub_zero_rule(Graph& graph, Node& node) {
  return is_neutral_operand(node, 0, 1, 0.0) && forward(graph, node, node.input(0));
}

bool div_one_rule(Graph& graph, Node& node) {
  return is_neutral_operand(node, 0, 1, 1.0) && forward(graph, node, node.input(0));
}

// ---- Transpose -----------------------------------------------------------------------------

// The node's permutation with negative entries normalised, or nullopt when unknown or invalid.
std::optional<std::vector<int64_t>> transpose_perm(const Node& node) {
  std::vector<int64_t> perm;
  if (auto it = node.attrs.find("perm"); it != node.attrs.end()) {
    const auto* p = std::get_if<std::vector<int64_t>>(&it->second);
    if (p == nullptr) return std::nullopt;
    perm = *p;
  } else {
    auto rank = rank_of(node.input(0));
    if (!rank) return std::nullopt;
    for (int64_t i = *rank - 1; i >= 0; --i) perm.push_back(i);
  }
  const int64_t rank = static_cast<int64_t>(perm.size());
  return normalize_permutation(std::move(perm), rank);
}

bool is_identity_perm(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

bool transpose_identity_rule(Graph& graph, Node& node) {
  auto perm = transpose_perm(node);
  return perm && is_identity_perm(*perm) && forward(graph, node, node.input(0));
}

// y = T(x, p) has y[i] = x[p[i]], so T(T(x, p), q)[i] = x[p[q[i]]].
bool transpose_chain_rule(Graph& graph, Node& node) {
  Node* inner = producer_of(node, 0, "Transpose");
  if (inner == nullptr) return false;
  auto p = transpose_perm(*inner);
  auto q = transpose_perm(node);
  if (!p || !q || p->size() != q->size()) return false;
  std::vector<int64_t> composed;
  for (int64_t i : *q) composed.push_back((*p)[i]);
  if (is_identity_perm(composed) && forward(graph, node, inner->input(0))) return true;
  node.attrs["perm"] = composed;
  graph.set_input(&node, 0, inner->input(0));
  return true;
}

// Transpose pairs around ops that commute with a transposition. TensorFlow exports wrap the
// NHWC ops between two convs in a pair:
//   Transpose(0,2,3,1) -> Relu -> Add(bias[C]) -> Concat(axis 3, zeros) -> Transpose(0,3,1,2)
// Elementwise and broadcast ops, Concat and Pad commute: f(T(x, p)) = T(f'(x), p), where f'
// reads each constant transposed back (c' = T(c, p^-1) once c is aligned to the rank; a constant
// of ones dims as it is), a Concat its axis p[a] and a Pad its pads permuted. So a Transpose q
// closing a region of such ops opened only by Transposes p, with p then q the identity, leaves
// the region computing on the untransposed values, and every transpose of the pair goes. Only
// when nothing outside the region reads inside it: otherwise a transpose would remain anyway.

// y = T(c, perm) for a constant of any dtype.
Tensor permute_tensor(const Tensor& c, const std::vector<int64_t>& perm) {
  std::vector<int64_t> dims;
  for (int64_t a : perm) dims.push_back(c.dim(a));
  Tensor y = Tensor::zeros(c.dtype(), dims).value();
  const std::vector<int64_t> in_strides = [&] {
    std::vector<int64_t> st(c.dims().size(), 1);
    for (int64_t i = static_cast<int64_t>(st.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * c.dim(i + 1);
    return st;
  }();
  const size_t es = dtype_size(c.dtype());
  const auto* src = static_cast<const uint8_t*>(c.raw_data());
  auto* dst = static_cast<uint8_t*>(y.raw_data());
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t o = 0; o < y.numel(); ++o) {
    int64_t from = 0;
    for (size_t i = 0; i < dims.size(); ++i) from += idx[i] * in_strides[perm[i]];
    std::memcpy(dst + o * es, src + from * es, es);
    for (int64_t i = static_cast<int64_t>(dims.size()) - 1; i >= 0 && ++idx[i] == dims[i]; --i) idx[i] = 0;
  }
  return y;
}

bool commutes_with_transpose(const Node& n) {
  if (!n.domain().empty() || n.outputs().size() != 1) return false;
  // Ops with a scalar expression broadcast numpy-style; BatchNormalization, also elementwise,
  // indexes its parameters by axis 1 and does not commute.
  if (n.def().scalar != nullptr || n.op_type() == "Concat") return true;
  // Pad with constant pads over every axis (no `axes` input).
  return n.op_type() == "Pad" && constant_data(n.input(1)) != nullptr && !n.has_input(3) &&
         (!n.has_input(2) || constant_data(n.input(2)) != nullptr);
}
// Inputs that carry the region's data (Pad's pads and value are parameters).
bool is_region_operand(const Node& n, size_t i) { return n.op_type() != "Pad" || i == 0; }

bool transpose_pair_rule(Graph& graph, Node& node) {
  const auto q = transpose_perm(node);
  if (!q || node.output(0)->is_graph_output() || node.output(0)->uses().empty()) return false;
  const int64_t rank = static_cast<int64_t>(q->size());
  // The region above the closing transpose, and the transposes that open it.
  std::vector<Node*> members, opens;
  std::optional<std::vector<int64_t>> p;
  std::vector<Value*> stack = {node.input(0)};
  auto inside = [&](const Node* n) {
    return n == &node || std::find(members.begin(), members.end(), n) != members.end();
  };
  while (!stack.empty()) {
    Value* v = stack.back();
    stack.pop_back();
    Node* prod = v->producer();
    if (prod == nullptr || v->is_graph_output()) return false;
    if (std::find(members.begin(), members.end(), prod) != members.end() ||
        std::find(opens.begin(), opens.end(), prod) != opens.end()) {
      continue;
    }
    if (prod->domain().empty() && prod->op_type() == "Transpose") {
      const auto perm = transpose_perm(*prod);
      if (!perm || (p && *perm != *p)) return false;
      p = perm;
      opens.push_back(prod);
      continue;
    }
    if (!commutes_with_transpose(*prod) || rank_of(prod->output(0)) != rank || members.size() >= 64) return false;
    members.push_back(prod);
    for (size_t i = 0; i < prod->inputs().size(); ++i) {
      Value* in = prod->input(i);
      if (in != nullptr && is_region_operand(*prod, i) && constant_data(in) == nullptr) stack.push_back(in);
    }
  }
  if (!p || members.empty()) return false;
  for (int64_t i = 0; i < rank; ++i) {
    if ((*p)[(*q)[i]] != i) return false;  // p then q is not the identity
  }
  for (const std::vector<Node*>* group : {&members, &opens}) {
    for (const Node* n : *group) {
      for (const Use& u : n->output(0)->uses()) {
        if (!inside(u.node)) return false;
      }
    }
  }
  // Constants of broadcast operands must align to the rank; Concat's must have it.
  for (const Node* m : members) {
    for (size_t i = 0; i < m->inputs().size(); ++i) {
      const Tensor* c = is_region_operand(*m, i) && m->input(i) != nullptr ? constant_data(m->input(i)) : nullptr;
      if (c != nullptr && (c->rank() > rank || (m->op_type() == "Concat" && c->rank() != rank))) return false;
    }
  }
  std::vector<int64_t> inverse(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) inverse[(*p)[i]] = i;
  // Every constant the region reads, as it reads it untransposed: made before anything changes.
  struct Moved {
    Node* node;
    size_t input;
    Tensor data;
  };
  std::vector<Moved> moved_constants;
  for (Node* m : members) {
    for (size_t i = 0; i < m->inputs().size(); ++i) {
      const Tensor* c = m->input(i) != nullptr ? constant_data(m->input(i)) : nullptr;
      if (c == nullptr || (m->op_type() == "Pad" && i != 1)) continue;
      if (m->op_type() == "Pad") {
        const std::vector<int64_t> pads = c->to_int_vector();
        if (static_cast<int64_t>(pads.size()) != 2 * rank) return false;
        std::vector<int64_t> moved(pads.size());
        for (int64_t j = 0; j < rank; ++j) {
          moved[j] = pads[inverse[j]];
          moved[rank + j] = pads[rank + inverse[j]];
        }
        moved_constants.push_back({m, i, Tensor::from_vector<int64_t>({2 * rank}, moved)});
        continue;
      }
      bool ones = true;
      for (int64_t d : c->dims()) ones = ones && d == 1;
      if (ones) continue;  // broadcasts alike either way
      std::vector<int64_t> aligned(static_cast<size_t>(rank - c->rank()), 1);
      aligned.insert(aligned.end(), c->dims().begin(), c->dims().end());
      auto t = c->reshaped(aligned);
      if (!t.is_ok()) return false;
      moved_constants.push_back({m, i, permute_tensor(*t, inverse)});
    }
  }
  for (Moved& mc : moved_constants) {
    graph.set_input(mc.node, mc.input,
                    graph.add_constant(mc.node->input(mc.input)->name() + "_untransposed", std::move(mc.data)));
  }
  for (Node* open : opens) {
    for (const Use& u : std::vector<Use>(open->output(0)->uses())) {
      graph.set_input(u.node, static_cast<size_t>(u.input_index), open->input(0));
    }
  }
  for (Node* m : members) {
    if (m->op_type() == "Concat") {
      int64_t axis = AttrReader(*m).get_int("axis");
      if (axis < 0) axis += rank;
      m->attrs["axis"] = AttrValue((*p)[axis]);
    }
    Value* out = m->output(0);
    if (out->shape) {
      Shape moved;
      for (int64_t j = 0; j < rank; ++j) moved.push_back((*out->shape)[inverse[j]]);
      out->shape = std::move(moved);
    }
  }
  return forward(graph, node, node.input(0));
}

// ---- Reshape -------------------------------------------------------------------------------

// Only the last Reshape's target matters, unless it copies dims (0) from its input.
bool reshape_chain_rule(Graph& graph, Node& node) {
  Node* inner = producer_of(node, 0, "Reshape");
  const Tensor* shape = constant_data(node.input(1));
  if (inner == nullptr || shape == nullptr) return false;
  const auto it = node.attrs.find("allowzero");
  const int64_t* az = it == node.attrs.end() ? nullptr : std::get_if<int64_t>(&it->second);
  const bool allowzero = az && *az != 0;
  if (!allowzero) {
    for (int64_t d : shape->to_int_vector()) {
      if (d == 0) return false;
    }
  }
  graph.set_input(&node, 0, inner->input(0));
  return true;
}

bool reshape_same_shape_rule(Graph& graph, Node& node) {
  auto in = known_dims(node.input(0));
  auto out = known_dims(node.output(0));
  return in && out && *in == *out && forward(graph, node, node.input(0));
}

// ---- Cast ----------------------------------------------------------------------------------

int int_bits(DType t) { return static_cast<int>(dtype_size(t)) * 8; }

// True when every value of `from` is exactly representable in `to`.
bool is_exact_widening(DType from, DType to) {
  if (from == to || from == DType::kBool) return to != DType::kUndefined;
  if (from == DType::kF16) return to == DType::kF32 || to == DType::kF64;
  if (from == DType::kF32) return to == DType::kF64;
  if (is_integer(from)) {
    if (is_signed_int(from) && is_signed_int(to)) return int_bits(to) >= int_bits(from);
    if (is_unsigned_int(from) && is_unsigned_int(to)) return int_bits(to) >= int_bits(from);
    if (is_unsigned_int(from) && is_signed_int(to)) return int_bits(to) > int_bits(from);
    const int mantissa = to == DType::kF16 ? 11 : to == DType::kF32 ? 24 : to == DType::kF64 ? 53 : 0;
    const int magnitude = int_bits(from) - (is_signed_int(from) ? 1 : 0);
    return magnitude <= mantissa;
  }
  return false;
}

bool cast_same_rule(Graph& graph, Node& node) {
  const Value* x = node.input(0);
  return x && x->dtype != DType::kUndefined && x->dtype == node.output(0)->dtype &&
         forward(graph, node, node.input(0));
}

// The middle dtype holds x's value exactly, so casting from it is casting x.
bool cast_chain_rule(Graph& graph, Node& node) {
  Node* inner = producer_of(node, 0, "Cast");
  if (inner == nullptr || inner->input(0) == nullptr) return false;
  const DType from = inner->input(0)->dtype, middle = inner->output(0)->dtype;
  if (from == DType::kUndefined || !is_exact_widening(from, middle)) return false;
  if (from == node.output(0)->dtype && forward(graph, node, inner->input(0))) return true;
  graph.set_input(&node, 0, inner->input(0));
  return true;
}

// ---- Pad ------------------------------------------------------------------------------------

// No element added or removed in any mode (an exporter's placeholder Pad before a pool).
bool pad_zero_rule(Graph& graph, Node& node) {
  const Tensor* pads = constant_data(node.input(1));
  if (pads == nullptr) return false;
  for (int64_t p : pads->to_int_vector()) {
    if (p != 0) return false;
  }
  return forward(graph, node, node.input(0));
}

// Conv(Pad(x, p), w) -> Conv(x, w) with p added to the conv's pads, when p pads only the
// spatial axes, with +0: the conv reads its own padding as +0 too. TensorFlow exports write the
// "SAME" padding of strided convs this way (one row and column at the end); as a Pad it was a
// reference kernel over the plain layout, with reorders around it at O3.
bool conv_pad_rule(Graph& graph, Node& node) {
  Node* pad = producer_of(node, 0, "Pad");
  const auto rank = rank_of(node.input(0));
  if (pad == nullptr || pad->has_input(3) || !rank || *rank < 3) return false;
  const AttrReader pad_attrs(*pad);
  if (pad_attrs.has("mode") && pad_attrs.get_string("mode") != "constant") return false;
  if (pad->has_input(2)) {
    const Tensor* value = constant_data(pad->input(2));
    if (value == nullptr || value->numel() != 1 || value->get_double(0) != 0.0 || std::signbit(value->get_double(0))) {
      return false;
    }
  }
  const Tensor* pads_tensor = constant_data(pad->input(1));
  if (pads_tensor == nullptr || pads_tensor->numel() != 2 * *rank) return false;
  const std::vector<int64_t> p = pads_tensor->to_int_vector();
  const int64_t spatial = *rank - 2;
  if (p[0] != 0 || p[1] != 0 || p[*rank] != 0 || p[*rank + 1] != 0) return false;
  if (std::any_of(p.begin(), p.end(), [](int64_t v) { return v < 0; })) return false;
  const AttrReader conv_attrs(node);
  if (conv_attrs.has("auto_pad") && conv_attrs.get_string("auto_pad") != "NOTSET") return false;
  std::vector<int64_t> conv_pads =
      conv_attrs.has("pads") ? conv_attrs.get_ints("pads") : std::vector<int64_t>(static_cast<size_t>(2 * spatial), 0);
  if (static_cast<int64_t>(conv_pads.size()) != 2 * spatial) return false;
  for (int64_t i = 0; i < spatial; ++i) {
    conv_pads[static_cast<size_t>(i)] += p[static_cast<size_t>(2 + i)];
    conv_pads[static_cast<size_t>(spatial + i)] += p[static_cast<size_t>(*rank + 2 + i)];
  }
  node.attrs["pads"] = AttrValue(std::move(conv_pads));
  graph.set_input(&node, 0, pad->input(0));
  return true;
}

// ---- Squeeze / Unsqueeze -------------------------------------------------------------------

// The node's constant axes normalised against `rank`, sorted; nullopt if unknown, invalid or
// repeated.
std::optional<std::vector<int64_t>> axes_of(const Node& node, int64_t rank) {
  const Tensor* t = constant_data(node.input(1));
  if (t == nullptr) return std::nullopt;
  std::vector<int64_t> axes = t->to_int_vector();
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return std::nullopt;
  return axes;
}

// Both axes lists index the unsqueezed tensor; equal lists remove exactly the inserted dims.
bool squeeze_unsqueeze_rule(Graph& graph, Node& node) {
  Node* inner = producer_of(node, 0, "Unsqueeze");
  auto rank = rank_of(node.input(0));
  if (inner == nullptr || !rank) return false;
  auto inserted = axes_of(*inner, *rank);
  auto removed = axes_of(node, *rank);
  return inserted && removed && *inserted == *removed && forward(graph, node, inner->input(0));
}

// Both axes lists index x's rank; the squeezed dims were 1 and come back at the same places.
bool unsqueeze_squeeze_rule(Graph& graph, Node& node) {
  Node* inner = producer_of(node, 0, "Squeeze");
  if (inner == nullptr) return false;
  auto rank = rank_of(inner->input(0));
  if (!rank) return false;
  auto removed = axes_of(*inner, *rank);
  auto inserted = axes_of(node, *rank);
  return removed && inserted && *removed == *inserted && forward(graph, node, inner->input(0));
}

const std::vector<Rule>& rules() {
  static const std::vector<Rule> table = {
      {"Identity", "Identity(x) -> x", identity_rule},
      {"Dropout", "Dropout(x) -> x (inference, mask unused)", dropout_rule},
      {"Mul", "Mul(x, 1) -> x, Mul(1, x) -> x (shape and dtype of x kept)", mul_one_rule},
      {"Add", "Add(x, 0) -> x, Add(0, x) -> x (shape and dtype of x kept)", add_zero_rule},
      {"Sub", "Sub(x, 0) -> x (shape and dtype of x kept)", sub_zero_rule},
      {"Div", "Div(x, 1) -> x (shape and dtype of x kept)", div_one_rule},
      {"Transpose", "Transpose(x, identity) -> x", transpose_identity_rule},
      {"Transpose", "Transpose(Transpose(x, p), q) -> Transpose(x, p[q])", transpose_chain_rule},
      {"Transpose", "Transpose(f(Transpose(x, p)), q) -> f'(x) when p then q is the identity and f is elementwise, broadcast, Concat and Pad ops",
       transpose_pair_rule},
      {"Reshape", "Reshape(x, s) -> x when s is x's static shape", reshape_same_shape_rule},
      {"Reshape", "Reshape(Reshape(x, s1), s2) -> Reshape(x, s2) (s2 constant, no 0)",
       reshape_chain_rule},
      {"Cast", "Cast(x, dtype(x)) -> x", cast_same_rule},
      {"Cast", "Cast(Cast(x, a), b) -> Cast(x, b) when x -> a is exact", cast_chain_rule},
      {"Pad", "Pad(x, all-zero pads) -> x", pad_zero_rule},
      {"Conv", "Conv(Pad(x, p), w) -> Conv(x, w) with p added to its pads (p spatial, constant, value +0)", conv_pad_rule},
      {"Squeeze", "Squeeze(Unsqueeze(x, axes), axes) -> x", squeeze_unsqueeze_rule},
      {"Unsqueeze", "Unsqueeze(Squeeze(x, axes), axes) -> x", unsqueeze_squeeze_rule},
  };
  return table;
}

}  // namespace

Result<bool> run_simplify_pass(Graph& graph, PassContext&) {
  constexpr int kMaxStepsPerNode = 8;
  bool changed = false;
  for (Node* node : graph.nodes()) {
    if (!node->domain().empty() || node->outputs().empty()) continue;
    // A rule may rewrite the node into a form another rule (or itself) applies to again:
    // Transpose(Transpose(Transpose(x))) collapses here, one step at a time.
    for (int step = 0; step < kMaxStepsPerNode; ++step) {
      bool fired = false;
      for (const Rule& rule : rules()) {
        if (rule.op == node->op_type() && rule.apply(graph, *node)) {
          fired = true;
          break;
        }
      }
      if (!fired) break;
      changed = true;
    }
  }
  return changed;
}

}  // namespace opfuse
