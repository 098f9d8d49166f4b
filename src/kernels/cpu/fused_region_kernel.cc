// The optimised kernel of opfuse::FusedRegion: the body is lowered into a FusedProgram once, at
// compile time (static shapes, constant inputs known), and compiled by the Highway backend.
// Bodies that do not lower (non-f32 values, shapes the program cannot express) are declined and
// run by the reference kernel, which evaluates the body op by op.
#include <string>

#include "kernels/cpu/hwy_executor.h"
#include "codegen/lower_region.h"
#include "kernels/kernel.h"
#include "ops/fused_region.h"

namespace opfuse {
namespace {

class FusedRegionKernel final : public Kernel {
 public:
  explicit FusedRegionKernel(std::unique_ptr<codegen::CompiledProgram> program) : program_(std::move(program)) {}
  Status run(std::span<const Tensor* const> inputs, std::span<Tensor* const> outputs) const override {
    return program_->run(inputs, outputs);
  }
  std::string_view name() const override { return "codegen.fused_region"; }
  std::string implementation() const override { return std::string(program_->mode()); }

 private:
  std::unique_ptr<codegen::CompiledProgram> program_;
};

Result<codegen::FusedProgram> lower(const KernelCompileContext& ctx, bool tables) {
  OPFUSE_ASSIGN_OR_RETURN(auto body, fused_region_body(ctx.node));
  std::vector<const Tensor*> constants = ctx.constants;
  constants.resize(body->inputs().size(), nullptr);
  codegen::LowerOptions options;
  options.build_tables = tables;
  return codegen::lower_region(*body, constants, options);
}

bool supports(const KernelCompileContext& ctx) { return lower(ctx, false).is_ok(); }

Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(codegen::FusedProgram program, lower(ctx, true));
  OPFUSE_ASSIGN_OR_RETURN(auto compiled, codegen::highway_backend().compile(std::move(program)));
  return std::unique_ptr<Kernel>(std::make_unique<FusedRegionKernel>(std::move(compiled)));
}

}  // namespace

KernelImpl fused_region_kernel_impl() {
  return KernelImpl{"codegen.fused_region", kFusedRegionOp, supports, create};
}

}  // namespace opfuse
