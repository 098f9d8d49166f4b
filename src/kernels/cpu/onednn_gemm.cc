#include "kernels/cpu/onednn_gemm.h"

#include "kernels/cpu/onednn_matmul.h"
#include "ops/op_def.h"

namespace opfuse::onednn {

// Y = alpha * op(A) op(B) + beta * C as one matmul: transposes become strides, alpha is folded
// into a constant B and beta into a constant C, and C is the primitive's (broadcast) bias.
// A computed B or C that would need scaling is left to the reference kernel.
std::optional<MatmulSpec> gemm_spec(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  if (node.outputs().size() != 1) return std::nullopt;
  const auto a = static_f32_dims(node.input(0));
  const auto b = static_f32_dims(node.input(1));
  const auto y = static_f32_dims(node.output(0));
  if (!a || !b || !y || a->size() != 2 || b->size() != 2) return std::nullopt;
  const AttrReader attrs(node);
  const bool ta = attrs.get_int("transA") != 0, tb = attrs.get_int("transB") != 0;
  const float alpha = attrs.get_float("alpha"), beta = attrs.get_float("beta");
  const int64_t m = ta ? (*a)[1] : (*a)[0], k = ta ? (*a)[0] : (*a)[1];
  const int64_t n = tb ? (*b)[0] : (*b)[1];
  if ((tb ? (*b)[1] : (*b)[0]) != k || *y != Dims{m, n} || m == 0 || n == 0 || k == 0) {
    return std::nullopt;
  }
  auto constant = [&](size_t i) -> const Tensor* {
    const Tensor* t = i < ctx.constants.size() ? ctx.constants[i] : nullptr;
    return t && t->dtype() == DType::kF32 ? t : nullptr;
  };
  MatmulSpec spec;
  // A transposed operand is the same buffer read with swapped strides.
  spec.a = {0, *a, {m, k}, ta ? Dims{1, m} : Dims{k, 1}, nullptr, 1.0f};
  spec.b = {1, *b, {k, n}, tb ? Dims{1, k} : Dims{n, 1}, constant(1), alpha};
  if (alpha != 1.0f && spec.b.constant == nullptr) return std::nullopt;
  if (node.has_input(2)) {
    const auto c = static_f32_dims(node.input(2));
    if (!c || c->size() > 2) return std::nullopt;
    // Unidirectional broadcast to [M, N]: C's dims align right, each is 1 or the full size.
    Dims c2 = *c;
    while (c2.size() < 2) c2.insert(c2.begin(), 1);
    if ((c2[0] != 1 && c2[0] != m) || (c2[1] != 1 && c2[1] != n)) return std::nullopt;
    MatmulOperand bias{2, *c, c2, row_major_strides(c2), constant(2), beta};
    if (beta != 1.0f && bias.constant == nullptr) return std::nullopt;
    spec.bias = bias;
  }
  spec.y_tensor_dims = *y;
  spec.y_dims = *y;
  return spec;
}

namespace {

bool gemm_supports(const KernelCompileContext& ctx) {
  const auto spec = gemm_spec(ctx);
  if (!spec) return false;
  return try_dnnl<bool>([&] {
           build_matmul_plan(*spec, dnnl::post_ops());
           return true;
         }).has_value();
}

Result<std::unique_ptr<Kernel>> gemm_create(const KernelCompileContext& ctx) {
  const auto spec = gemm_spec(ctx);
  if (!spec) {
    return Status::internal_error(str_cat(ctx.node.describe(), ": not an onednn.gemm node"));
  }
  return make_kernel("onednn.gemm", ctx.node,
                     [&] { return build_matmul_plan(*spec, dnnl::post_ops()); });
}

}  // namespace

KernelImpl onednn_gemm_kernel() { return {"onednn.gemm", "Gemm", gemm_supports, gemm_create}; }

}  // namespace opfuse::onednn
