// The pattern engine: fusions declared as data. A Pattern is a name, a match tree over op types
// (with captures and constants matched by value), a check, a rewrite and a benefit; one greedy
// driver (driver.cc) applies every registered pattern to a fixpoint. docs/adding-a-fusion.md is
// the how-to; one file per fusion family (patterns/*.cc) declares the patterns.
//
//   // x * sigmoid(x): the two uses of x must be the same value (the capture "x" binds once).
//   const PatternNode tree = op("Mul", {any("x"), op("Sigmoid", {any("x")})});
//
// Operands of ops whose OpDef says `traits.commutative` are tried in both orders by the matcher;
// patterns never mirror them by hand.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "passes/pass.h"

namespace opfuse::patterns {

// One node of a match tree.
struct PatternNode {
  enum class Kind {
    kOp,        // a value produced (as output 0) by a node of one of `ops`
    kAny,       // any value
    kConstant,  // a constant value (not a graph input)
    kScalar,    // a constant whose elements all equal `value` within `tolerance` (relative)
    kAnyScalar, // a constant whose elements are all equal (the value is captured)
    kOneOf,     // the first of `inputs` (alternatives) that matches; all are enumerated
  };
  Kind kind = Kind::kAny;
  // kOp: accepted op types; "opfuse::FusedConv" names another domain ("" is ai.onnx).
  std::vector<std::string> ops;
  // kOp: operand trees, matched positionally against the node's inputs; empty: the inputs are
  // not looked at. A non-empty list must have exactly the node's arity, except that trailing
  // omitted optional inputs of the node do not count.
  std::vector<PatternNode> inputs;
  // kOp: the listed operands match the node's first inputs and any later ones are not looked
  // at (Clip(x, [min], [max]) matched as op_head("Clip", {x})).
  bool more_inputs = false;
  // Binds the matched value (and for kOp the node) under this name. A name bound twice must
  // bind the same value: that is how a tree says "the same x" (x * sigmoid(x)).
  std::string capture;
  double value = 0;       // kScalar
  double tolerance = 0;   // kScalar: |v - value| <= tolerance * max(1, |value|)

  // Fluent capture: op("Conv").as("anchor").
  PatternNode as(std::string name) && {
    capture = std::move(name);
    return std::move(*this);
  }
};

// Builders. `types` is one op type or several separated by '|': "Conv|opfuse::FusedConv".
PatternNode op(std::string_view types, std::vector<PatternNode> inputs = {});
PatternNode op_head(std::string_view types, std::vector<PatternNode> first_inputs);
PatternNode any(std::string capture = "");
PatternNode constant(std::string capture = "");
PatternNode scalar(double value, double tolerance = 1e-4, std::string capture = "");
PatternNode any_scalar(std::string capture);
PatternNode one_of(std::vector<PatternNode> alternatives, std::string capture = "");

// One way the tree fits the graph.
struct Match {
  Node* root = nullptr;
  // Every op node of the match, each once, in the order they were matched (root first).
  std::vector<Node*> nodes;
  std::map<std::string, Value*> values;
  std::map<std::string, Node*> node_captures;
  std::map<std::string, double> scalars;  // kScalar / kAnyScalar captures

  Value* value(const std::string& name) const;
  Node* node(const std::string& name) const;
  double scalar(const std::string& name) const;
  bool contains(const Node* node) const;
};

// Why a match may not be rewritten ("shared intermediate"); empty when it may.
using Reason = std::string;

struct Pattern {
  std::string name;    // rule name: counters, decisions, FusionConfig switches ("conv_epilogue.relu")
  std::string family;  // the file declaring it ("epilogue")
  PatternNode tree;    // its root is a kOp node, or a one_of of kOp nodes (variants of one rule)
  // Structural conditions the tree cannot express (a constant's shape, an attribute): when false
  // the tree simply does not fit here; nothing is counted or recorded.
  std::function<bool(const Match&)> condition;
  // Extra conditions beyond the standard guards; returns the refusal reason or "".
  std::function<Reason(const Match&, const PassContext&)> check;
  // Replaces the match; returns the node now doing its work. It may remove only nodes of the
  // match (use replace_match), and must leave the graph valid.
  std::function<Result<Node*>(Graph&, const Match&)> rewrite;
  // Higher first when several patterns have the same root op type (then registration order).
  int benefit = 1;
  // The standard guard: every non-root node of the match is used only inside the match and is
  // not a graph output. Off for patterns that keep shared producers alive on purpose.
  bool interior_must_be_private = true;
  // Names the decision ("Relu 'r' into Conv 'c'"); default: the members' labels.
  std::function<std::string(const Match&)> describe;
};

// Every match of `pattern` rooted at `root` (commutative operands in both orders), in a fixed
// order; `visit` returns true to stop.
void for_each_match(const Pattern& pattern, Node* root, const std::function<bool(const Match&)>& visit);
// The op types a tree's root can have (with domain prefixes, "opfuse::FusedConv").
std::vector<std::string> root_op_types(const PatternNode& tree);
// The first match, if any.
std::optional<Match> match_at(const Pattern& pattern, Node* root);

// ---- standard guards (guards.cc); each returns the refusal reason or "" -----------------------

// `value` is used only by nodes of the match (and is no graph output).
Reason private_to_match(const Value* value, const Match& match);
// `value` has exactly one use.
Reason single_consumer(const Value* value);
Reason not_graph_output(const Value* value);
// The constant data of `value` (not a graph input), or null.
const Tensor* constant_operand(const Value* value);
// Same dtype and the same fully known dims.
Reason same_type(const Value* a, const Value* b);
Reason is_f32(const Value* value);
// Whether `value` is computed (transitively) from `node`'s outputs: absorbing it into `node`
// would create a cycle.
bool depends_on(const Value* value, const Node* node);
// The standard guards the driver applies before a pattern's check: rule enabled, every member
// fusible (FusionConfig), interior nodes private (when the pattern asks).
Reason standard_guards(const Pattern& pattern, const Match& match, const PassContext& context);

// ---- rewriting helpers ------------------------------------------------------------------------

// Replaces the match by one node `op_type` (domain) on `inputs`: the new node is named
// `node_name` and its output 0 takes the name, dtype and shape of the root's output 0, so graph
// outputs and downstream names are unchanged; every node of the match is removed. Every
// argument is taken by value: callers pass the root's own op type, attributes and name, which
// die with it.
Result<Node*> replace_match(Graph& graph, const Match& match, std::string op_type,
                            std::string domain, std::vector<Value*> inputs,
                            Attributes attrs, std::string node_name);

// ---- the registry and the driver -------------------------------------------------------------

// Every registered pattern (pattern_list.cc), in registration order.
const std::vector<Pattern>& all_patterns();
const Pattern* find_pattern(std::string_view name);

struct DriverOptions {
  // Rewrites per run before the driver stops (and records that it stopped): a safety net
  // against a pair of patterns undoing each other. 0: 4 x the node count + 64.
  int max_rewrites = 0;
};

// Applies `patterns` greedily to a fixpoint: sweeps the nodes in topological order, tries the
// patterns rooted at each node's op type (by benefit), applies the first match that passes the
// standard guards and its check; repeats while a sweep changed something. Counts matched /
// applied per rule and records every decision in `context`. Returns whether it changed the graph.
Result<bool> run_patterns(Graph& graph, const std::vector<const Pattern*>& patterns,
                          PassContext& context, std::string_view pass_name,
                          const DriverOptions& options = {});

}  // namespace opfuse::patterns
