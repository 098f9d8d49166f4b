// Ops that permute elements without changing them: DepthToSpace and SpaceToDepth (a reshape to
// 6-D, a transpose and a reshape back, done as one strided copy) and ReverseSequence (reverses
// the first sequence_lens[b] steps of every batch entry b). Dtype-agnostic: they move bytes.
#include <cstring>

#include "ops/tensor_helpers.h"

namespace opfuse {
namespace {

// ---- DepthToSpace / SpaceToDepth -------------------------------------------------------------

enum class BlockDirection { kDepthToSpace, kSpaceToDepth };

struct BlockMove {
  std::vector<int64_t> out_dims;      // the 4-D result
  std::vector<int64_t> copy_dims;     // the 6-D transposed view, in output order
  std::vector<int64_t> copy_strides;  // input element strides of copy_dims
};

// The 6-D view of `in` (NCHW) each op transposes, per the ONNX definitions.
Result<BlockMove> block_move(const Node& node, BlockDirection dir, const std::vector<int64_t>& in,
                             const AttrReader& attrs) {
  const int64_t b = attrs.get_int("blocksize");
  const std::string what = node.describe();
  if (in.size() != 4) {
    return Status::user_error(str_cat(what, ": input ", dims_to_string(in), " must be 4-D (N, C, H, W)"));
  }
  if (b <= 0) return Status::user_error(str_cat(what, ": blocksize ", b, " must be positive"));
  const int64_t n = in[0], c = in[1], h = in[2], w = in[3];
  BlockMove m;
  if (dir == BlockDirection::kDepthToSpace) {
    const auto bb = checked_mul(b, b);
    if (!bb || c % *bb != 0) {
      return Status::user_error(str_cat(what, ": channels ", c, " of input ", dims_to_string(in),
                                        " are not divisible by blocksize^2 (blocksize ", b, ")"));
    }
    const int64_t oc = c / *bb;
    const std::string mode = attrs.get_string("mode");
    // Input strides of the 6-D views [N, b, b, C', H, W] (DCR) and [N, C', b, b, H, W] (CRD).
    const int64_t s_w = 1, s_h = w, s_c = h * w;
    if (mode == "DCR") {
      // dims (n, b1, b2, c', h, w); transpose (0, 3, 4, 1, 5, 2) -> (n, c', h, b1, w, b2)
      m.copy_dims = {n, oc, h, b, w, b};
      m.copy_strides = {c * s_c, s_c, s_h, b * oc * s_c, s_w, oc * s_c};
    } else if (mode == "CRD") {
      // dims (n, c', b1, b2, h, w); transpose (0, 1, 4, 2, 5, 3) -> (n, c', h, b1, w, b2)
      m.copy_dims = {n, oc, h, b, w, b};
      m.copy_strides = {c * s_c, *bb * s_c, s_h, b * s_c, s_w, s_c};
    } else {
      return Status::user_error(str_cat(what, ": mode '", mode, "' is not 'DCR' or 'CRD'"));
    }
    m.out_dims = {n, oc, h * b, w * b};
  } else {
    if (h % b != 0 || w % b != 0) {
      return Status::user_error(str_cat(what, ": spatial dims of input ", dims_to_string(in),
                                        " are not divisible by blocksize ", b));
    }
    const int64_t oh = h / b, ow = w / b;
    // dims (n, c, h', b1, w', b2); transpose (0, 3, 5, 1, 2, 4) -> (n, b1, b2, c, h', w')
    m.copy_dims = {n, b, b, c, oh, ow};
    m.copy_strides = {c * h * w, w, 1, h * w, b * w, b};
    m.out_dims = {n, c * b * b, oh, ow};
  }
  return m;
}

template <BlockDirection kDir>
Status infer_block_move(InferContext& ctx) {
  const auto& in = ctx.input_shape(0);
  std::optional<Shape> out;
  if (in) {
    if (in->size() != 4) return ctx.error(str_cat("input ", shape_to_string(*in), " must be 4-D (N, C, H, W)"));
    if (auto dims = static_dims(*in)) {
      OPFUSE_ASSIGN_OR_RETURN(BlockMove m, block_move(ctx.node(), kDir, *dims, ctx.attrs()));
      out = make_shape(m.out_dims);
    } else {
      out = Shape{(*in)[0], Dim::unknown(), Dim::unknown(), Dim::unknown()};
    }
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
  return Status::ok();
}

template <BlockDirection kDir>
Status run_block_move(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  OPFUSE_ASSIGN_OR_RETURN(BlockMove m, block_move(ctx.node(), kDir, x.dims(), ctx.attrs()));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), m.out_dims));
  strided_copy(x.raw_data(), dtype_size(x.dtype()), m.copy_dims, m.copy_strides, 0, y->raw_data());
  return Status::ok();
}

// ---- ReverseSequence -----------------------------------------------------------------------

struct SequenceAxes {
  int64_t time = 0, batch = 1;
};

Result<SequenceAxes> sequence_axes(const Node& node, const AttrReader& attrs) {
  SequenceAxes a{attrs.get_int("time_axis"), attrs.get_int("batch_axis")};
  if ((a.time != 0 && a.time != 1) || (a.batch != 0 && a.batch != 1) || a.time == a.batch) {
    return Status::user_error(str_cat(node.describe(), ": time_axis ", a.time, " and batch_axis ", a.batch,
                                      " must be 0 and 1 in some order"));
  }
  return a;
}

Status infer_reverse_sequence(InferContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(SequenceAxes axes, sequence_axes(ctx.node(), ctx.attrs()));
  if (ctx.input_dtype(1) != DType::kUndefined && ctx.input_dtype(1) != DType::kI64) {
    return ctx.error(str_cat("sequence_lens has dtype ", dtype_name(ctx.input_dtype(1)), "; it must be int64"));
  }
  const auto& in = ctx.input_shape(0);
  const auto& lens = ctx.input_shape(1);
  if (in && in->size() < 2) return ctx.error(str_cat("input ", shape_to_string(*in), " must have rank >= 2"));
  if (in && lens) {
    const Dim& batch = (*in)[axes.batch];
    if (lens->size() != 1 || (batch.is_known() && (*lens)[0].is_known() && batch != (*lens)[0])) {
      return ctx.error(str_cat("sequence_lens ", shape_to_string(*lens), " must be 1-D with one length per batch entry (",
                               batch.to_string(), " on axis ", axes.batch, " of input ", shape_to_string(*in), ")"));
    }
  }
  ctx.set_output(0, ctx.input_dtype(0), in);
  return Status::ok();
}

Status run_reverse_sequence(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  OPFUSE_ASSIGN_OR_RETURN(SequenceAxes axes, sequence_axes(ctx.node(), ctx.attrs()));
  if (x.rank() < 2) return ctx.error(str_cat("input ", x.type_string(), " must have rank >= 2"));
  OPFUSE_ASSIGN_OR_RETURN(auto lens, int_input(ctx, 1, "sequence_lens"));
  const int64_t batch = x.dim(axes.batch), steps = x.dim(axes.time);
  if (static_cast<int64_t>(lens.size()) != batch || ctx.input(1).rank() != 1) {
    return ctx.error(str_cat("sequence_lens ", ctx.input(1).type_string(), " must hold one length per batch entry (",
                             batch, " in input ", x.type_string(), ")"));
  }
  for (size_t b = 0; b < lens.size(); ++b) {
    if (lens[b] < 0 || lens[b] > steps) {
      return ctx.error(str_cat("sequence_lens[", b, "] = ", lens[b], " is not in [0, ", steps, "]"));
    }
  }
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.dims()));
  // Axes 0 and 1 are time and batch in some order; everything after them is one contiguous row.
  const size_t row = static_cast<size_t>(x.rank() > 2 ? x.numel() / (x.dim(0) * x.dim(1)) : 1) * dtype_size(x.dtype());
  const int64_t time_stride = axes.time == 0 ? batch : 1, batch_stride = axes.batch == 0 ? steps : 1;
  const auto* src = static_cast<const uint8_t*>(x.raw_data());
  auto* dst = static_cast<uint8_t*>(y->raw_data());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < steps; ++t) {
      const int64_t from = t < lens[b] ? lens[b] - 1 - t : t;
      std::memcpy(dst + static_cast<size_t>(t * time_stride + b * batch_stride) * row,
                  src + static_cast<size_t>(from * time_stride + b * batch_stride) * row, row);
    }
  }
  return Status::ok();
}

}  // namespace

std::vector<OpDef> tensor_reorder_ops() {
  std::vector<OpDef> ops;
  OpDef d2s = op_record("DepthToSpace", 1, 1, FusionKind::kOpaque, infer_block_move<BlockDirection::kDepthToSpace>,
                        run_block_move<BlockDirection::kDepthToSpace>,
                        "moves blocksize x blocksize channel groups into spatial blocks (mode DCR or CRD)");
  d2s.attrs = {{"blocksize", AttrType::kInt, std::nullopt, true}, {"mode", AttrType::kString, AttrValue(std::string("DCR"))}};
  ops.push_back(std::move(d2s));
  OpDef s2d = op_record("SpaceToDepth", 1, 1, FusionKind::kOpaque, infer_block_move<BlockDirection::kSpaceToDepth>,
                        run_block_move<BlockDirection::kSpaceToDepth>,
                        "moves blocksize x blocksize spatial blocks into channels");
  s2d.attrs = {{"blocksize", AttrType::kInt, std::nullopt, true}};
  ops.push_back(std::move(s2d));
  OpDef rev = op_record("ReverseSequence", 2, 2, FusionKind::kOpaque, infer_reverse_sequence, run_reverse_sequence,
                        "reverses the first sequence_lens[b] time steps of each batch entry b");
  rev.attrs = {{"batch_axis", AttrType::kInt, AttrValue(int64_t{1})}, {"time_axis", AttrType::kInt, AttrValue(int64_t{0})}};
  ops.push_back(std::move(rev));
  return ops;
}

}  // namespace opfuse
