#include "kernels/cpu/onednn_fused_matmul.h"

#include "kernels/cpu/onednn_matmul.h"
#include "kernels/cpu/onednn_post_ops.h"
#include "ops/fused.h"

namespace opfuse::onednn {
namespace {

struct FusedMatmulPlan {
  MatmulSpec spec;
  dnnl::post_ops post_ops;  // the epilogue's head (onednn_post_ops.h: nan_keeping_post_ops)
  int residual_index = -1;
  std::vector<PostOp> rest;  // run after the primitive by our own pass
};

std::optional<FusedMatmulPlan> describe(const KernelCompileContext& ctx, bool gemm) {
  const Node& node = ctx.node;
  if (node.domain() != kFusedDomain) return std::nullopt;
  auto spec = gemm ? gemm_spec(ctx) : matmul_spec(ctx);
  auto epilogue = read_epilogue(node);
  if (!spec || !epilogue.is_ok()) return std::nullopt;
  if (!gemm && node.has_input(2)) {
    // The bias [N] broadcast over every row of the output view.
    const auto b = static_f32_dims(node.input(2));
    const int64_t n = spec->y_dims.back();
    if (!b || *b != Dims{n}) return std::nullopt;
    Dims dims(spec->y_dims.size(), 1);
    dims.back() = n;
    const Tensor* data = ctx.constants.size() > 2 ? ctx.constants[2] : nullptr;
    spec->bias = MatmulOperand{2, *b, dims, row_major_strides(dims), data, 1.0f};
  }
  if (node.has_input(3) && static_f32_dims(node.input(3)) != spec->y_tensor_dims) return std::nullopt;
  FusedMatmulPlan plan{std::move(*spec), {}, -1, {}};
  const std::span<const PostOp> all(*epilogue);
  const auto head = all.first(placed_post_ops(all, ctx, nan_keeping_post_ops(all, ctx)));
  plan.rest.assign(all.begin() + static_cast<std::ptrdiff_t>(head.size()), all.end());
  if (!hwy_cpu::vector_epilogue(plan.rest)) return std::nullopt;
  bool residual_in_rest = false;
  for (const PostOp& op : plan.rest) residual_in_rest |= op.spec->reads_residual;
  auto ops = make_post_ops(head, plain_desc(plan.spec.y_dims), plan.residual_index);
  if (!ops || (plan.residual_index >= 0 || residual_in_rest) != node.has_input(3)) return std::nullopt;
  plan.post_ops = std::move(*ops);
  return plan;
}

PrimitivePlan build(const FusedMatmulPlan& p) {
  PrimitivePlan plan = build_matmul_plan(p.spec, p.post_ops);
  if (p.residual_index >= 0) {
    plan.bindings.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(p.residual_index) | DNNL_ARG_SRC_1, 3,
                             p.spec.y_tensor_dims, plain_desc(p.spec.y_dims), {}});
  }
  return plan;
}

template <bool kGemm>
bool supports(const KernelCompileContext& ctx) {
  const auto p = describe(ctx, kGemm);
  return p && try_dnnl<bool>([&] {
                build(*p);
                return true;
              }).has_value();
}

template <bool kGemm>
Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
  const auto p = describe(ctx, kGemm);
  const char* name = kGemm ? "onednn.fused_gemm" : "onednn.fused_matmul";
  if (!p) return Status::internal_error(str_cat(ctx.node.describe(), ": not an ", name, " node"));
  OPFUSE_ASSIGN_OR_RETURN(auto matmul, make_kernel(name, ctx.node, [&] { return build(*p); }));
  return with_host_epilogue(ctx.node, std::move(matmul), p->rest);
}

}  // namespace

KernelImpl onednn_fused_matmul_kernel() {
  return {"onednn.fused_matmul", "FusedMatMul", supports<false>, create<false>};
}

KernelImpl onednn_fused_gemm_kernel() {
  return {"onednn.fused_gemm", "FusedGemm", supports<true>, create<true>};
}

}  // namespace opfuse::onednn
