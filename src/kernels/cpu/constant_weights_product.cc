// Reading a product with constant weights from its node (kernels/cpu/constant_weights_product.h).
#include "kernels/cpu/constant_weights_product.h"

#include <algorithm>

#include "kernels/cpu/hwy_epilogue.h"
#include "kernels/cpu/hwy_kernels.h"
#include "ops/op_def.h"

namespace opfuse {
namespace {

using Dims = std::vector<int64_t>;

}  // namespace

std::vector<float> ConstantWeightsProduct::expanded_bias() const {
  std::vector<float> out;
  if (bias_constant == nullptr) return out;
  const float* c = bias_constant->data<float>();
  out.resize(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) out[j] = bias_scale * c[bias_numel == 1 ? 0 : j];
  return out;
}

bool ConstantWeightsProduct::has_residual() const {
  return std::any_of(epilogue.begin(), epilogue.end(), [](const PostOp& op) { return op.spec->reads_residual; });
}

bool read_fused_tail(const KernelCompileContext& ctx, const Dims& y, ConstantWeightsProduct& product) {
  const Node& node = ctx.node;
  // Inputs A, B, bias, residual: anything further (a later extension) is declined.
  if (node.domain() != kFusedDomain || node.inputs().size() > 4) return false;
  auto epilogue = hwy_cpu::anchor_vector_epilogue(node, y);
  if (!epilogue) return false;
  product.epilogue = std::move(*epilogue);
  return true;
}

std::optional<ConstantWeightsProduct> matmul_product(const KernelCompileContext& ctx, bool fused) {
  const Node& node = ctx.node;
  if (node.outputs().size() != 1 || node.inputs().size() < 2) return std::nullopt;
  const auto a = hwy_cpu::static_dims_of(node.input(0));
  const auto b = hwy_cpu::static_dims_of(node.input(1));
  const auto y = hwy_cpu::static_dims_of(node.output(0));
  if (!a || !b || !y || a->empty() || b->empty()) return std::nullopt;
  ConstantWeightsProduct p;
  p.k = a->back();
  const int64_t bk = b->size() == 1 ? (*b)[0] : (*b)[b->size() - 2];
  p.n = b->size() == 1 ? 1 : b->back();
  if (p.k <= 0 || p.n <= 0 || bk != p.k || numel_of(*a) % p.k != 0 || numel_of(*b) != p.k * p.n) {
    return std::nullopt;
  }
  p.m = numel_of(*a) / p.k;
  if (p.m <= 0 || numel_of(*y) != p.m * p.n) return std::nullopt;
  p.b = ctx.f32_constant(1, *b);
  if (p.b == nullptr) return std::nullopt;
  if (!fused) return node.inputs().size() == 2 ? std::optional(p) : std::nullopt;
  if (node.has_input(2)) {
    if (hwy_cpu::static_dims_of(node.input(2)) != Dims{p.n}) return std::nullopt;
    p.bias_input = 2;
    p.bias_numel = p.n;
    p.bias_constant = ctx.f32_constant(2, Dims{p.n});
  }
  if (!read_fused_tail(ctx, *y, p)) return std::nullopt;
  return p;
}

std::optional<ConstantWeightsProduct> gemm_product(const KernelCompileContext& ctx, bool fused) {
  const Node& node = ctx.node;
  if (node.outputs().size() != 1 || node.inputs().size() < 2) return std::nullopt;
  const auto a = hwy_cpu::static_dims_of(node.input(0));
  const auto b = hwy_cpu::static_dims_of(node.input(1));
  const auto y = hwy_cpu::static_dims_of(node.output(0));
  if (!a || !b || !y || a->size() != 2 || b->size() != 2) return std::nullopt;
  const AttrReader attrs(node);
  ConstantWeightsProduct p;
  p.trans_a = attrs.get_int("transA") != 0;
  p.trans_b = attrs.get_int("transB") != 0;
  p.alpha = attrs.get_float("alpha");
  p.m = p.trans_a ? (*a)[1] : (*a)[0];
  p.k = p.trans_a ? (*a)[0] : (*a)[1];
  p.n = p.trans_b ? (*b)[0] : (*b)[1];
  const int64_t bk = p.trans_b ? (*b)[1] : (*b)[0];
  if (p.m <= 0 || p.k <= 0 || p.n <= 0 || bk != p.k || *y != Dims{p.m, p.n} || p.alpha == 0.0f) {
    return std::nullopt;
  }
  p.b = ctx.f32_constant(1, *b);
  if (p.b == nullptr) return std::nullopt;
  // beta = 0 never reads C (as the reference: NaNs in C do not propagate).
  if (node.has_input(2) && attrs.get_float("beta") != 0.0f) {
    const auto c = hwy_cpu::static_dims_of(node.input(2));
    if (!c || c->size() > 2) return std::nullopt;
    const int64_t c_numel = numel_of(*c);
    // Broadcast along M only: a leading dim must be 1, the last 1 or N.
    if ((c->size() == 2 && (*c)[0] != 1) || (!c->empty() && c->back() != 1 && c->back() != p.n) ||
        (c_numel != 1 && c_numel != p.n)) {
      return std::nullopt;
    }
    p.bias_input = 2;
    p.bias_numel = c_numel;
    p.bias_scale = attrs.get_float("beta");
    p.bias_constant = ctx.f32_constant(2, *c);
  }
  if (!fused) return node.inputs().size() <= 3 ? std::optional(p) : std::nullopt;
  if (!read_fused_tail(ctx, *y, p)) return std::nullopt;
  return p;
}

std::optional<ConstantWeightsProduct> blocked_conv_product(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  if (node.op_type() != "BlockedConv" || node.outputs().size() != 1 || node.inputs().size() < 2) return std::nullopt;
  const auto x = hwy_cpu::static_dims_of(node.input(0));
  const auto w = hwy_cpu::static_dims_of(node.input(1));
  const auto y = hwy_cpu::static_dims_of(node.output(0));
  if (!x || !w || !y || x->size() != 5 || y->size() != 5 || w->size() != 4 || (*w)[2] != 1 || (*w)[3] != 1) {
    return std::nullopt;
  }
  const AttrReader attrs(node);
  if (attrs.get_int("group") != 1) return std::nullopt;
  if (attrs.has("pads")) {
    for (int64_t pad : attrs.get_ints("pads")) {
      if (pad != 0) return std::nullopt;
    }
  }
  // Same images and pixels in and out: with a 1x1 window and no padding, every stride is 1 or
  // meets a single pixel.
  if ((*x)[0] != (*y)[0] || (*x)[2] != (*y)[2] || (*x)[3] != (*y)[3]) return std::nullopt;
  const int64_t block = attrs.get_int("block"), oc = (*w)[0], ic = (*w)[1];
  const int64_t images = (*x)[0], pixels = (*x)[2] * (*x)[3];
  if (oc <= 0 || ic <= 0 || images <= 0 || pixels <= 0) return std::nullopt;
  ConstantWeightsProduct p;
  if (block == 0) {  // channels-last: [images, 1, H, W, C] is row-major [images * pixels, C]
    if ((*x)[1] != 1 || (*x)[4] != ic || (*y)[1] != 1 || (*y)[4] != oc) return std::nullopt;
    p.m = images * pixels;
  } else {
    if (ic % block != 0 || oc % block != 0 || (*x)[1] != ic / block || (*x)[4] != block || (*y)[1] != oc / block ||
        (*y)[4] != block) {
      return std::nullopt;
    }
    if (pixels == 1) {  // [images, C/b, 1, 1, b] is row-major [images, C] too
      p.m = images;
    } else {
      p.m = pixels;
      p.images = images;
      p.channel_block = block;
    }
  }
  p.k = ic;
  p.n = oc;
  p.trans_b = true;  // W [oc, ic, 1, 1] is B^T
  p.b = ctx.f32_constant(1, *w);
  if (p.b == nullptr) return std::nullopt;
  if (node.has_input(2)) {
    p.bias_input = 2;
    p.bias_numel = oc;
    p.bias_constant = ctx.f32_constant(2, Dims{oc});
    if (p.bias_constant == nullptr) return std::nullopt;
  }
  if (!read_fused_tail(ctx, *y, p)) return std::nullopt;
  return p;
}

}  // namespace opfuse
