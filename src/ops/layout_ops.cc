// Blocked activation layouts (O3, passes/layout.cc) as ordinary values. A blocked activation is
// a real tensor whose dims are its physical layout: nChw16c of a logical [N, C, H, W] is the
// row-major f32[N, ceil(C/16), H, W, 16], channel c living at [n, c / 16, h, w, c % 16]. Padded
// lanes (c >= C) are written as zeros by ToBlocked and BlockedConv's reference; other ops may
// leave any finite value there (no op reads them into a real channel: a conv's padded weights
// are zero). Because the layout is in the dims, memory planning sizes buffers by their padded
// bytes, and elementwise ops, Concat on axis 1, pools with a trailing unit window and Resize
// with a trailing unit scale compute the blocked result under their plain ONNX semantics. Only
// the ops here are new:
// `block` is 16 (nChw16c), 8 (nChw8c) or 0: channels-last, one block holding every channel, so
// logical [N, C, H, W] is f32[N, 1, H, W, C] (oneDNN's nhwc), with no padding.
//   opfuse::ToBlocked(X: [N,C,H,W]) {block}       -> [N, ceil(C/b), H, W, b], b = block or C
//   opfuse::FromBlocked(X: [N,Cb,H,W,b]) {channels} -> [N, channels, H, W]
//   opfuse::Reblock(X: [N,Cb,H,W,b]) {channels, block} -> [N, ceil(C/b'), H, W, b'], b' = block
//       or C: one reorder between two blocked layouts (nChw16c <-> nhwc), where the layout pass
//       lets neighbouring convs run different layouts.
//   opfuse::BlockedConv(X, W, [B], [R], [S]) {Conv's attributes, epilogue, block}
//       = ToBlocked(FusedConv(plain(X), W, B, plain(R), S)): X is plain [N,C,H,W] (a first conv
//       reading an image) or blocked; W and B stay in ONNX layout; R and Y are blocked; the
//       input scale S (ops/fused.h) is plain per-channel or blocked [1,Cb,1,1,b].
//   opfuse::BlockedConvDepthwise(X, W, [B], Wd, [Bd]) {BlockedConv's attributes,
//       depthwise_stride, depthwise_epilogue}
//       = BlockedConv(BlockedConv(X, W, B){...}, Wd, Bd){group = M, kernel 3x3, pads 1,
//       strides = depthwise_stride, epilogue = depthwise_epilogue}: a pointwise conv and the
//       depthwise conv reading its output (MobileNet's expansion), one kernel that never writes
//       the expanded tensor out (passes/depthwise_into_pointwise.cc). Its two stages are
//       depthwise_stages() below.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/conv_common.h"
#include "ops/fused.h"
#include "ops/layout_ops.h"
#include "ops/op_list.h"
#include "ops/registry.h"

namespace opfuse {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool valid_block(int64_t block) { return block == 0 || block == 8 || block == 16; }
// The lane count of a tensor of `c` channels under a `block` attribute (0: channels-last).
int64_t lanes(int64_t block, int64_t c) { return block == 0 ? c : block; }
// Whether blocked dims [.., Cb, .., b] hold `c` channels: Cb = ceil(c / b), with b 8 or 16, or
// a single block of exactly c lanes (channels-last).
bool holds(int64_t cb, int64_t b, int64_t c) {
  return c >= 1 && b >= 1 && cb == (c + b - 1) / b && (b == 8 || b == 16 || (cb == 1 && b == c));
}

// Copies plain [N,C,S] (S = H*W) into blocked [N,Cb,S,b]; lanes past C stay as they are (zero).
void block_f32(const float* src, float* dst, int64_t n, int64_t c, int64_t s, int64_t b) {
  const int64_t cb = ceil_div(c, b);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* from = src + (i * c + ch) * s;
      float* to = dst + ((i * cb + ch / b) * s) * b + ch % b;
      for (int64_t k = 0; k < s; ++k) to[k * b] = from[k];
    }
  }
}

void unblock_f32(const float* src, float* dst, int64_t n, int64_t c, int64_t s, int64_t b) {
  const int64_t cb = ceil_div(c, b);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* from = src + ((i * cb + ch / b) * s) * b + ch % b;
      float* to = dst + (i * c + ch) * s;
      for (int64_t k = 0; k < s; ++k) to[k] = from[k * b];
    }
  }
}

const OpDef& fused_conv_def() {
  static const OpDef* def = OpRegistry::global().find(std::string(kFusedDomain), "FusedConv");
  return *def;
}

// ---------------------------------------------------------------- ToBlocked / FromBlocked

Status infer_to_blocked(InferContext& ctx) {
  const int64_t b = ctx.attrs().get_int("block");
  if (!valid_block(b)) return ctx.error(str_cat("block must be 0, 8 or 16, got ", b));
  if (ctx.input_dtype(0) != DType::kF32) return ctx.error("blocked layouts are f32 only");
  const auto& x = ctx.input_shape(0);
  if (!x) {
    ctx.set_output(0, DType::kF32, std::nullopt);
    return Status::ok();
  }
  if (x->size() != 4) return ctx.error(str_cat("X must be [N,C,H,W], got ", shape_to_string(*x)));
  const Dim c = (*x)[1];
  if (b == 0 && !c.is_known()) return ctx.error("channels-last needs a known channel count");
  const int64_t l = c.is_known() ? lanes(b, c.value()) : b;
  Shape y = {(*x)[0], c.is_known() ? Dim(ceil_div(c.value(), l)) : Dim(), (*x)[2], (*x)[3], Dim(l)};
  ctx.set_output(0, DType::kF32, std::move(y));
  return Status::ok();
}

Status to_blocked_kernel(KernelContext& ctx) {
  const int64_t b = ctx.attrs().get_int("block");
  const Tensor& x = ctx.input(0);
  if (!valid_block(b) || x.dtype() != DType::kF32 || x.rank() != 4) {
    return ctx.error(str_cat("needs f32[N,C,H,W] and block 0, 8 or 16, got ", x.type_string()));
  }
  const int64_t n = x.dim(0), c = x.dim(1), s = x.dim(2) * x.dim(3), l = lanes(b, c);
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kF32,
                                                          {n, ceil_div(c, l), x.dim(2), x.dim(3), l}));
  block_f32(x.data<float>(), y->data<float>(), n, c, s, l);
  return Status::ok();
}

Status infer_from_blocked(InferContext& ctx) {
  const int64_t c = ctx.attrs().get_int("channels");
  if (ctx.input_dtype(0) != DType::kF32) return ctx.error("blocked layouts are f32 only");
  const auto& x = ctx.input_shape(0);
  if (!x) {
    ctx.set_output(0, DType::kF32, std::nullopt);
    return Status::ok();
  }
  if (x->size() != 5 || !(*x)[4].is_known() || !(*x)[1].is_known()) {
    return ctx.error(str_cat("X must be blocked [N,Cb,H,W,b], got ", shape_to_string(*x)));
  }
  if (!holds((*x)[1].value(), (*x)[4].value(), c)) {
    return ctx.error(str_cat("channels = ", c, " does not fit X ", shape_to_string(*x)));
  }
  ctx.set_output(0, DType::kF32, Shape{(*x)[0], Dim(c), (*x)[2], (*x)[3]});
  return Status::ok();
}

Status from_blocked_kernel(KernelContext& ctx) {
  const int64_t c = ctx.attrs().get_int("channels");
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::kF32 || x.rank() != 5 || !holds(x.dim(1), x.dim(4), c)) {
    return ctx.error(str_cat("needs blocked f32[N,Cb,H,W,b] for ", c, " channels, got ",
                             x.type_string()));
  }
  const int64_t n = x.dim(0), s = x.dim(2) * x.dim(3);
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kF32, {n, c, x.dim(2), x.dim(3)}));
  unblock_f32(x.data<float>(), y->data<float>(), n, c, s, x.dim(4));
  return Status::ok();
}

Status infer_reblock(InferContext& ctx) {
  OPFUSE_TRY(infer_from_blocked(ctx));
  const int64_t b = ctx.attrs().get_int("block");
  if (!valid_block(b)) return ctx.error(str_cat("block must be 0, 8 or 16, got ", b));
  const auto& x = ctx.input_shape(0);
  if (!x) return Status::ok();
  const int64_t c = ctx.attrs().get_int("channels"), l = lanes(b, c);
  ctx.set_output(0, DType::kF32, Shape{(*x)[0], Dim(ceil_div(c, l)), (*x)[2], (*x)[3], Dim(l)});
  return Status::ok();
}

Status reblock_kernel(KernelContext& ctx) {
  const int64_t c = ctx.attrs().get_int("channels"), b = ctx.attrs().get_int("block");
  const Tensor& x = ctx.input(0);
  if (!valid_block(b) || x.dtype() != DType::kF32 || x.rank() != 5 || !holds(x.dim(1), x.dim(4), c)) {
    return ctx.error(str_cat("needs blocked f32[N,Cb,H,W,b] for ", c, " channels and block 0, 8 or 16, got ",
                             x.type_string()));
  }
  const int64_t n = x.dim(0), s = x.dim(2) * x.dim(3), l = lanes(b, c);
  std::vector<float> plain(static_cast<size_t>(n * c * s));
  unblock_f32(x.data<float>(), plain.data(), n, c, s, x.dim(4));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kF32,
                                                          {n, ceil_div(c, l), x.dim(2), x.dim(3), l}));
  std::fill(y->data<float>(), y->data<float>() + y->numel(), 0.0f);
  block_f32(plain.data(), y->data<float>(), n, c, s, l);
  return Status::ok();
}

// ---------------------------------------------------------------- BlockedConv

// `y` (f32) as the kernel's output 0: the references compute into tensors of their own.
Status output_copy(KernelContext& ctx, const Tensor& y) {
  OPFUSE_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DType::kF32, y.dims()));
  std::memcpy(out->raw_data(), y.raw_data(), y.nbytes());
  return Status::ok();
}

// The plain shape of a blocked [N,Cb,H,W,b] holding `c` channels.
std::optional<Shape> plain_shape(const std::optional<Shape>& s, int64_t c) {
  if (!s || s->size() != 5) return std::nullopt;
  return Shape{(*s)[0], Dim(c), (*s)[2], (*s)[3]};
}

Status infer_blocked_conv(InferContext& ctx) {
  const int64_t b = ctx.attrs().get_int("block");
  if (!valid_block(b)) return ctx.error(str_cat("block must be 0, 8 or 16, got ", b));
  const auto& w = ctx.input_shape(1);
  if (!w || w->size() != 4 || !(*w)[0].is_known() || !(*w)[1].is_known()) {
    return ctx.error("W must be a [M, C/group, kh, kw] tensor of known channel counts");
  }
  const int64_t c = (*w)[1].value() * ctx.attrs().get_int("group");
  const int64_t m = (*w)[0].value();
  const auto& x = ctx.input_shape(0);
  std::vector<ValueType> inputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    inputs.push_back(ctx.has_input(i) ? ValueType{ctx.input_dtype(i), ctx.input_shape(i)} : ValueType{});
  }
  if (x && x->size() == 5) {
    if (!((*x)[4] == Dim(lanes(b, c))) || ((*x)[1].is_known() && (*x)[1].value() != ceil_div(c, lanes(b, c)))) {
      return ctx.error(str_cat("blocked X ", shape_to_string(*x), " does not hold ", c,
                               " channels in blocks of ", lanes(b, c)));
    }
    inputs[0].shape = plain_shape(x, c);
  }
  if (ctx.has_input(3)) inputs[3].shape = plain_shape(ctx.input_shape(3), m);
  if (ctx.has_input(kInputScale)) {
    OPFUSE_TRY(infer_input_scale(ctx, 4, c, lanes(b, c)));
    inputs[kInputScale].shape = Shape{Dim(1), Dim(c), Dim(1), Dim(1)};
  }
  std::vector<const Tensor*> constants;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) constants.push_back(ctx.input_constant(i));
  InferContext plain(ctx.node(), std::move(inputs), std::move(constants));
  OPFUSE_TRY(fused_conv_def().infer(plain));
  const ValueType& y = plain.outputs()[0];
  std::optional<Shape> out;
  if (y.shape && y.shape->size() == 4) {
    out = Shape{(*y.shape)[0], Dim(ceil_div(m, lanes(b, m))), (*y.shape)[2], (*y.shape)[3], Dim(lanes(b, m))};
  }
  if (ctx.has_input(3) && out && ctx.input_shape(3) && !(*ctx.input_shape(3) == *out)) {
    return ctx.error("the blocked residual's shape differs from the output's");
  }
  ctx.set_output(0, y.dtype, std::move(out));
  return Status::ok();
}

Status blocked_conv_kernel(KernelContext& ctx) {
  const int64_t b = ctx.attrs().get_int("block");
  const Tensor& w = ctx.input(1);
  if (!valid_block(b) || w.rank() != 4 || ctx.input(0).dtype() != DType::kF32) {
    return ctx.error("needs f32 X, W [M, C/group, kh, kw] and block 0, 8 or 16");
  }
  const int64_t c = w.dim(1) * ctx.attrs().get_int("group"), m = w.dim(0);
  auto plain_of = [&](const Tensor& t, int64_t channels) -> Result<Tensor> {
    if (t.rank() == 4) return t;
    const int64_t l = lanes(b, channels);
    if (t.rank() != 5 || t.dim(4) != l || t.dim(1) != ceil_div(channels, l)) {
      return ctx.error(str_cat("blocked input ", t.type_string(), " does not hold ", channels,
                               " channels in blocks of ", l));
    }
    return plain_copy(t, channels);
  };
  OPFUSE_ASSIGN_OR_RETURN(Tensor x, plain_of(ctx.input(0), c));
  std::vector<const Tensor*> inputs = {&x, &w, ctx.input_or_null(2), nullptr, ctx.input_or_null(kInputScale)};
  Tensor r;
  if (ctx.has_input(3)) {
    OPFUSE_ASSIGN_OR_RETURN(r, plain_of(ctx.input(3), m));
    inputs[3] = &r;
  }
  KernelContext plain(ctx.node(), std::move(inputs));
  OPFUSE_TRY(fused_conv_def().reference(plain));
  OPFUSE_ASSIGN_OR_RETURN(Tensor yb, blocked_copy(plain.outputs()[0], lanes(b, m)));
  return output_copy(ctx, yb);
}

int64_t blocked_conv_flops(const Node& node) {
  // 2 * multiply-adds over the logical (unpadded) output: W[0] output channels.
  const Value* y = node.output(0);
  const Value* w = node.input(1);
  if (!y || !w || !y->shape || !w->shape) return -1;
  const auto yd = static_dims(*y->shape);
  const auto wd = static_dims(*w->shape);
  if (!yd || !wd || yd->size() != 5 || wd->size() != 4) return -1;
  return 2 * (*yd)[0] * (*yd)[2] * (*yd)[3] * (*wd)[0] * (*wd)[1] * (*wd)[2] * (*wd)[3];
}

// ---------------------------------------------------------------- BlockedConvDepthwise

// The blocked dims of the pointwise stage's output: X's map with M channels.
std::optional<Shape> pointwise_stage_shape(const std::optional<Shape>& x, int64_t block, int64_t m) {
  if (!x || (x->size() != 5 && x->size() != 4)) return std::nullopt;
  return Shape{(*x)[0], Dim(ceil_div(m, lanes(block, m))), (*x)[2], (*x)[3], Dim(lanes(block, m))};
}

Status infer_blocked_conv_depthwise(InferContext& ctx) {
  const auto& w = ctx.input_shape(1);
  if (!w || w->size() != 4 || !(*w)[0].is_known()) return ctx.error("W must be a [M, C, 1, 1] tensor of known M");
  const int64_t m = (*w)[0].value();
  const auto& wd = ctx.input_shape(3);
  if (!wd || !(*wd == Shape{Dim(m), Dim(1), Dim(3), Dim(3)})) {
    return ctx.error(str_cat("Wd must be [", m, ", 1, 3, 3]: a 3x3 depthwise filter per pointwise output channel"));
  }
  OPFUSE_ASSIGN_OR_RETURN(auto stages, depthwise_stages(ctx.node(), {}));
  std::vector<ValueType> pointwise_in, depthwise_in;
  std::vector<const Tensor*> pointwise_const, depthwise_const;
  for (size_t i = 0; i < 3; ++i) {
    pointwise_in.push_back(ctx.has_input(i) ? ValueType{ctx.input_dtype(i), ctx.input_shape(i)} : ValueType{});
    pointwise_const.push_back(ctx.input_constant(i));
  }
  InferContext pointwise(*stages.pointwise, std::move(pointwise_in), std::move(pointwise_const));
  OPFUSE_TRY(infer_blocked_conv(pointwise));
  depthwise_in.push_back(pointwise.outputs()[0]);
  depthwise_const.push_back(nullptr);
  for (size_t i = 3; i < 5; ++i) {
    depthwise_in.push_back(ctx.has_input(i) ? ValueType{ctx.input_dtype(i), ctx.input_shape(i)} : ValueType{});
    depthwise_const.push_back(ctx.input_constant(i));
  }
  InferContext depthwise(*stages.depthwise, std::move(depthwise_in), std::move(depthwise_const));
  OPFUSE_TRY(infer_blocked_conv(depthwise));
  ctx.set_output(0, depthwise.outputs()[0].dtype, depthwise.outputs()[0].shape);
  return Status::ok();
}

// The two stages in turn, through BlockedConv's reference.
Status blocked_conv_depthwise_kernel(KernelContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(auto stages, depthwise_stages(ctx.node(), {}));
  KernelContext pointwise(*stages.pointwise, {&ctx.input(0), &ctx.input(1), ctx.input_or_null(2)});
  OPFUSE_TRY(blocked_conv_kernel(pointwise));
  KernelContext depthwise(*stages.depthwise, {&pointwise.outputs()[0], &ctx.input(3), ctx.input_or_null(4)});
  OPFUSE_TRY(blocked_conv_kernel(depthwise));
  return output_copy(ctx, depthwise.outputs()[0]);
}

int64_t blocked_conv_depthwise_flops(const Node& node) {
  const Value* x = node.input(0);
  const Value* w = node.input(1);
  const Value* y = node.output(0);
  if (!x || !w || !y || !x->shape || !w->shape || !y->shape) return -1;
  const auto xd = static_dims(*x->shape), wd = static_dims(*w->shape), yd = static_dims(*y->shape);
  if (!xd || !wd || !yd || xd->size() < 4 || wd->size() != 4 || yd->size() != 5) return -1;
  const int64_t m = (*wd)[0];
  return 2 * (*xd)[0] * (*xd)[2] * (*xd)[3] * m * (*wd)[1] + 2 * (*yd)[0] * (*yd)[2] * (*yd)[3] * m * 9;
}

OpDef layout_op(std::string name, InferFn infer, KernelFn kernel, std::string summary) {
  OpDef d;
  d.name = std::move(name);
  d.domain = std::string(kFusedDomain);
  d.min_opset = 1;
  d.max_opset = 1;
  d.infer = infer;
  d.reference = kernel;
  d.summary = std::move(summary);
  return d;
}

}  // namespace

Result<Tensor> blocked_copy(const Tensor& plain, int64_t lanes) {
  const Tensor& t = plain;
  const int64_t c = t.dim(1);
  OPFUSE_ASSIGN_OR_RETURN(Tensor y, Tensor::zeros(DType::kF32, {t.dim(0), ceil_div(c, lanes), t.dim(2), t.dim(3), lanes}));
  block_f32(t.data<float>(), y.data<float>(), t.dim(0), c, t.dim(2) * t.dim(3), lanes);
  return y;
}

Result<Tensor> plain_copy(const Tensor& blocked, int64_t channels) {
  const Tensor& t = blocked;
  OPFUSE_ASSIGN_OR_RETURN(Tensor y, Tensor::zeros(DType::kF32, {t.dim(0), channels, t.dim(2), t.dim(3)}));
  unblock_f32(t.data<float>(), y.data<float>(), t.dim(0), channels, t.dim(2) * t.dim(3), t.dim(4));
  return y;
}

Result<DepthwiseStages> depthwise_stages(const Node& node, std::span<const Tensor* const> constants) {
  const AttrReader attrs(node);
  const int64_t block = attrs.get_int("block"), stride = attrs.get_int("depthwise_stride");
  const Value* w = node.input(1);
  if (!w || !w->shape || w->shape->size() != 4 || !(*w->shape)[0].is_known()) {
    return Status::user_error(str_cat(node.describe(), ": W must be a [M, C, 1, 1] tensor of known M"));
  }
  const int64_t m = (*w->shape)[0].value();
  if (!valid_block(block) || m <= 0 || stride <= 0) {
    return Status::user_error(str_cat(node.describe(), ": needs block 0, 8 or 16, channels and a positive depthwise_stride"));
  }
  DepthwiseStages s;
  s.graph = std::make_unique<Graph>();
  Graph& g = *s.graph;
  // Each input as a value of the node's type, constant where its data is given.
  auto input = [&](size_t i, const std::string& name) -> Value* {
    const Value* v = node.has_input(i) ? node.input(i) : nullptr;
    if (v == nullptr) return nullptr;
    const Tensor* data = i < constants.size() ? constants[i] : nullptr;
    return data != nullptr ? g.add_constant(name, *data) : g.add_value(name, v->dtype, v->shape);
  };
  Attributes pointwise = node.attrs, depthwise = node.attrs;
  pointwise.erase("depthwise_stride");
  pointwise.erase("depthwise_epilogue");
  depthwise.erase("depthwise_stride");
  depthwise.erase("depthwise_epilogue");
  depthwise["epilogue"] = node.attrs.count("depthwise_epilogue") ? node.attrs.at("depthwise_epilogue")
                                                                   : AttrValue(std::vector<std::string>{});
  depthwise["group"] = AttrValue(m);
  depthwise["kernel_shape"] = AttrValue(std::vector<int64_t>{3, 3});
  depthwise["strides"] = AttrValue(std::vector<int64_t>{stride, stride});
  depthwise["pads"] = AttrValue(std::vector<int64_t>{1, 1, 1, 1});
  depthwise["dilations"] = AttrValue(std::vector<int64_t>{1, 1});
  depthwise.erase("auto_pad");
  OPFUSE_ASSIGN_OR_RETURN(Node * p, g.add_node("BlockedConv", {input(0, "x"), input(1, "w"), input(2, "b")},
                                               {"expanded"}, std::move(pointwise), node.name() + "_pointwise",
                                               std::string(kFusedDomain)));
  p->output(0)->dtype = DType::kF32;
  p->output(0)->shape = pointwise_stage_shape(node.input(0) ? node.input(0)->shape : std::nullopt, block, m);
  OPFUSE_ASSIGN_OR_RETURN(Node * d, g.add_node("BlockedConv", {p->output(0), input(3, "wd"), input(4, "bd")},
                                               {"y"}, std::move(depthwise), node.name() + "_depthwise",
                                               std::string(kFusedDomain)));
  d->output(0)->dtype = DType::kF32;
  d->output(0)->shape = node.output(0) ? node.output(0)->shape : std::nullopt;
  s.pointwise = p;
  s.depthwise = d;
  return s;
}

std::vector<OpDef> layout_ops() {
  std::vector<OpDef> ops;
  OpDef to = layout_op("ToBlocked", infer_to_blocked, to_blocked_kernel,
                       "plain [N,C,H,W] -> blocked [N,ceil(C/b),H,W,b] (nChw16c / nChw8c), zero-padded");
  to.attrs = {{"block", AttrType::kInt, AttrValue(int64_t{16}), false}};
  to.kind = FusionKind::kInjective;
  ops.push_back(std::move(to));
  OpDef from = layout_op("FromBlocked", infer_from_blocked, from_blocked_kernel,
                         "blocked [N,Cb,H,W,b] -> plain [N,channels,H,W]");
  from.attrs = {{"channels", AttrType::kInt, std::nullopt, true}};
  from.kind = FusionKind::kInjective;
  ops.push_back(std::move(from));
  OpDef re = layout_op("Reblock", infer_reblock, reblock_kernel,
                       "blocked [N,Cb,H,W,b] -> blocked [N,ceil(C/b'),H,W,b'] in another layout (b' = block)");
  re.attrs = {{"channels", AttrType::kInt, std::nullopt, true},
              {"block", AttrType::kInt, AttrValue(int64_t{16}), false}};
  re.kind = FusionKind::kInjective;
  ops.push_back(std::move(re));
  OpDef conv = layout_op("BlockedConv", infer_blocked_conv, blocked_conv_kernel,
                         "FusedConv on blocked activations: X plain or blocked, Y and R blocked");
  conv.min_inputs = 2;
  conv.max_inputs = 5;
  conv.attrs = conv_attr_specs();
  conv.attrs.push_back({"epilogue", AttrType::kStrings, AttrValue(std::vector<std::string>{}), false});
  conv.attrs.push_back({"block", AttrType::kInt, AttrValue(int64_t{16}), false});
  conv.kind = FusionKind::kAnchor;
  conv.flops = blocked_conv_flops;
  OpDef dw = layout_op("BlockedConvDepthwise", infer_blocked_conv_depthwise, blocked_conv_depthwise_kernel,
                       "a pointwise BlockedConv and the 3x3 depthwise BlockedConv reading its output, as one");
  dw.min_inputs = 4;
  dw.max_inputs = 5;
  dw.attrs = conv.attrs;
  dw.attrs.push_back({"depthwise_stride", AttrType::kInt, AttrValue(int64_t{1}), false});
  dw.attrs.push_back({"depthwise_epilogue", AttrType::kStrings, AttrValue(std::vector<std::string>{}), false});
  dw.kind = FusionKind::kAnchor;
  dw.flops = blocked_conv_depthwise_flops;
  ops.push_back(std::move(conv));
  ops.push_back(std::move(dw));
  return ops;
}

}  // namespace opfuse
