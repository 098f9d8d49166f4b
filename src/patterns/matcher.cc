// The matcher: walks a match tree against the graph from a root node, upwards through producers.
// It enumerates every fit (commutative operands in both orders, each alternative of one_of) in
// continuation-passing style, so a later operand failing makes it backtrack into the earlier
// choices; the driver takes the first fit that its guards accept.
#include <algorithm>
#include <cmath>

#include "ops/op_def.h"
#include "patterns/pattern.h"

namespace opfuse::patterns {
namespace {

using Cont = std::function<bool(Match&)>;  // true: stop enumerating

std::pair<std::string_view, std::string_view> split_domain(std::string_view type) {
  const size_t colons = type.find("::");
  if (colons == std::string_view::npos) return {"", type};
  return {type.substr(0, colons), type.substr(colons + 2)};
}

bool op_type_matches(const PatternNode& p, const Node& node) {
  for (const std::string& t : p.ops) {
    const auto [domain, type] = split_domain(t);
    if (node.domain() == domain && node.op_type() == type) return true;
  }
  return false;
}

// Binds `name` to `v`; false when it is bound to another value.
bool bind(Match& m, const std::string& name, Value* v) {
  if (name.empty()) return true;
  auto [it, fresh] = m.values.emplace(name, v);
  return fresh || it->second == v;
}

// All elements of a constant equal (within a relative 1e-6); their value, else nullopt.
std::optional<double> uniform_value(const Value* v) {
  const Tensor* t = constant_operand(v);
  if (t == nullptr || t->numel() < 1) return std::nullopt;
  if (t->dtype() != DType::kF32 && t->dtype() != DType::kF64 && t->dtype() != DType::kF16) {
    return std::nullopt;
  }
  const double first = t->get_double(0);
  for (int64_t i = 1; i < t->numel(); ++i) {
    if (std::abs(t->get_double(i) - first) > 1e-6 * std::max(1.0, std::abs(first))) return std::nullopt;
  }
  return first;
}

size_t arity(const Node& node) {
  size_t n = node.inputs().size();
  while (n > 0 && node.input(n - 1) == nullptr) --n;
  return n;
}

bool match_value(const PatternNode& p, Value* v, Match m, const Cont& k);

// Matches operands[i..] against the node's inputs in `order`, then continues with k.
bool match_operands(const PatternNode& p, const Node& node, const std::vector<size_t>& order, size_t i,
                    Match m, const Cont& k) {
  if (i == p.inputs.size()) return k(m);
  return match_value(p.inputs[i], node.input(order[i]), std::move(m),
                     [&](Match& next) { return match_operands(p, node, order, i + 1, next, k); });
}

bool match_op(const PatternNode& p, Value* v, Match m, const Cont& k) {
  Node* node = v->producer();
  if (node == nullptr || v->producer_output() != 0 || !op_type_matches(p, *node)) return false;
  if (!p.capture.empty()) {
    if (auto it = m.values.find(p.capture); it != m.values.end()) {
      if (it->second != v) return false;
      if (m.node_captures.count(p.capture)) return k(m);  // this op tree matched already
    }
    m.values[p.capture] = v;
    m.node_captures[p.capture] = node;
  }
  if (std::find(m.nodes.begin(), m.nodes.end(), node) == m.nodes.end()) m.nodes.push_back(node);
  if (p.inputs.empty()) return k(m);
  const size_t n = arity(*node);
  if (p.more_inputs ? n < p.inputs.size() : n != p.inputs.size()) return false;
  std::vector<size_t> order(p.inputs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (match_operands(p, *node, order, 0, m, k)) return true;
  if (node->def().traits.commutative && order.size() == 2 && !p.more_inputs) {
    std::swap(order[0], order[1]);
    return match_operands(p, *node, order, 0, std::move(m), k);
  }
  return false;
}

bool match_value(const PatternNode& p, Value* v, Match m, const Cont& k) {
  if (v == nullptr) return false;
  using K = PatternNode::Kind;
  switch (p.kind) {
    case K::kOp: return match_op(p, v, std::move(m), k);
    case K::kAny: return bind(m, p.capture, v) && k(m);
    case K::kConstant: return constant_operand(v) != nullptr && bind(m, p.capture, v) && k(m);
    case K::kScalar: {
      const auto u = uniform_value(v);
      if (!u || std::abs(*u - p.value) > p.tolerance * std::max(1.0, std::abs(p.value))) return false;
      if (!bind(m, p.capture, v)) return false;
      if (!p.capture.empty()) m.scalars[p.capture] = *u;
      return k(m);
    }
    case K::kAnyScalar: {
      const auto u = uniform_value(v);
      if (!u || !bind(m, p.capture, v)) return false;
      if (!p.capture.empty()) m.scalars[p.capture] = *u;
      return k(m);
    }
    case K::kOneOf:
      for (const PatternNode& alt : p.inputs) {
        const bool stop = match_value(alt, v, m, [&](Match& next) {
          return bind(next, p.capture, v) && k(next);
        });
        if (stop) return true;
      }
      return false;
  }
  return false;
}

std::vector<std::string> split_types(std::string_view types) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t bar = types.find('|', start);
    out.emplace_back(types.substr(start, bar == std::string_view::npos ? bar : bar - start));
    if (bar == std::string_view::npos) return out;
    start = bar + 1;
  }
}

}  // namespace

PatternNode op(std::string_view types, std::vector<PatternNode> inputs) {
  PatternNode p;
  p.kind = PatternNode::Kind::kOp;
  p.ops = split_types(types);
  p.inputs = std::move(inputs);
  return p;
}

PatternNode op_head(std::string_view types, std::vector<PatternNode> first_inputs) {
  PatternNode p = op(types, std::move(first_inputs));
  p.more_inputs = true;
  return p;
}

PatternNode any(std::string capture) {
  PatternNode p;
  p.capture = std::move(capture);
  return p;
}

PatternNode constant(std::string capture) {
  PatternNode p;
  p.kind = PatternNode::Kind::kConstant;
  p.capture = std::move(capture);
  return p;
}

PatternNode scalar(double value, double tolerance, std::string capture) {
  PatternNode p;
  p.kind = PatternNode::Kind::kScalar;
  p.value = value;
  p.tolerance = tolerance;
  p.capture = std::move(capture);
  return p;
}

PatternNode any_scalar(std::string capture) {
  PatternNode p;
  p.kind = PatternNode::Kind::kAnyScalar;
  p.capture = std::move(capture);
  return p;
}

PatternNode one_of(std::vector<PatternNode> alternatives, std::string capture) {
  PatternNode p;
  p.kind = PatternNode::Kind::kOneOf;
  p.inputs = std::move(alternatives);
  p.capture = std::move(capture);
  return p;
}

Value* Match::value(const std::string& name) const {
  auto it = values.find(name);
  return it == values.end() ? nullptr : it->second;
}

Node* Match::node(const std::string& name) const {
  auto it = node_captures.find(name);
  return it == node_captures.end() ? nullptr : it->second;
}

double Match::scalar(const std::string& name) const {
  auto it = scalars.find(name);
  return it == scalars.end() ? 0.0 : it->second;
}

bool Match::contains(const Node* n) const { return std::find(nodes.begin(), nodes.end(), n) != nodes.end(); }

void for_each_match(const Pattern& pattern, Node* root, const std::function<bool(const Match&)>& visit) {
  using K = PatternNode::Kind;
  if (pattern.tree.kind != K::kOp && pattern.tree.kind != K::kOneOf) return;
  if (root->outputs().empty()) return;
  if (pattern.tree.kind == K::kOp && !op_type_matches(pattern.tree, *root)) return;
  Match m;
  m.root = root;
  match_value(pattern.tree, root->output(0), std::move(m), [&](Match& done) { return visit(done); });
}

std::vector<std::string> root_op_types(const PatternNode& tree) {
  if (tree.kind == PatternNode::Kind::kOp) return tree.ops;
  std::vector<std::string> out;
  if (tree.kind == PatternNode::Kind::kOneOf) {
    for (const PatternNode& alt : tree.inputs) {
      for (std::string& t : root_op_types(alt)) {
        if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(std::move(t));
      }
    }
  }
  return out;
}

std::optional<Match> match_at(const Pattern& pattern, Node* root) {
  std::optional<Match> out;
  for_each_match(pattern, root, [&](const Match& m) {
    out = m;
    return true;
  });
  return out;
}

}  // namespace opfuse::patterns
