// cpu.channel_gather: opfuse::ChannelGather in graph mode. The same copy as its reference kernel
// (ops/channel_gather.h), written straight into the memory plan's buffer: a reference kernel's
// output is zero-filled first, which for a gather is a second pass over every byte it writes
// (3% of fr_pose's run under perf). Nodes whose shapes are not static keep the reference kernel.
#include "kernels/kernel.h"
#include "ops/channel_gather.h"
#include "ops/fused.h"
#include "ops/op_def.h"

namespace opfuse {
namespace {

class ChannelGatherKernel final : public Kernel {
 public:
  ChannelGatherKernel(std::vector<int64_t> sources, std::vector<int64_t> channels, bool blocked)
      : sources_(std::move(sources)), channels_(std::move(channels)), blocked_(blocked) {}
  Status run(std::span<const Tensor* const> inputs, std::span<Tensor* const> outputs) const override {
    gather_channels(inputs, *outputs[0], sources_, channels_, blocked_);
    return Status::ok();
  }
  std::string_view name() const override { return "cpu.channel_gather"; }

 private:
  std::vector<int64_t> sources_, channels_;
  bool blocked_;
};

bool supports(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  if (node.domain() != kFusedDomain || node.output(0) == nullptr || !node.output(0)->shape ||
      !static_dims(*node.output(0)->shape)) {
    return false;
  }
  const size_t size = dtype_size(node.output(0)->dtype);
  if (size != 1 && size != 2 && size != 4 && size != 8) return false;
  for (const Value* in : node.inputs()) {
    if (in == nullptr || !in->shape || !static_dims(*in->shape) || in->dtype != node.output(0)->dtype) return false;
  }
  return true;
}

Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
  const AttrReader attrs(ctx.node);
  return std::unique_ptr<Kernel>(
      new ChannelGatherKernel(attrs.get_ints("sources"), attrs.get_ints("channels"), attrs.has("block")));
}

}  // namespace

KernelImpl channel_gather_kernel() { return {"cpu.channel_gather", "ChannelGather", supports, create}; }

}  // namespace opfuse
