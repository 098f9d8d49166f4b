#include "kernels/cpu/onednn_matmul.h"

#include <algorithm>

namespace opfuse::onednn {

namespace {

// The operand's bytes, scaled when it carries a scale (a copy owned by `storage`).
const void* scaled_data(const MatmulOperand& op, std::vector<float>& storage) {
  if (op.scale == 1.0f) return op.constant->raw_data();
  const auto values = op.constant->values<float>();
  storage.resize(values.size());
  std::transform(values.begin(), values.end(), storage.begin(),
                 [&](float v) { return v * op.scale; });
  return storage.data();
}

Binding bind(int arg, const MatmulOperand& op, const dnnl::memory::desc& view,
             const dnnl::memory::desc& packed) {
  if (op.constant == nullptr) return {arg, op.input, op.tensor_dims, view, {}};
  std::vector<float> storage;
  return {arg, -1, op.tensor_dims, packed, pack(view, scaled_data(op, storage), packed)};
}

}  // namespace

PrimitivePlan build_matmul_plan(const MatmulSpec& spec, const dnnl::post_ops& post_ops) {
  using dnnl::matmul;
  const dnnl::memory::desc a_md = strided_desc(spec.a.dims, spec.a.strides);
  const dnnl::memory::desc b_view = strided_desc(spec.b.dims, spec.b.strides);
  // A constant B lets oneDNN pick its packed layout; a computed one is read as it lies.
  const dnnl::memory::desc b_md = spec.b.constant ? any_desc(spec.b.dims) : b_view;
  const dnnl::memory::desc y_md = plain_desc(spec.y_dims);
  const dnnl::primitive_attr attr = make_attr(post_ops);
  dnnl::memory::desc bias_md;
  if (spec.bias) bias_md = strided_desc(spec.bias->dims, spec.bias->strides);
  const auto desc = spec.bias ? matmul::desc(a_md, b_md, bias_md, y_md)
                              : matmul::desc(a_md, b_md, y_md);
  const matmul::primitive_desc pd(desc, attr, cpu_engine());

  PrimitivePlan plan;
  set_primitive<matmul>(plan, pd);
  plan.dst_dims = spec.y_tensor_dims;
  plan.dst_md = y_md;
  plan.bindings.push_back(bind(DNNL_ARG_SRC, spec.a, a_md, a_md));
  plan.bindings.push_back(bind(DNNL_ARG_WEIGHTS, spec.b, b_view, pd.weights_desc()));
  if (spec.bias) plan.bindings.push_back(bind(DNNL_ARG_BIAS, *spec.bias, bias_md, bias_md));
  return plan;
}

// Resolves a MatMul node into a spec: 1-d operands become [1, K] / [K, 1]; an unbatched B lets
// all of A's batch dims fold into M; equal batch shapes collapse to one batch dim; anything else
// is given to oneDNN with its broadcast (size-1) batch dims.
std::optional<MatmulSpec> matmul_spec(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  if (node.outputs().size() != 1) return std::nullopt;
  const auto a = static_f32_dims(node.input(0));
  const auto b = static_f32_dims(node.input(1));
  const auto y = static_f32_dims(node.output(0));
  if (!a || !b || !y || a->empty() || b->empty()) return std::nullopt;
  for (const Dims* d : {&*a, &*b}) {
    if (std::find(d->begin(), d->end(), 0) != d->end()) return std::nullopt;
  }
  Dims a2 = *a, b2 = *b;
  if (a2.size() == 1) a2.insert(a2.begin(), 1);
  if (b2.size() == 1) b2.push_back(1);
  const int64_t m = a2[a2.size() - 2], k = a2.back(), n = b2.back();
  if (b2[b2.size() - 2] != k) return std::nullopt;
  const size_t rank = std::max(a2.size(), b2.size());
  if (rank > 12) return std::nullopt;  // oneDNN's limit on dims
  Dims a_batch(rank - a2.size(), 1), b_batch(rank - b2.size(), 1);
  a_batch.insert(a_batch.end(), a2.begin(), a2.end() - 2);
  b_batch.insert(b_batch.end(), b2.begin(), b2.end() - 2);
  Dims batch(rank - 2);
  for (size_t i = 0; i < rank - 2; ++i) {
    if (a_batch[i] != b_batch[i] && a_batch[i] != 1 && b_batch[i] != 1) return std::nullopt;
    batch[i] = std::max(a_batch[i], b_batch[i]);
  }
  // The node's output must be exactly numpy's result (a 1-d operand's dim dropped).
  Dims expect_y = batch;
  if (a->size() > 1) expect_y.push_back(m);
  if (b->size() > 1) expect_y.push_back(n);
  if (*y != expect_y) return std::nullopt;

  const int64_t a_count = numel_of(a_batch), b_count = numel_of(b_batch);
  Dims a_dims, b_dims, y_dims;
  if (b_count == 1) {
    a_dims = {a_count * m, k}, b_dims = {k, n}, y_dims = {a_count * m, n};
  } else if (a_batch == b_batch) {
    a_dims = {a_count, m, k}, b_dims = {b_count, k, n}, y_dims = {a_count, m, n};
  } else {
    a_dims = a_batch, b_dims = b_batch, y_dims = batch;
    a_dims.insert(a_dims.end(), {m, k});
    b_dims.insert(b_dims.end(), {k, n});
    y_dims.insert(y_dims.end(), {m, n});
  }
  auto constant = [&](size_t i) { return i < ctx.constants.size() ? ctx.constants[i] : nullptr; };
  MatmulSpec spec;
  spec.a = {0, *a, a_dims, row_major_strides(a_dims), nullptr, 1.0f};
  spec.b = {1, *b, b_dims, row_major_strides(b_dims), constant(1), 1.0f};
  if (spec.b.constant && spec.b.constant->dims() != *b) return std::nullopt;
  spec.y_tensor_dims = *y;
  spec.y_dims = y_dims;
  return spec;
}

namespace {

bool matmul_supports(const KernelCompileContext& ctx) {
  const auto spec = matmul_spec(ctx);
  if (!spec) return false;
  return try_dnnl<bool>([&] {
           build_matmul_plan(*spec, dnnl::post_ops());
           return true;
         }).has_value();
}

Result<std::unique_ptr<Kernel>> matmul_create(const KernelCompileContext& ctx) {
  const auto spec = matmul_spec(ctx);
  if (!spec) {
    return Status::internal_error(str_cat(ctx.node.describe(), ": not an onednn.matmul node"));
  }
  return make_kernel("onednn.matmul", ctx.node,
                     [&] { return build_matmul_plan(*spec, dnnl::post_ops()); });
}

}  // namespace

KernelImpl onednn_matmul_kernel() {
  return {"onednn.matmul", "MatMul", matmul_supports, matmul_create};
}

}  // namespace opfuse::onednn
