// Control flow: If, Loop and Scan, whose bodies are subgraphs (GraphAttr). Their semantics are
// written once, here, over a BodyRunner: eager mode runs bodies with the reference kernels
// (eager_body_runner), graph mode with plans compiled and fused like the main graph's
// (kernels/cpu/control_flow_kernel.cc). A body's trailing inputs are the outer-scope values it
// reads (Graph::captured_inputs), which the node passes as its own trailing inputs.
#pragma once

#include <span>
#include <vector>

#include "ir/graph.h"
#include "ops/op_def.h"

namespace opfuse {

class BodyRunner {
 public:
  virtual ~BodyRunner() = default;
  // Runs `body` (one of the node's subgraphs) on `inputs`, one per body input in order; returns
  // its outputs in order.
  virtual Result<std::vector<Tensor>> run(const Graph& body, std::vector<Tensor> inputs) const = 0;
};

// Runs bodies node by node with the reference kernels (run_eager).
const BodyRunner& eager_body_runner();

// Runs an If, Loop or Scan node on `inputs` (one per node input, nullptr for omitted ones);
// returns its outputs in order. Loops check the thread's RunLimits (core/run_limits.h) between
// iterations: its deadline, its cancel flag and its cap on iterations.
Result<std::vector<Tensor>> run_control_flow(const Node& node, std::span<const Tensor* const> inputs,
                                             const BodyRunner& runner);

// The node's subgraphs (If: then, else; Loop, Scan: the body).
std::vector<const Graph*> node_bodies(const Node& node);

// The types `body` of `node` gets for its inputs, given the node's input types: captures as the
// node's trailing inputs; a Loop's iteration number and condition as scalars; the values a Loop
// or Scan carries from one iteration to the next with no shape (they may change between
// iterations); a Scan's elements with the scanned axis removed.
std::vector<ValueType> body_input_types(const Node& node, const Graph& body, const std::vector<ValueType>& node_inputs);

}  // namespace opfuse
