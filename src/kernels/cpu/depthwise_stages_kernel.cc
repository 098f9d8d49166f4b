// opfuse::BlockedConvDepthwise run as the two convs it stands for (ops/layout_ops.h:
// depthwise_stages), each on the kernel the table gives it, through a buffer for the expanded
// tensor allocated per run. The fallback behind onednn.blocked_conv's single jit kernel: taken
// when a pointwise post-op must run in our own pass between the convs (relu or clip in the plan
// for inputs that may hold NaN, kernels/kernel.h: exact_non_finite), or when oneDNN would not
// run the pair as one kernel.
#include "kernels/cpu/depthwise_stages_kernel.h"

#include "ops/fused.h"
#include "ops/layout_ops.h"

namespace opfuse {
namespace {

class DepthwiseStagesKernel final : public Kernel {
 public:
  DepthwiseStagesKernel(DepthwiseStages stages, std::unique_ptr<Kernel> pointwise,
                        std::unique_ptr<Kernel> depthwise, std::vector<int64_t> expanded_dims)
      : stages_(std::move(stages)),
        pointwise_(std::move(pointwise)),
        depthwise_(std::move(depthwise)),
        expanded_dims_(std::move(expanded_dims)),
        impl_(describe(*pointwise_) + ", then " + describe(*depthwise_)) {}

  Status run(std::span<const Tensor* const> inputs, std::span<Tensor* const> outputs) const override {
    OPFUSE_ASSIGN_OR_RETURN(Tensor expanded, Tensor::uninitialized(DType::kF32, expanded_dims_, "expanded tensor"));
    const Tensor* pointwise_in[] = {inputs[0], inputs[1], inputs.size() > 2 ? inputs[2] : nullptr};
    Tensor* pointwise_out[] = {&expanded};
    OPFUSE_TRY(pointwise_->run(pointwise_in, pointwise_out));
    const Tensor* depthwise_in[] = {&expanded, inputs[3], inputs.size() > 4 ? inputs[4] : nullptr};
    return depthwise_->run(depthwise_in, outputs);
  }
  std::string_view name() const override { return "stages"; }
  std::string implementation() const override { return impl_; }

 private:
  static std::string describe(const Kernel& k) {
    const std::string impl = k.implementation();
    return impl.empty() ? std::string(k.name()) : str_cat(k.name(), " [", impl, "]");
  }

  DepthwiseStages stages_;  // the nodes (and weights) the stage kernels were made for: they refer to them
  std::unique_ptr<Kernel> pointwise_, depthwise_;
  std::vector<int64_t> expanded_dims_;
  std::string impl_;
};

bool stages_supported(const KernelCompileContext& ctx) {
  return ctx.node.domain() == kFusedDomain && ctx.node.output(0) != nullptr;
}

Result<std::unique_ptr<Kernel>> stages_create(const KernelCompileContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(DepthwiseStages stages, depthwise_stages(ctx.node, ctx.constants));
  const Value* e = stages.pointwise->output(0);
  if (!e->shape) return Status::internal_error(str_cat(ctx.node.describe(), ": the expanded tensor's shape is unknown"));
  const auto expanded = static_dims(*e->shape);
  if (!expanded) return Status::internal_error(str_cat(ctx.node.describe(), ": the expanded tensor's shape is not static"));
  auto stage_context = [&](const Node& stage) {
    KernelCompileContext c{stage, {}, ctx.threads};
    for (const Value* in : stage.inputs()) c.constants.push_back(in != nullptr ? in->constant() : nullptr);
    c.exact_non_finite = ctx.exact_non_finite;
    c.subgraphs = ctx.subgraphs;
    return c;
  };
  const KernelCompileContext pointwise_context = stage_context(*stages.pointwise);
  const KernelCompileContext depthwise_context = stage_context(*stages.depthwise);
  OPFUSE_ASSIGN_OR_RETURN(auto pointwise, create_kernel(pointwise_context));
  OPFUSE_ASSIGN_OR_RETURN(auto depthwise, create_kernel(depthwise_context));
  if (pointwise_context.chose_by_finiteness || depthwise_context.chose_by_finiteness) ctx.chose_by_finiteness = true;
  return std::unique_ptr<Kernel>(std::make_unique<DepthwiseStagesKernel>(
      std::move(stages), std::move(pointwise), std::move(depthwise), *expanded));
}

}  // namespace

KernelImpl depthwise_stages_kernel() { return {"stages", "BlockedConvDepthwise", stages_supported, stages_create}; }

}  // namespace opfuse
