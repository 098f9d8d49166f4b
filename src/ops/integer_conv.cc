// ConvInteger and QLinearConv (opset 10): Conv's geometry (ops/conv_common.h: pads, strides,
// dilations, group, auto_pad, kernel_shape) over u8/i8 data less its zero points, summed exactly
// in integers. Padding contributes nothing: a padded element counts as x's zero point, which is
// what the ONNX node tests expect. ConvInteger returns the int32 sums; QLinearConv adds its int32
// bias and requantizes with x_scale * w_scale / y_scale (w_scale per tensor or per output
// channel). A direct loop nest, not a GEMM: these are the reference kernels (the fast ones are in
// kernels/cpu/onednn_conv_integer.cc).
//
// opfuse::QuantizedConv(X, W, [bias], [R], w_scale, [w_zero], [x_scale], [x_zero]) {Conv's
// attributes, epilogue, block} is a quantized convolution of float X as one anchor
// (passes/integer_products_in_fp32.cc writes it):
//   xq, s, z = DynamicQuantizeLinear(X)        (no x_scale: onnxruntime's dynamic quantization)
//   xq = QuantizeLinear(X, x_scale, x_zero)    (constant x_scale, x_zero: static quantization's
//                                               QDQ form; s, z = x_scale, x_zero)
//   Y = post(Cast<float>(ConvInteger(xq, W, z, w_zero)) * (s * w_scale) + bias)
// with X f32, W u8/i8 [M, C, kh, kw] (one group), w_scale and w_zero one value or one per output
// channel, x_scale and x_zero (u8 or i8) one value, bias f32 [M], and FusedConv's post-ops and
// residual (ops/fused.h). For the dynamic form the float steps are the replaced graph's, in its
// order, so it is that graph bit for bit (the QDQ graph multiplies dequantized operands instead:
// within float rounding of it). `block` 0: X, R and Y
// plain [N, C, H, W]; 8 or 16: blocked [N, ceil(C/b), H, W, b] (passes/layout.cc at O3; padded
// lanes of X are not read). kernels/cpu/quantized_conv_kernel.cc computes the sums exactly in
// 16-bit products.
#include <omp.h>

#include <algorithm>
#include <limits>
#include <vector>

#include <cstring>

#include "ops/conv_common.h"
#include "ops/fused.h"
#include "ops/layout_ops.h"
#include "ops/quantize_common.h"

namespace opfuse {
namespace {

// The output positions [lo, hi) along one axis whose input position o * stride - pad + offset
// falls inside [0, in): the rest read padding, which contributes nothing.
struct ValidRange {
  int64_t lo, hi;
};
ValidRange valid_outputs(int64_t out, int64_t in, int64_t stride, int64_t pad, int64_t offset) {
  const int64_t first = pad - offset;      // o * stride >= first
  const int64_t last = in - 1 + pad - offset;  // o * stride <= last
  if (last < 0) return {0, 0};
  const int64_t lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  return {std::min(lo, out), std::min(out, last / stride + 1)};
}

// Sums of (x - x_zero) * (w - w_zero[m]) for every output element, one output row at a time: for
// each input channel and tap, the tap's weight times a run of one input row is added to the
// output row's sums. Products fit in 17 bits; the sums (and `bias`, when given) are added in
// uint32, that is modulo 2^32: exactly what an int64 sum narrowed to int32 gives, and what a
// 32-bit accumulator does on overflow (which the spec allows).
template <typename TX, typename TW>
void int_conv(const ConvSetup& s, const Tensor& xt, int32_t x_zero, const Tensor& wt,
              const std::vector<int32_t>& w_zero, const int32_t* bias, int32_t* y) {
  const Geometry3& g = s.geo;
  const TX* x = xt.data<TX>();
  const TW* w = wt.data<TW>();
  const int64_t batch = xt.dim(0), channels = xt.dim(1), m = wt.dim(0);
  const int64_t cg = channels / s.group, mg = m / s.group;
  const int64_t in_size = g.in_size(), out_size = g.out_size(), ksize = g.kernel_size();
#pragma omp parallel for schedule(dynamic) if (batch * m * out_size * cg * ksize > (int64_t{1} << 16))
  for (int64_t job = 0; job < batch * m; ++job) {
    const int64_t n = job / m, oc = job % m, group = oc / mg;
    const TX* xg = x + (n * channels + group * cg) * in_size;
    const TW* wo = w + oc * cg * ksize;
    const int32_t wz = w_zero[oc];
    std::vector<uint32_t> acc(static_cast<size_t>(out_size), bias ? static_cast<uint32_t>(bias[oc]) : 0u);
    for (int64_t c = 0; c < cg; ++c) {
      const TX* xc = xg + c * in_size;
      for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
        const ValidRange d = valid_outputs(g.out[0], g.in[0], g.stride[0], g.pad_begin[0], kd * g.dilation[0]);
        for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
          const ValidRange h = valid_outputs(g.out[1], g.in[1], g.stride[1], g.pad_begin[1], kh * g.dilation[1]);
          for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
            const ValidRange r = valid_outputs(g.out[2], g.in[2], g.stride[2], g.pad_begin[2], kw * g.dilation[2]);
            const int32_t tap = int32_t{wo[(c * g.kernel[0] + kd) * g.kernel[1] * g.kernel[2] + kh * g.kernel[2] + kw]} - wz;
            for (int64_t od = d.lo; od < d.hi; ++od) {
              const int64_t id = od * g.stride[0] - g.pad_begin[0] + kd * g.dilation[0];
              for (int64_t oh = h.lo; oh < h.hi; ++oh) {
                const int64_t ih = oh * g.stride[1] - g.pad_begin[1] + kh * g.dilation[1];
                // x's index at output column 0 (negative when that column reads padding)
                const int64_t x0 = (id * g.in[1] + ih) * g.in[2] - g.pad_begin[2] + kw * g.dilation[2];
                uint32_t* row = acc.data() + (od * g.out[1] + oh) * g.out[2];
                for (int64_t ow = r.lo; ow < r.hi; ++ow) {
                  row[ow] += static_cast<uint32_t>((int32_t{xc[x0 + ow * g.stride[2]]} - x_zero) * tap);
                }
              }
            }
          }
        }
      }
    }
    int32_t* yo = y + job * out_size;
    for (int64_t i = 0; i < out_size; ++i) yo[i] = static_cast<int32_t>(acc[i]);
  }
}

// The validated inputs of either op: geometry, x's zero point, w's per-channel zero points.
struct IntConv {
  ConvSetup setup;
  int32_t x_zero = 0;
  std::vector<int32_t> w_zero;
};

Result<IntConv> setup_int_conv(const Node& node, const Tensor& x, const Tensor* x_zero,
                               size_t x_zero_index, const Tensor& w, const Tensor* w_zero,
                               size_t w_zero_index) {
  const std::string who = node.describe();
  IntConv c;
  OPFUSE_ASSIGN_OR_RETURN(c.setup, conv_setup(node, x, w, nullptr, false));
  if (x_zero && x_zero->dtype() != x.dtype()) {
    return Status::user_error(str_cat(who, ": zero point (input ", x_zero_index, ") is ",
                                      x_zero->type_string(), " but x is ", x.type_string()));
  }
  if (w_zero && w_zero->dtype() != w.dtype()) {
    return Status::user_error(str_cat(who, ": zero point (input ", w_zero_index, ") is ",
                                      w_zero->type_string(), " but w is ", w.type_string()));
  }
  if (x_zero && x_zero->numel() != 1) {
    return Status::user_error(str_cat(who, ": zero point (input ", x_zero_index, ") is ",
                                      x_zero->type_string(), "; x is quantized per tensor (one value)"));
  }
  c.x_zero = x_zero ? static_cast<int32_t>(x_zero->get_int(0)) : 0;
  OPFUSE_ASSIGN_OR_RETURN(c.w_zero, per_channel_ints(w_zero, w.dim(0),
                                                     str_cat(who, ": zero point (input ",
                                                             w_zero_index, ") of w")));
  return c;
}

Status dispatch_int_conv(const std::string& who, const IntConv& c, const Tensor& x,
                         const Tensor& w, const int32_t* bias, int32_t* y) {
  return visit_quantized(x.dtype(), who + ": x", [&](auto tx) {
    return visit_quantized(w.dtype(), who + ": w", [&](auto tw) {
      int_conv<decltype(tx), decltype(tw)>(c.setup, x, c.x_zero, w, c.w_zero, bias, y);
      return Status::ok();
    });
  });
}

Status check_input_dtype(const InferContext& ctx, size_t i, const char* name,
                         std::initializer_list<DType> allowed) {
  if (!ctx.has_input(i)) return Status::ok();
  const DType t = ctx.input_dtype(i);
  if (t == DType::kUndefined) return Status::ok();
  for (DType a : allowed) {
    if (a == t) return Status::ok();
  }
  std::string names;
  for (DType a : allowed) names += str_cat(names.empty() ? "" : " or ", dtype_name(a));
  return ctx.error(str_cat(name, " (input ", i, ") has dtype ", dtype_name(t), "; expected ", names));
}

// ---------------------------------------------------------------- ConvInteger

Status infer_conv_integer(InferContext& ctx) {
  OPFUSE_TRY(check_input_dtype(ctx, 0, "x", {DType::kU8, DType::kI8}));
  OPFUSE_TRY(check_input_dtype(ctx, 1, "w", {DType::kU8, DType::kI8}));
  if (ctx.input_dtype(0) != DType::kUndefined) {
    OPFUSE_TRY(check_input_dtype(ctx, 2, "x_zero_point", {ctx.input_dtype(0)}));
  }
  if (ctx.input_dtype(1) != DType::kUndefined) {
    OPFUSE_TRY(check_input_dtype(ctx, 3, "w_zero_point", {ctx.input_dtype(1)}));
  }
  // ConvInteger has no bias (its input 2 is x's zero point): an index no node has.
  constexpr size_t kNoBias = std::numeric_limits<size_t>::max();
  OPFUSE_ASSIGN_OR_RETURN(std::optional<Shape> out, conv_output_shape(ctx, 0, 1, kNoBias));
  ctx.set_output(0, DType::kI32, std::move(out));
  return Status::ok();
}

Status conv_integer_kernel(KernelContext& ctx) {
  const std::string who = ctx.node().describe();
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  OPFUSE_ASSIGN_OR_RETURN(IntConv c, setup_int_conv(ctx.node(), x, ctx.input_or_null(2), 2, w,
                                                    ctx.input_or_null(3), 3));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kI32, c.setup.out_dims));
  return dispatch_int_conv(who, c, x, w, nullptr, y->data<int32_t>());
}

// ---------------------------------------------------------------- QLinearConv

Status infer_qlinear_conv(InferContext& ctx) {
  OPFUSE_TRY(check_input_dtype(ctx, 0, "x", {DType::kU8, DType::kI8}));
  OPFUSE_TRY(check_input_dtype(ctx, 3, "w", {DType::kU8, DType::kI8}));
  OPFUSE_TRY(check_input_dtype(ctx, 7, "y_zero_point", {DType::kU8, DType::kI8}));
  OPFUSE_TRY(check_input_dtype(ctx, 1, "x_scale", {DType::kF32}));
  OPFUSE_TRY(check_input_dtype(ctx, 4, "w_scale", {DType::kF32}));
  OPFUSE_TRY(check_input_dtype(ctx, 6, "y_scale", {DType::kF32}));
  OPFUSE_TRY(check_input_dtype(ctx, 8, "B", {DType::kI32}));
  OPFUSE_ASSIGN_OR_RETURN(std::optional<Shape> out, conv_output_shape(ctx, 0, 3, 8));
  ctx.set_output(0, ctx.input_dtype(7), std::move(out));
  return Status::ok();
}

Status qlinear_conv_kernel(KernelContext& ctx) {
  const std::string who = ctx.node().describe();
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(3);
  OPFUSE_ASSIGN_OR_RETURN(IntConv c, setup_int_conv(ctx.node(), x, &ctx.input(2), 2, w,
                                                    &ctx.input(5), 5));
  const int64_t m = w.dim(0);
  OPFUSE_ASSIGN_OR_RETURN(std::vector<float> x_scale,
                          per_channel_floats(ctx.input(1), 1, who + ": x_scale (input 1)"));
  OPFUSE_ASSIGN_OR_RETURN(std::vector<float> w_scale,
                          per_channel_floats(ctx.input(4), m, who + ": w_scale (input 4)"));
  OPFUSE_ASSIGN_OR_RETURN(std::vector<float> y_scale,
                          per_channel_floats(ctx.input(6), 1, who + ": y_scale (input 6)"));
  const Tensor& y_zero = ctx.input(7);
  OPFUSE_ASSIGN_OR_RETURN(std::vector<int32_t> y_zp,
                          per_channel_ints(&y_zero, 1, who + ": y_zero_point (input 7)"));
  const Tensor* bias = ctx.input_or_null(8);
  if (bias && (bias->dtype() != DType::kI32 || bias->rank() != 1 || bias->dim(0) != m)) {
    return ctx.error(str_cat("bias B (input 8) is ", bias->type_string(), "; expected i32[", m, "]"));
  }
  OPFUSE_ASSIGN_OR_RETURN(Tensor acc, Tensor::zeros(DType::kI32, c.setup.out_dims, who + " accumulators"));
  OPFUSE_TRY(dispatch_int_conv(who, c, x, w, bias ? bias->data<int32_t>() : nullptr,
                               acc.data<int32_t>()));
  // The multiplier per output channel in f32, (x_scale * w_scale) / y_scale, as onnxruntime has it.
  std::vector<float> multiplier(static_cast<size_t>(m));
  for (int64_t oc = 0; oc < m; ++oc) multiplier[oc] = x_scale[0] * w_scale[oc] / y_scale[0];
  return visit_quantized(y_zero.dtype(), who + ": y_zero_point (input 7)", [&](auto q) -> Status {
    using Q = decltype(q);
    OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DTypeOf<Q>::value, c.setup.out_dims));
    const int64_t plane = c.setup.geo.out_size();
    const int32_t* in = acc.data<int32_t>();
    Q* out = y->data<Q>();
    for (int64_t i = 0; i < acc.numel(); ++i) {
      out[i] = quantize_value<Q>(static_cast<float>(in[i]) * multiplier[(i / plane) % m], y_zp[0]);
    }
    return Status::ok();
  });
}

// ---------------------------------------------------------------- opfuse::QuantizedConv

constexpr size_t kDqcBias = 2, kDqcResidual = 3, kDqcWScale = 4, kDqcWZero = 5, kDqcXScale = 6, kDqcXZero = 7;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

Status infer_dynamic_quantized_conv(InferContext& ctx) {
  const int64_t block = ctx.attrs().get_int("block");
  if (block != 0 && block != 8 && block != 16) return ctx.error(str_cat("block must be 0 (plain), 8 or 16, got ", block));
  if (ctx.attrs().get_int("group") != 1) return ctx.error("group must be 1");
  OPFUSE_TRY(check_input_dtype(ctx, 0, "X", {DType::kF32}));
  OPFUSE_TRY(check_input_dtype(ctx, 1, "W", {DType::kU8, DType::kI8}));
  OPFUSE_TRY(check_input_dtype(ctx, kDqcBias, "bias", {DType::kF32}));
  OPFUSE_TRY(check_input_dtype(ctx, kDqcWScale, "w_scale", {DType::kF32}));
  if (!ctx.has_input(kDqcWScale)) return ctx.error("w_scale (input 4) is required");
  if (ctx.input_dtype(1) != DType::kUndefined) {
    OPFUSE_TRY(check_input_dtype(ctx, kDqcWZero, "w_zero", {ctx.input_dtype(1)}));
  }
  const auto& w = ctx.input_shape(1);
  const auto wd = w ? static_dims(*w) : std::nullopt;
  if (!wd || wd->size() != 4) return ctx.error("W must be a [M, C, kh, kw] tensor of known dims");
  const int64_t m = (*wd)[0], c = (*wd)[1];
  for (size_t i : {kDqcWScale, kDqcWZero, kDqcXScale, kDqcXZero}) {
    const auto& shape = ctx.input_shape(i);
    const auto dims = ctx.has_input(i) && shape ? static_dims(*shape) : std::nullopt;
    const bool per_x = i >= kDqcXScale;
    if (dims && numel_of(*dims) != 1 && (per_x || numel_of(*dims) != m)) {
      static constexpr const char* kNames[] = {"w_scale", "w_zero", "x_scale", "x_zero"};
      return ctx.error(str_cat(kNames[i - kDqcWScale], " (input ", i, ") has ", numel_of(*dims), " values; expected one",
                               per_x ? "" : str_cat(" or M = ", m)));
    }
  }
  if (ctx.has_input(kDqcXZero) && !ctx.has_input(kDqcXScale)) return ctx.error("x_zero (input 7) without x_scale (input 6)");
  OPFUSE_TRY(check_input_dtype(ctx, kDqcXScale, "x_scale", {DType::kF32}));
  OPFUSE_TRY(check_input_dtype(ctx, kDqcXZero, "x_zero", {DType::kU8, DType::kI8}));
  std::vector<ValueType> inputs;
  std::vector<const Tensor*> constants;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    inputs.push_back(ctx.has_input(i) ? ValueType{ctx.input_dtype(i), ctx.input_shape(i)} : ValueType{});
    constants.push_back(ctx.input_constant(i));
  }
  const auto& x = ctx.input_shape(0);
  if (block != 0) {
    if (!x || x->size() != 5 || !((*x)[4] == Dim(block)) || !((*x)[1] == Dim(ceil_div(c, block)))) {
      return ctx.error(str_cat("X ", x ? shape_to_string(*x) : "of unknown shape", " does not hold ", c,
                               " channels in blocks of ", block));
    }
    inputs[0].shape = Shape{(*x)[0], Dim(c), (*x)[2], (*x)[3]};
  }
  InferContext plain(ctx.node(), std::move(inputs), std::move(constants));
  OPFUSE_ASSIGN_OR_RETURN(std::optional<Shape> out, conv_output_shape(plain, 0, 1, kDqcBias));
  if (block != 0 && out && out->size() == 4) {
    out = Shape{(*out)[0], Dim(ceil_div(m, block)), (*out)[2], (*out)[3], Dim(block)};
  }
  ctx.set_output(0, DType::kF32, std::move(out));
  return infer_epilogue(ctx);
}

Status dynamic_quantized_conv_kernel(KernelContext& ctx) {
  const std::string who = ctx.node().describe();
  const int64_t block = ctx.attrs().get_int("block");
  const Tensor& w = ctx.input(1);
  if (ctx.input(0).dtype() != DType::kF32 || w.rank() != 4) return ctx.error("needs f32 X and W [M, C, kh, kw]");
  const int64_t m = w.dim(0);
  Tensor x = ctx.input(0);
  if (block != 0) {
    if (x.rank() != 5 || x.dim(4) != block || x.dim(1) != ceil_div(w.dim(1), block)) {
      return ctx.error(str_cat("blocked X ", x.type_string(), " does not hold ", w.dim(1), " channels in blocks of ", block));
    }
    OPFUSE_ASSIGN_OR_RETURN(x, plain_copy(x, w.dim(1)));
  }
  QuantizedTensor xq;
  if (const Tensor* x_scale = ctx.input_or_null(kDqcXScale)) {
    OPFUSE_ASSIGN_OR_RETURN(xq, static_quantize(x, *x_scale, ctx.input_or_null(kDqcXZero), who));
  } else {
    OPFUSE_ASSIGN_OR_RETURN(xq, dynamic_quantize(x));
  }
  IntConv c;
  OPFUSE_ASSIGN_OR_RETURN(c.setup, conv_setup(ctx.node(), xq.q, w, nullptr, false));
  c.x_zero = xq.params.zero_point;
  OPFUSE_ASSIGN_OR_RETURN(c.w_zero, per_channel_ints(ctx.input_or_null(kDqcWZero), m, who + ": w_zero (input 5)"));
  OPFUSE_ASSIGN_OR_RETURN(std::vector<float> w_scale, per_channel_floats(ctx.input(kDqcWScale), m, who + ": w_scale (input 4)"));
  const Tensor* bias = ctx.input_or_null(kDqcBias);
  if (bias && (bias->dtype() != DType::kF32 || bias->numel() != m)) {
    return ctx.error(str_cat("bias (input 2) is ", bias->type_string(), "; expected f32[", m, "]"));
  }
  OPFUSE_ASSIGN_OR_RETURN(Tensor acc, Tensor::zeros(DType::kI32, c.setup.out_dims, who + " accumulators"));
  OPFUSE_TRY(dispatch_int_conv(who, c, xq.q, w, nullptr, acc.data<int32_t>()));
  OPFUSE_ASSIGN_OR_RETURN(Tensor y, Tensor::uninitialized(DType::kF32, c.setup.out_dims, who + " output"));
  const int64_t plane = c.setup.geo.out_size();
  const int32_t* sums = acc.data<int32_t>();
  float* out = y.data<float>();
  for (int64_t i = 0; i < acc.numel(); ++i) {
    const int64_t oc = (i / plane) % m;
    // The replaced graph's steps: Cast, Mul by Mul(x_scale, w_scale), Add the bias.
    const float scale = xq.params.scale * w_scale[oc];
    out[i] = static_cast<float>(sums[i]) * scale;
    if (bias) out[i] += bias->data<float>()[oc];
  }
  if (block != 0) {
    OPFUSE_ASSIGN_OR_RETURN(y, blocked_copy(y, block));
  }
  OPFUSE_ASSIGN_OR_RETURN(Tensor * result, ctx.allocate_output(0, DType::kF32, y.dims()));
  std::memcpy(result->raw_data(), y.raw_data(), y.nbytes());
  return apply_epilogue(ctx);
}

int64_t dynamic_quantized_conv_flops(const Node& node) {
  // 2 * multiply-adds over the logical output: N, OH, OW are dims 0, 2, 3 plain or blocked.
  const auto y = node.output(0) && node.output(0)->shape ? static_dims(*node.output(0)->shape) : std::nullopt;
  const auto w = node.input(1) && node.input(1)->shape ? static_dims(*node.input(1)->shape) : std::nullopt;
  if (!y || !w || y->size() < 4 || w->size() != 4) return -1;
  return 2 * (*y)[0] * (*y)[2] * (*y)[3] * (*w)[0] * (*w)[1] * (*w)[2] * (*w)[3];
}

int64_t integer_conv_flops(const Node& node, size_t w) {
  return conv_family_flops(node.output(0), node.input(w));
}

}  // namespace

std::vector<OpDef> integer_conv_ops() {
  std::vector<OpDef> ops;
  {
    OpDef d;
    d.name = "ConvInteger";
    d.min_inputs = 2;
    d.max_inputs = 4;
    d.attrs = conv_attr_specs();
    d.infer = infer_conv_integer;
    d.reference = conv_integer_kernel;
    d.flops = [](const Node& node) { return integer_conv_flops(node, 1); };
    d.summary = "int32 convolution of u8/i8 x and w less their zero points";
    ops.push_back(std::move(d));
  }
  {
    OpDef d;
    d.name = "QLinearConv";
    d.min_inputs = 8;
    d.max_inputs = 9;
    d.attrs = conv_attr_specs();
    d.infer = infer_qlinear_conv;
    d.reference = qlinear_conv_kernel;
    d.flops = [](const Node& node) { return integer_conv_flops(node, 3); };
    d.summary = "quantized convolution: u8/i8 in, int32 bias, requantized to u8/i8";
    ops.push_back(std::move(d));
  }
  {
    OpDef d;
    d.name = "QuantizedConv";
    d.domain = std::string(kFusedDomain);
    d.min_opset = d.max_opset = 1;
    d.min_inputs = 2;  // w_scale comes after optional inputs; shape inference requires it
    d.max_inputs = 8;
    d.attrs = conv_attr_specs();
    d.attrs.push_back({"epilogue", AttrType::kStrings, AttrValue(std::vector<std::string>{}), false});
    d.attrs.push_back({"block", AttrType::kInt, AttrValue(int64_t{0}), false});
    d.kind = FusionKind::kAnchor;
    d.infer = infer_dynamic_quantized_conv;
    d.reference = dynamic_quantized_conv_kernel;
    d.flops = dynamic_quantized_conv_flops;
    d.summary = "X quantized (dynamically, or by a constant x_scale and x_zero) convolved with W - w_zero in int32, times x_scale * w_scale, + bias, then an epilogue";
    ops.push_back(std::move(d));
  }
  return ops;
}

}  // namespace opfuse
