// MatMul (numpy semantics: 1-d operands, broadcast batch dims) and Gemm (2-d with transposes,
// alpha, beta and a C broadcast to [M, N]). Both run on the shared reference GEMM.
#include <omp.h>

#include "ops/gemm_reference.h"
#include "ops/matmul_common.h"
#include "ops/nn_common.h"

namespace opfuse {
namespace {

// ---------------------------------------------------------------- MatMul

Status infer_matmul(InferContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(DType t, check_float_inputs(ctx, {0, 1}));
  OPFUSE_ASSIGN_OR_RETURN(std::optional<Shape> out, matmul_output_shape(ctx, 0, 1));
  ctx.set_output(0, t, std::move(out));
  return Status::ok();
}

template <typename T>
Result<std::vector<Tensor>> matmul_compute(const Node& node, const std::vector<const Tensor*>& in) {
  const Tensor& a = *in[0];
  const Tensor& b = *in[1];
  const std::string who = node.describe();
  if (a.rank() == 0 || b.rank() == 0) {
    return Status::user_error(str_cat(who, ": operands must have rank >= 1, got ",
                                      a.type_string(), " and ", b.type_string()));
  }
  std::vector<int64_t> ad = a.dims(), bd = b.dims();
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  const int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  if (bd[bd.size() - 2] != k) {
    return Status::user_error(str_cat(who, ": inner dims differ: A ", a.type_string(), " and B ",
                                      b.type_string()));
  }
  const std::vector<int64_t> a_batch(ad.begin(), ad.end() - 2), b_batch(bd.begin(), bd.end() - 2);
  OPFUSE_ASSIGN_OR_RETURN(std::vector<int64_t> batch,
                          broadcast_dims({a_batch, b_batch}, who + " batch dims"));
  std::vector<int64_t> out_dims = batch;
  if (a.rank() > 1) out_dims.push_back(m);
  if (b.rank() > 1) out_dims.push_back(n);
  OPFUSE_ASSIGN_OR_RETURN(Tensor y, Tensor::zeros(a.dtype(), out_dims, who));
  const T* ap = a.data<T>();
  const T* bp = b.data<T>();
  T* yp = y.data<T>();
  if (b_batch.empty() || numel_of(b_batch) == 1) {
    // One B for every batch: the batches of A stack into one tall [batch*M, K] matrix.
    gemm<T>(false, false, numel_of(batch) * m, n, k, T(1), ap, k, bp, n, T(0), yp, n);
    return std::vector<Tensor>{std::move(y)};
  }
  const std::vector<int64_t> a_off = broadcast_offsets(a_batch, batch, m * k);
  const std::vector<int64_t> b_off = broadcast_offsets(b_batch, batch, k * n);
  const int64_t count = static_cast<int64_t>(a_off.size());
  // Many small products (attention heads): one per thread; few large ones: split each.
  const bool outer = count >= 2 * omp_get_max_threads();
#pragma omp parallel for schedule(dynamic) if (outer)
  for (int64_t i = 0; i < count; ++i) {
    gemm<T>(false, false, m, n, k, T(1), ap + a_off[i], k, bp + b_off[i], n, T(0),
            yp + i * m * n, n, !outer);
  }
  return std::vector<Tensor>{std::move(y)};
}

Status matmul_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  return run_float_kernel(
      ctx, [&](const auto& in) { return matmul_compute<float>(node, in); },
      [&](const auto& in) { return matmul_compute<double>(node, in); });
}

int64_t matmul_flops(const Node& node) {
  const auto a = static_value_dims(node.input(0));
  const auto y = static_value_dims(node.output(0));
  if (!a || !y || a->empty()) return -1;
  return 2 * numel_of(*y) * a->back();
}

// ---------------------------------------------------------------- Gemm

// Checks C against [M, N] under unidirectional broadcasting (C's dims align to the right and
// must be 1 or equal).
bool c_broadcasts(const std::vector<int64_t>& c, int64_t m, int64_t n) {
  if (c.size() > 2) return false;
  const int64_t target[2] = {m, n};
  for (size_t i = 0; i < c.size(); ++i) {
    const int64_t want = target[2 - c.size() + i];
    if (c[i] != 1 && c[i] >= 0 && want >= 0 && c[i] != want) return false;
  }
  return true;
}

Status infer_gemm(InferContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(DType t, check_float_inputs(ctx, {0, 1, 2}));
  const auto& as = ctx.input_shape(0);
  const auto& bs = ctx.input_shape(1);
  if (!as || !bs) {
    ctx.set_output(0, t, std::nullopt);
    return Status::ok();
  }
  if (as->size() != 2 || bs->size() != 2) {
    return ctx.error(str_cat("A and B must be 2-d, got ", shape_to_string(*as), " and ",
                             shape_to_string(*bs)));
  }
  const bool ta = ctx.attrs().get_int("transA") != 0, tb = ctx.attrs().get_int("transB") != 0;
  const Dim m = (*as)[ta ? 1 : 0], ka = (*as)[ta ? 0 : 1];
  const Dim kb = (*bs)[tb ? 1 : 0], n = (*bs)[tb ? 0 : 1];
  if (ka.is_known() && kb.is_known() && ka != kb) {
    return ctx.error(str_cat("inner dims differ: A ", shape_to_string(*as), (ta ? " (transposed)" : ""),
                             " and B ", shape_to_string(*bs), (tb ? " (transposed)" : "")));
  }
  if (ctx.has_input(2) && ctx.input_shape(2)) {
    const Shape& cs = *ctx.input_shape(2);
    if (!c_broadcasts(dims_or_unknown(cs), m.is_known() ? m.value() : -1,
                      n.is_known() ? n.value() : -1)) {
      return ctx.error(str_cat("C ", shape_to_string(cs), " does not broadcast to [",
                               m.to_string(), ",", n.to_string(), "]"));
    }
  }
  ctx.set_output(0, t, Shape{m, n});
  return Status::ok();
}

template <typename T>
Result<std::vector<Tensor>> gemm_compute(const Node& node, const std::vector<const Tensor*>& in) {
  const Tensor& a = *in[0];
  const Tensor& b = *in[1];
  const Tensor* c = in.size() > 2 ? in[2] : nullptr;
  const std::string who = node.describe();
  const AttrReader attrs(node);
  if (a.rank() != 2 || b.rank() != 2) {
    return Status::user_error(str_cat(who, ": A and B must be 2-d, got ", a.type_string(),
                                      " and ", b.type_string()));
  }
  const bool ta = attrs.get_int("transA") != 0, tb = attrs.get_int("transB") != 0;
  const int64_t m = a.dim(ta ? 1 : 0), k = a.dim(ta ? 0 : 1);
  const int64_t n = b.dim(tb ? 0 : 1);
  if (b.dim(tb ? 1 : 0) != k) {
    return Status::user_error(str_cat(who, ": inner dims differ: A ", a.type_string(),
                                      " and B ", b.type_string()));
  }
  if (c && !c_broadcasts(c->dims(), m, n)) {
    return Status::user_error(str_cat(who, ": C ", c->type_string(), " does not broadcast to [",
                                      m, ",", n, "]"));
  }
  OPFUSE_ASSIGN_OR_RETURN(Tensor y, Tensor::zeros(a.dtype(), {m, n}, who));
  T* yp = y.data<T>();
  if (c) {
    // Y = C broadcast to [M, N]; the GEMM then computes alpha*AB + beta*Y.
    const std::vector<int64_t>& cd = c->dims();
    const int64_t c_rows = cd.size() == 2 ? cd[0] : 1;
    const int64_t c_cols = cd.empty() ? 1 : cd.back();
    const T* cp = c->data<T>();
    for (int64_t i = 0; i < m; ++i) {
      const T* crow = cp + (c_rows == 1 ? 0 : i) * c_cols;
      for (int64_t j = 0; j < n; ++j) yp[i * n + j] = crow[c_cols == 1 ? 0 : j];
    }
  }
  gemm<T>(ta, tb, m, n, k, static_cast<T>(attrs.get_float("alpha")), a.data<T>(), a.dim(1),
          b.data<T>(), b.dim(1), c ? static_cast<T>(attrs.get_float("beta")) : T(0), yp, n);
  return std::vector<Tensor>{std::move(y)};
}

Status gemm_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  return run_float_kernel(
      ctx, [&](const auto& in) { return gemm_compute<float>(node, in); },
      [&](const auto& in) { return gemm_compute<double>(node, in); });
}

int64_t gemm_flops(const Node& node) {
  const auto a = static_value_dims(node.input(0));
  const auto y = static_value_dims(node.output(0));
  if (!a || !y || a->size() != 2) return -1;
  const int64_t k = AttrReader(node).get_int("transA") ? (*a)[0] : (*a)[1];
  return 2 * numel_of(*y) * k;
}

}  // namespace

Result<std::optional<Shape>> matmul_output_shape(const InferContext& ctx, size_t a_index,
                                                 size_t b_index) {
  const auto& as = ctx.input_shape(a_index);
  const auto& bs = ctx.input_shape(b_index);
  if (!as || !bs) return std::optional<Shape>();
  if (as->empty() || bs->empty()) {
    return ctx.error(str_cat("operands must have rank >= 1, got ", shape_to_string(*as), " and ",
                             shape_to_string(*bs)));
  }
  // numpy: a 1-d A is a row [1, K], a 1-d B a column [K, 1]; the added dim is dropped again.
  Shape a = as->size() == 1 ? Shape{Dim(1), (*as)[0]} : *as;
  Shape b = bs->size() == 1 ? Shape{(*bs)[0], Dim(1)} : *bs;
  const Dim& ka = a[a.size() - 1];
  const Dim& kb = b[b.size() - 2];
  if (ka.is_known() && kb.is_known() && ka != kb) {
    return ctx.error(str_cat("inner dims differ: A ", shape_to_string(*as), " and B ",
                             shape_to_string(*bs)));
  }
  OPFUSE_ASSIGN_OR_RETURN(
      Shape out, broadcast_shapes({Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2)},
                                  ctx.node().describe() + " batch dims"));
  if (as->size() > 1) out.push_back(a[a.size() - 2]);
  if (bs->size() > 1) out.push_back(b[b.size() - 1]);
  return std::optional<Shape>(std::move(out));
}

std::vector<int64_t> broadcast_offsets(const std::vector<int64_t>& dims,
                                       const std::vector<int64_t>& batch, int64_t matrix_size) {
  const size_t rank = batch.size(), offset = rank - dims.size();
  std::vector<int64_t> strides(rank, 0);
  int64_t stride = matrix_size;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[offset + i] = dims[i] == 1 ? 0 : stride;
    stride *= dims[i];
  }
  std::vector<int64_t> offsets;
  std::vector<int64_t> index(rank, 0);
  const int64_t count = numel_of(batch);
  for (int64_t n = 0; n < count; ++n) {
    int64_t off = 0;
    for (size_t i = 0; i < rank; ++i) off += index[i] * strides[i];
    offsets.push_back(off);
    for (size_t i = rank; i-- > 0;) {
      if (++index[i] < batch[i]) break;
      index[i] = 0;
    }
  }
  return offsets;
}

std::vector<OpDef> matmul_ops() {
  std::vector<OpDef> ops;
  {
    OpDef d;
    d.name = "MatMul";
    d.min_inputs = d.max_inputs = 2;
    d.kind = FusionKind::kAnchor;
    d.infer = infer_matmul;
    d.reference = matmul_kernel;
    d.flops = matmul_flops;
    d.summary = "numpy matmul: 1-d operands, broadcast batch dims";
    ops.push_back(std::move(d));
  }
  {
    OpDef d;
    d.name = "Gemm";
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.attrs = {
        {"alpha", AttrType::kFloat, AttrValue(1.0f)},
        {"beta", AttrType::kFloat, AttrValue(1.0f)},
        {"transA", AttrType::kInt, AttrValue(int64_t{0})},
        {"transB", AttrType::kInt, AttrValue(int64_t{0})},
    };
    d.kind = FusionKind::kAnchor;
    d.infer = infer_gemm;
    d.reference = gemm_kernel;
    d.flops = gemm_flops;
    d.summary = "Y = alpha * op(A) op(B) + beta * C, C broadcast to [M, N]";
    ops.push_back(std::move(d));
  }
  return ops;
}

}  // namespace opfuse
