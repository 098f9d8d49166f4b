// Small helpers the rewrite passes share: what counts as a constant, how to swap a value for
// another without renaming a graph output, and recording a refusal once per pipeline run.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pass.h"

namespace opfuse {

// The data of a value a pass may treat as fixed: a constant that is not also a graph input
// (an initializer that is an input is a default the caller may override).
const Tensor* constant_data(const Value* value);

// True when `node` may be removed or evaluated at compile time.
bool is_pure(const Node& node);

// Points every use of `from` at `to` when that keeps every graph output's name: false (and no
// change) when `from` is a graph output, since the output would then be named after `to`.
bool replace_uses_keeping_outputs(Graph& graph, Value* from, Value* to);

// Replaces `node` by constants holding `data` (one per output). Each output value keeps its name
// (and its place among the graph outputs): the node is removed and the value becomes a constant.
Status replace_with_constants(Graph& graph, Node* node, std::vector<Tensor> data);

// The dims of a value whose shape is fully known, else nullopt.
std::optional<std::vector<int64_t>> known_dims(const Value* value);

// Bytes of a value with a fully known shape (0 when unknown): what the fusion passes' traffic
// estimates count.
int64_t value_bytes(const Value* value);

// "Conv 'conv1'": how decisions name a node.
std::string node_label(const Node& node);

}  // namespace opfuse
