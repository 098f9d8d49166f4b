// How graph mode compiles the bodies of control-flow nodes (If, Loop, Scan): like the graph that
// owns them, with the same level, target and threads, so a body is optimised and fused inside.
// The runtime implements it (a Session per body); kernels only see this interface, so the
// kernel layer does not depend on the pipeline above it.
#pragma once

#include <memory>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "ops/op_def.h"

namespace opfuse {

class CompiledBody {
 public:
  virtual ~CompiledBody() = default;
  // One input per body input, in order; the outputs in order. Safe to call from several threads.
  virtual Result<std::vector<Tensor>> run(std::vector<Tensor> inputs) const = 0;
};

class SubgraphCompiler {
 public:
  virtual ~SubgraphCompiler() = default;
  // `input_types`, one per body input: a shape of nullopt means it may change from run to run
  // (a Loop's carried values), and plans are then compiled per shape met.
  virtual Result<std::unique_ptr<CompiledBody>> compile(const Graph& body,
                                                        const std::vector<ValueType>& input_types) const = 0;
};

}  // namespace opfuse
