#include "kernels/kernel.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "kernels/kernel_registry.h"
#include "kernels/target_caps.h"
#include "ops/fused.h"
#include "ops/op_def.h"
#include "ops/reference.h"

namespace opfuse {
namespace {

// Runs the reference kernel with the outputs preallocated: kernels that allocate through
// KernelContext::allocate_output get the planned buffer directly; outputs a kernel produced as
// views of its inputs (Reshape) are copied into place.
class ReferenceKernel final : public Kernel {
 public:
  explicit ReferenceKernel(const Node& node) : node_(node) {}

  Status run(std::span<const Tensor* const> inputs, std::span<Tensor* const> outputs) const override {
    KernelContext ctx(node_, std::vector<const Tensor*>(inputs.begin(), inputs.end()),
                      std::vector<Tensor*>(outputs.begin(), outputs.end()));
    const OpDef& def = node_.def();
    OPFUSE_TRY(def.reference ? def.reference(ctx) : run_scalar_expr_kernel(ctx));
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i] == nullptr) continue;
      const Tensor& produced = ctx.outputs()[i];
      if (produced.raw_data() == outputs[i]->raw_data()) continue;
      if (produced.dtype() != outputs[i]->dtype() || produced.dims() != outputs[i]->dims()) {
        // Graph mode plans a graph output whose shape depends on input values (Tile's repeats,
        // Reshape's shape given as inputs) from the model's declaration; data contradicting it
        // is the user's, not a bug. Planned intermediates are inferred by opfuse: a bug.
        const Value* value = i < node_.outputs().size() ? node_.output(i) : nullptr;
        if (value != nullptr && value->is_graph_output()) {
          return Status::user_error(str_cat(node_.describe(), ": for these input values output '",
                                            value->name(), "' is ", produced.type_string(),
                                            ", but the model declares it ",
                                            outputs[i]->type_string()));
        }
        return Status::internal_error(str_cat(node_.describe(), ": output ", i, " is ",
                                              produced.type_string(), " but was planned as ",
                                              outputs[i]->type_string()));
      }
      std::memcpy(outputs[i]->raw_data(), produced.raw_data(), produced.nbytes());
    }
    return Status::ok();
  }
  std::string_view name() const override { return "reference"; }

 private:
  const Node& node_;
};

}  // namespace

std::unique_ptr<Kernel> make_reference_kernel(const Node& node) {
  return std::make_unique<ReferenceKernel>(node);
}

namespace {
bool in_builtin_domain(const Node& node) {
  return node.domain().empty() || node.domain() == kFusedDomain;
}
}  // namespace

Result<std::unique_ptr<Kernel>> create_kernel(const KernelCompileContext& ctx) {
  apply_target_caps();  // before the libraries pick their code paths
  if (const KernelImpl* impl = find_registered_kernel(ctx)) return impl->create(ctx);
  // The built-in table knows opfuse's own ops only: a custom op that shares a built-in's name
  // must not run the built-in's kernel.
  const bool builtin_domain = in_builtin_domain(ctx.node);
  if (!ctx.kernel.empty()) {
    if (ctx.kernel == "reference") return make_reference_kernel(ctx.node);
    for (const KernelImpl& impl : all_kernels()) {
      if (builtin_domain && impl.name == ctx.kernel && impl.op_type == ctx.node.op_type() && impl.supports(ctx)) {
        return impl.create(ctx);
      }
    }
    // A choice that no longer applies falls back to the table's order.
  }
  const Target target = active_target();
  for (const KernelImpl& impl : all_kernels()) {
    if (builtin_domain && impl.op_type == ctx.node.op_type() && (!impl.preferred || impl.preferred(target, ctx)) &&
        impl.supports(ctx)) {
      return impl.create(ctx);
    }
    // The vectorised elementwise kernel is generic over scalar expressions: custom elementwise
    // ops (registered after the table was built) get it too.
    if (!builtin_domain && impl.name == "hwy.elementwise" && impl.supports(ctx)) return impl.create(ctx);
  }
  return make_reference_kernel(ctx.node);
}

std::vector<std::string_view> kernel_alternatives(const KernelCompileContext& ctx) {
  std::vector<std::string_view> names;
  if (find_registered_kernel(ctx) != nullptr || !in_builtin_domain(ctx.node)) return names;
  for (const KernelImpl& impl : all_kernels()) {
    if (impl.op_type == ctx.node.op_type() && std::find(names.begin(), names.end(), impl.name) == names.end() &&
        impl.supports(ctx)) {
      names.push_back(impl.name);
    }
  }
  return names;
}

}  // namespace opfuse
