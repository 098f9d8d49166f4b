// MatMulInteger and QLinearMatMul (opset 10): numpy matmul of u8/i8 operands less their zero
// points (per tensor, per row of A, per column of B), accumulated exactly in integers.
// MatMulInteger returns the int32 sums; QLinearMatMul requantizes them with
// a_scale * b_scale / y_scale. Reference kernels: opaque to fusion (the fuser's anchors are float).
//
// opfuse::FusedMatMulInteger(A, B, [bias], [R], a_scale, [a_zero], b_scale, [b_zero]) {epilogue}
// is onnxruntime's dynamically quantized product as one anchor (passes/integer_products_in_fp32.cc
// writes it): Y = post(Cast<float>(MatMulInteger(A, B, a_zero, b_zero)) * (a_scale * b_scale) +
// bias), with a_scale one f32 value (DynamicQuantizeLinear's, known at run time), b_scale one
// value or one per column, bias [N] and the post-ops and residual of FusedMatMul (ops/fused.h).
// The float steps are those of the graph it replaces, in its order, so it is bit for bit that
// graph; kernels/cpu/integer_gemm_kernel.cc computes the sums exactly in 16-bit products.
#include <omp.h>

#include "ops/fused.h"
#include "ops/matmul_common.h"
#include "ops/quantize_common.h"

namespace opfuse {
namespace {

// A quantization parameter (zero point or scale) of an operand, one value per (batch, row) of A
// or (batch, column) of B of the operand's own batch dims: `target` is A's dims with K replaced
// by 1 ([..., M, 1]) or B's with K replaced by 1 ([..., 1, N]). The spec's forms: a scalar or
// one-element tensor (per tensor), a 1-d [M] for a 2-d A (per row) or [N] for a 2-d B (per
// column), or a tensor of the target's shape; anything broadcasting to the target is taken.
template <typename T>
Result<std::vector<T>> expand_param(const Tensor* t, std::vector<int64_t> target, bool rows,
                                    T fallback, const std::string& what) {
  std::vector<T> out(static_cast<size_t>(numel_of(target)), fallback);
  if (t == nullptr) return out;
  std::vector<int64_t> dims = t->dims();
  // A per-row vector [M] of a 2-d A means [M, 1] (right-aligned it would meet K).
  if (rows && dims.size() == 1 && target.size() >= 2 && t->numel() != 1) dims.push_back(1);
  bool ok = dims.size() <= target.size();
  for (size_t i = 0; ok && i < dims.size(); ++i) {
    const int64_t want = target[target.size() - dims.size() + i];
    ok = dims[i] == 1 || dims[i] == want;
  }
  if (!ok) {
    return Status::user_error(str_cat(what, " is ", t->type_string(), "; expected a scalar or a ",
                                      rows ? "per-row" : "per-column", " tensor of shape ",
                                      dims_to_string(target)));
  }
  const std::vector<int64_t> offsets = broadcast_offsets(dims, target, 1);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<T>(t->dtype() == DType::kF32 ? t->data<float>()[offsets[i]]
                                                       : t->get_double(offsets[i]));
  }
  return out;
}

// The operands' geometry and zero points, validated against the concrete tensors.
struct IntMatmul {
  int64_t m = 0, k = 0, n = 0;
  std::vector<int64_t> a_dims, b_dims;          // with numpy's added unit dims for 1-d operands
  std::vector<int64_t> out_dims;                // the node's output
  std::vector<int64_t> a_batch, b_batch;        // per output matrix: index of A's / B's matrix
  std::vector<int32_t> a_zero, b_zero;          // per (A matrix, row) / (B matrix, column)

  std::vector<int64_t> a_param_dims() const {  // [..., M, 1]
    std::vector<int64_t> d = a_dims;
    d.back() = 1;
    return d;
  }
  std::vector<int64_t> b_param_dims() const {  // [..., 1, N]
    std::vector<int64_t> d = b_dims;
    d[d.size() - 2] = 1;
    return d;
  }
};

Result<IntMatmul> setup_int_matmul(const std::string& who, const Tensor& a, const Tensor& b,
                                   const Tensor* a_zero, const Tensor* b_zero, size_t a_zero_index,
                                   size_t b_zero_index) {
  IntMatmul p;
  if (a.rank() == 0 || b.rank() == 0) {
    return Status::user_error(str_cat(who, ": operands must have rank >= 1, got A ",
                                      a.type_string(), " and B ", b.type_string()));
  }
  p.a_dims = a.dims();
  p.b_dims = b.dims();
  if (p.a_dims.size() == 1) p.a_dims.insert(p.a_dims.begin(), 1);
  if (p.b_dims.size() == 1) p.b_dims.push_back(1);
  p.m = p.a_dims[p.a_dims.size() - 2];
  p.k = p.a_dims.back();
  p.n = p.b_dims.back();
  if (p.b_dims[p.b_dims.size() - 2] != p.k) {
    return Status::user_error(str_cat(who, ": inner dims differ: A ", a.type_string(), " and B ",
                                      b.type_string()));
  }
  const std::vector<int64_t> ab(p.a_dims.begin(), p.a_dims.end() - 2);
  const std::vector<int64_t> bb(p.b_dims.begin(), p.b_dims.end() - 2);
  OPFUSE_ASSIGN_OR_RETURN(std::vector<int64_t> batch, broadcast_dims({ab, bb}, who + " batch dims"));
  p.out_dims = batch;
  if (a.rank() > 1) p.out_dims.push_back(p.m);
  if (b.rank() > 1) p.out_dims.push_back(p.n);
  p.a_batch = broadcast_offsets(ab, batch, 1);
  p.b_batch = broadcast_offsets(bb, batch, 1);
  if (a_zero && a_zero->dtype() != a.dtype()) {
    return Status::user_error(str_cat(who, ": zero point (input ", a_zero_index, ") is ",
                                      a_zero->type_string(), " but A is ", a.type_string()));
  }
  if (b_zero && b_zero->dtype() != b.dtype()) {
    return Status::user_error(str_cat(who, ": zero point (input ", b_zero_index, ") is ",
                                      b_zero->type_string(), " but B is ", b.type_string()));
  }
  OPFUSE_ASSIGN_OR_RETURN(p.a_zero, expand_param<int32_t>(a_zero, p.a_param_dims(), true, 0,
                                                          str_cat(who, ": zero point (input ",
                                                                  a_zero_index, ")")));
  OPFUSE_ASSIGN_OR_RETURN(p.b_zero, expand_param<int32_t>(b_zero, p.b_param_dims(), false, 0,
                                                          str_cat(who, ": zero point (input ",
                                                                  b_zero_index, ")")));
  return p;
}

// y[i] = sum_k (A - a_zero)(B - b_zero) for every output matrix. Each product fits in 17 bits;
// sums are kept in int64 and narrowed modulo 2^32, which is what the spec allows a 32-bit
// accumulator to do on overflow.
template <typename TA, typename TB>
void int_matmul(const IntMatmul& p, const TA* a, const TB* b, int32_t* y) {
  const int64_t count = static_cast<int64_t>(p.a_batch.size());
  const int64_t rows = count * p.m, m = p.m, k = p.k, n = p.n;
#pragma omp parallel if (rows * n * k > (int64_t{1} << 16))
  {
    std::vector<int64_t> acc(static_cast<size_t>(n));
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t i = row / m, r = row % m;
      const TA* ar = a + (p.a_batch[i] * m + r) * k;
      const TB* bm = b + p.b_batch[i] * k * n;
      const int32_t az = p.a_zero[p.a_batch[i] * m + r];
      const int32_t* bz = p.b_zero.data() + p.b_batch[i] * n;
      std::fill(acc.begin(), acc.end(), 0);
      for (int64_t kk = 0; kk < k; ++kk) {
        const int64_t av = int64_t{ar[kk]} - az;
        if (av == 0) continue;
        const TB* br = bm + kk * n;
        for (int64_t j = 0; j < n; ++j) acc[j] += av * (int64_t{br[j]} - bz[j]);
      }
      int32_t* yr = y + row * n;
      for (int64_t j = 0; j < n; ++j) yr[j] = static_cast<int32_t>(acc[j]);
    }
  }
}

// Runs int_matmul over the u8/i8 combinations of A and B.
Status dispatch_int_matmul(const std::string& who, const IntMatmul& p, const Tensor& a,
                           const Tensor& b, int32_t* y) {
  return visit_quantized(a.dtype(), who + ": A", [&](auto ta) {
    return visit_quantized(b.dtype(), who + ": B", [&](auto tb) {
      int_matmul(p, a.data<decltype(ta)>(), b.data<decltype(tb)>(), y);
      return Status::ok();
    });
  });
}

Status check_quantized_input(const InferContext& ctx, size_t i, const char* name) {
  // An optional input that is absent has no dtype to read (input_dtype would index past the end).
  if (!ctx.has_input(i)) return Status::ok();
  const DType t = ctx.input_dtype(i);
  if (t == DType::kUndefined || t == DType::kU8 || t == DType::kI8) return Status::ok();
  return ctx.error(str_cat(name, " (input ", i, ") has dtype ", dtype_name(t), "; expected u8 or i8"));
}

Status check_same_dtype(const InferContext& ctx, size_t value, size_t zero, const char* name) {
  if (!ctx.has_input(zero) || !ctx.has_input(value)) return Status::ok();
  const DType v = ctx.input_dtype(value), z = ctx.input_dtype(zero);
  if (v == DType::kUndefined || z == DType::kUndefined || v == z) return Status::ok();
  return ctx.error(str_cat("zero point (input ", zero, ") has dtype ", dtype_name(z), " but ",
                           name, " (input ", value, ") has ", dtype_name(v)));
}

Status check_f32_input(const InferContext& ctx, size_t i, const char* name) {
  if (!ctx.has_input(i)) return Status::ok();
  const DType t = ctx.input_dtype(i);
  if (t == DType::kUndefined || t == DType::kF32) return Status::ok();
  return ctx.error(str_cat(name, " (input ", i, ") has dtype ", dtype_name(t), "; expected f32"));
}

// ---------------------------------------------------------------- MatMulInteger

Status infer_matmul_integer(InferContext& ctx) {
  OPFUSE_TRY(check_quantized_input(ctx, 0, "A"));
  OPFUSE_TRY(check_quantized_input(ctx, 1, "B"));
  OPFUSE_TRY(check_same_dtype(ctx, 0, 2, "A"));
  OPFUSE_TRY(check_same_dtype(ctx, 1, 3, "B"));
  OPFUSE_ASSIGN_OR_RETURN(std::optional<Shape> out, matmul_output_shape(ctx, 0, 1));
  ctx.set_output(0, DType::kI32, std::move(out));
  return Status::ok();
}

Status matmul_integer_kernel(KernelContext& ctx) {
  const std::string who = ctx.node().describe();
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  OPFUSE_ASSIGN_OR_RETURN(IntMatmul p, setup_int_matmul(who, a, b, ctx.input_or_null(2),
                                                        ctx.input_or_null(3), 2, 3));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kI32, p.out_dims));
  return dispatch_int_matmul(who, p, a, b, y->data<int32_t>());
}

// ---------------------------------------------------------------- QLinearMatMul

Status infer_qlinear_matmul(InferContext& ctx) {
  OPFUSE_TRY(check_quantized_input(ctx, 0, "a"));
  OPFUSE_TRY(check_quantized_input(ctx, 3, "b"));
  OPFUSE_TRY(check_quantized_input(ctx, 7, "y_zero_point"));
  OPFUSE_TRY(check_same_dtype(ctx, 0, 2, "a"));
  OPFUSE_TRY(check_same_dtype(ctx, 3, 5, "b"));
  OPFUSE_TRY(check_f32_input(ctx, 1, "a_scale"));
  OPFUSE_TRY(check_f32_input(ctx, 4, "b_scale"));
  OPFUSE_TRY(check_f32_input(ctx, 6, "y_scale"));
  OPFUSE_ASSIGN_OR_RETURN(std::optional<Shape> out, matmul_output_shape(ctx, 0, 3));
  ctx.set_output(0, ctx.input_dtype(7), std::move(out));
  return Status::ok();
}

// y = saturate(round_half_even(acc * (a_scale * b_scale / y_scale)) + y_zero_point), the
// multiplier in f32 as onnxruntime computes it.
Status qlinear_matmul_kernel(KernelContext& ctx) {
  const std::string who = ctx.node().describe();
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  OPFUSE_ASSIGN_OR_RETURN(IntMatmul p, setup_int_matmul(who, a, b, &ctx.input(2), &ctx.input(5), 2, 5));
  OPFUSE_ASSIGN_OR_RETURN(std::vector<float> a_scale,
                          expand_param<float>(&ctx.input(1), p.a_param_dims(), true, 1.0f,
                                              who + ": a_scale (input 1)"));
  OPFUSE_ASSIGN_OR_RETURN(std::vector<float> b_scale,
                          expand_param<float>(&ctx.input(4), p.b_param_dims(), false, 1.0f,
                                              who + ": b_scale (input 4)"));
  if (ctx.input(1).dtype() != DType::kF32 || ctx.input(4).dtype() != DType::kF32) {
    return ctx.error(str_cat("a_scale ", ctx.input(1).type_string(), " and b_scale ",
                             ctx.input(4).type_string(), " must be f32"));
  }
  OPFUSE_ASSIGN_OR_RETURN(std::vector<float> y_scale,
                          per_channel_floats(ctx.input(6), 1, who + ": y_scale (input 6)"));
  const Tensor& y_zero = ctx.input(7);
  OPFUSE_ASSIGN_OR_RETURN(std::vector<int32_t> y_zp,
                          per_channel_ints(&y_zero, 1, who + ": y_zero_point (input 7)"));
  OPFUSE_ASSIGN_OR_RETURN(Tensor acc, Tensor::zeros(DType::kI32, p.out_dims, who + " accumulators"));
  OPFUSE_TRY(dispatch_int_matmul(who, p, a, b, acc.data<int32_t>()));
  return visit_quantized(y_zero.dtype(), who + ": y_zero_point (input 7)", [&](auto q) -> Status {
    using Q = decltype(q);
    OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DTypeOf<Q>::value, p.out_dims));
    const int32_t* in = acc.data<int32_t>();
    Q* out = y->data<Q>();
    const int64_t count = static_cast<int64_t>(p.a_batch.size());
    for (int64_t i = 0; i < count; ++i) {
      for (int64_t r = 0; r < p.m; ++r) {
        const float as = a_scale[p.a_batch[i] * p.m + r];
        const float* bs = b_scale.data() + p.b_batch[i] * p.n;
        const int64_t row = (i * p.m + r) * p.n;
        for (int64_t j = 0; j < p.n; ++j) {
          const float multiplier = as * bs[j] / y_scale[0];
          out[row + j] = quantize_value<Q>(static_cast<float>(in[row + j]) * multiplier, y_zp[0]);
        }
      }
    }
    return Status::ok();
  });
}

// ---------------------------------------------------------------- opfuse::FusedMatMulInteger

constexpr size_t kFmiBias = 2, kFmiAScale = 4, kFmiAZero = 5, kFmiBScale = 6, kFmiBZero = 7;

Status infer_fused_matmul_integer(InferContext& ctx) {
  OPFUSE_TRY(check_quantized_input(ctx, 0, "A"));
  OPFUSE_TRY(check_quantized_input(ctx, 1, "B"));
  OPFUSE_TRY(check_same_dtype(ctx, 0, kFmiAZero, "A"));
  OPFUSE_TRY(check_same_dtype(ctx, 1, kFmiBZero, "B"));
  if (!ctx.has_input(kFmiAScale) || !ctx.has_input(kFmiBScale)) return ctx.error("a_scale (input 4) and b_scale (input 6) are required");
  OPFUSE_TRY(check_f32_input(ctx, kFmiAScale, "a_scale"));
  OPFUSE_TRY(check_f32_input(ctx, kFmiBScale, "b_scale"));
  OPFUSE_TRY(check_f32_input(ctx, kFmiBias, "bias"));
  OPFUSE_ASSIGN_OR_RETURN(std::optional<Shape> out, matmul_output_shape(ctx, 0, 1));
  if (const auto& b = ctx.input_shape(kFmiBias); ctx.has_input(kFmiBias) && out && b &&
                                                  (b->size() != 1 || out->empty() || !((*b)[0] == out->back()))) {
    return ctx.error(str_cat("bias ", shape_to_string(*b), " must be [N] for the output ", shape_to_string(*out)));
  }
  const auto count = [&](size_t i) -> std::optional<int64_t> {
    const auto& shape = ctx.input_shape(i);
    const auto dims = shape ? static_dims(*shape) : std::nullopt;
    return dims ? std::optional<int64_t>(numel_of(*dims)) : std::nullopt;
  };
  if (const auto a = count(kFmiAScale); a && *a != 1) return ctx.error(str_cat("a_scale (input 4) has ", *a, " values; expected one"));
  if (const auto b = count(kFmiBScale); b && *b != 1 && out && !out->empty() && out->back().is_known() &&
                                         *b != out->back().value()) {
    return ctx.error(str_cat("b_scale (input 6) has ", *b, " values; expected one or N = ", out->back().value()));
  }
  ctx.set_output(0, DType::kF32, std::move(out));
  return infer_epilogue(ctx);
}

Status fused_matmul_integer_kernel(KernelContext& ctx) {
  const std::string who = ctx.node().describe();
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  OPFUSE_ASSIGN_OR_RETURN(IntMatmul p, setup_int_matmul(who, a, b, ctx.input_or_null(kFmiAZero),
                                                        ctx.input_or_null(kFmiBZero), kFmiAZero, kFmiBZero));
  const Tensor& a_scale = ctx.input(kFmiAScale);
  const Tensor& b_scale = ctx.input(kFmiBScale);
  const Tensor* bias = ctx.input_or_null(kFmiBias);
  if (a_scale.dtype() != DType::kF32 || a_scale.numel() != 1 || b_scale.dtype() != DType::kF32 ||
      (b_scale.numel() != 1 && (b_scale.rank() != 1 || b_scale.numel() != p.n)) ||
      (bias && (bias->dtype() != DType::kF32 || bias->rank() != 1 || bias->numel() != p.n))) {
    return ctx.error(str_cat("a_scale ", a_scale.type_string(), " must be one f32, b_scale ", b_scale.type_string(),
                             " one f32 or [N] and bias ", bias ? bias->type_string() : "(none)", " f32[N], N = ", p.n));
  }
  OPFUSE_ASSIGN_OR_RETURN(Tensor acc, Tensor::zeros(DType::kI32, p.out_dims, who + " accumulators"));
  OPFUSE_TRY(dispatch_int_matmul(who, p, a, b, acc.data<int32_t>()));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kF32, p.out_dims));
  const int32_t* sums = acc.data<int32_t>();
  float* out = y->data<float>();
  const float as = a_scale.data<float>()[0];
  const float* bs = b_scale.data<float>();
  for (int64_t i = 0; i < acc.numel(); ++i) {
    const int64_t j = p.n == 0 ? 0 : i % p.n;
    // The replaced graph's steps: Cast, Mul by Mul(a_scale, b_scale), Add the bias.
    const float scale = as * bs[b_scale.numel() == 1 ? 0 : j];
    out[i] = static_cast<float>(sums[i]) * scale;
    if (bias) out[i] += bias->data<float>()[j];
  }
  return apply_epilogue(ctx);
}

int64_t int_matmul_flops(const Node& node, size_t a) {
  const Value* av = node.input(a);
  const Value* yv = node.output(0);
  if (!av || !yv || !av->shape || !yv->shape) return -1;
  const auto ad = static_dims(*av->shape);
  const auto yd = static_dims(*yv->shape);
  if (!ad || !yd || ad->empty()) return -1;
  return 2 * numel_of(*yd) * ad->back();
}

}  // namespace

std::vector<OpDef> integer_matmul_ops() {
  std::vector<OpDef> ops;
  {
    OpDef d;
    d.name = "MatMulInteger";
    d.min_inputs = 2;
    d.max_inputs = 4;
    d.infer = infer_matmul_integer;
    d.reference = matmul_integer_kernel;
    d.flops = [](const Node& node) { return int_matmul_flops(node, 0); };
    d.summary = "int32 numpy matmul of u8/i8 A and B less their zero points";
    ops.push_back(std::move(d));
  }
  {
    OpDef d;
    d.name = "QLinearMatMul";
    d.min_inputs = d.max_inputs = 8;
    d.infer = infer_qlinear_matmul;
    d.reference = qlinear_matmul_kernel;
    d.flops = [](const Node& node) { return int_matmul_flops(node, 0); };
    d.summary = "quantized numpy matmul: u8/i8 in, int32 sums requantized to u8/i8";
    ops.push_back(std::move(d));
  }
  {
    OpDef d;
    d.name = "FusedMatMulInteger";
    d.domain = std::string(kFusedDomain);
    d.min_opset = d.max_opset = 1;
    d.min_inputs = 2;  // the scales come after optional inputs; shape inference requires them
    d.max_inputs = 8;
    d.attrs.push_back({"epilogue", AttrType::kStrings, AttrValue(std::vector<std::string>{}), false});
    d.kind = FusionKind::kAnchor;
    d.infer = infer_fused_matmul_integer;
    d.reference = fused_matmul_integer_kernel;
    d.flops = [](const Node& node) { return int_matmul_flops(node, 0); };
    d.summary = "dequantized MatMulInteger: (A - a_zero)(B - b_zero) * a_scale * b_scale + bias, then an epilogue";
    ops.push_back(std::move(d));
  }
  return ops;
}

}  // namespace opfuse
