// Graph mode's If, Loop and Scan: the semantics of ops/control_flow.cc over bodies compiled by
// the runtime (kernels/subgraph_compiler.h), each optimised and fused like the main graph.
#include <cstring>
#include <map>

#include "kernels/kernel.h"
#include "kernels/subgraph_compiler.h"
#include "ops/control_flow.h"

namespace opfuse {
namespace {

class ControlFlowKernel final : public Kernel, private BodyRunner {
 public:
  static Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
    auto kernel = std::unique_ptr<ControlFlowKernel>(new ControlFlowKernel(ctx.node));
    std::vector<ValueType> node_inputs;
    for (const Value* v : ctx.node.inputs()) node_inputs.push_back(v ? ValueType{v->dtype, v->shape} : ValueType{});
    for (const Graph* body : node_bodies(ctx.node)) {
      std::vector<ValueType> types = body_input_types(ctx.node, *body, node_inputs);
      // What a Loop or Scan carries from one iteration to the next may change shape.
      const size_t carried_from = ctx.node.op_type() == "Loop" ? 2 : 0;
      const size_t carried_to = ctx.node.op_type() == "Loop" ? body->inputs().size() - body->captured_inputs
                               : ctx.node.op_type() == "Scan"
                                   ? body->inputs().size() - body->captured_inputs -
                                         static_cast<size_t>(AttrReader(ctx.node).get_int("num_scan_inputs"))
                                   : 0;
      for (size_t i = carried_from; i < carried_to; ++i) types[i].shape = std::nullopt;
      OPFUSE_ASSIGN_OR_RETURN(kernel->bodies_[body], ctx.subgraphs->compile(*body, types));
    }
    return std::unique_ptr<Kernel>(std::move(kernel));
  }

  Status run(std::span<const Tensor* const> inputs, std::span<Tensor* const> outputs) const override {
    OPFUSE_ASSIGN_OR_RETURN(std::vector<Tensor> results, run_control_flow(node_, inputs, *this));
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (results[i].dims() != outputs[i]->dims() || results[i].dtype() != outputs[i]->dtype()) {
        return Status::user_error(str_cat(node_.describe(), ": output ", i, " is ", results[i].type_string(),
                                          " in this run but the plan was compiled for ", outputs[i]->type_string()));
      }
      if (results[i].nbytes() > 0) std::memcpy(outputs[i]->raw_data(), results[i].raw_data(), results[i].nbytes());
    }
    return Status::ok();
  }

  std::string_view name() const override { return "control_flow.compiled_bodies"; }

 private:
  explicit ControlFlowKernel(const Node& node) : node_(node) {}

  Result<std::vector<Tensor>> run(const Graph& body, std::vector<Tensor> inputs) const override {
    return bodies_.at(&body)->run(std::move(inputs));
  }

  const Node& node_;
  std::map<const Graph*, std::unique_ptr<CompiledBody>> bodies_;
};

bool supports(const KernelCompileContext& ctx) { return ctx.subgraphs != nullptr; }

}  // namespace

KernelImpl control_flow_kernel(std::string_view op_type) {
  return {"control_flow.compiled_bodies", op_type, supports, ControlFlowKernel::create};
}

}  // namespace opfuse
