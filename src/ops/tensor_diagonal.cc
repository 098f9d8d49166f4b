// Ops defined by position relative to a matrix diagonal: Trilu (keep the upper or lower triangle
// of the last two dims) and EyeLike (ones on a diagonal). Both decide per element from its row i,
// column j and the diagonal offset k alone, so their kernels never read values they drop.
#include <algorithm>
#include <cstring>

#include "ops/tensor_helpers.h"

namespace opfuse {
namespace {

// ---- Trilu ---------------------------------------------------------------------------------

// Input 1 (k) is an optional int64 scalar (or 1-element tensor): the diagonal offset.
Status check_diagonal_offset_type(const InferContext& ctx) {
  if (!ctx.has_input(1)) return Status::ok();
  if (ctx.input_dtype(1) != DType::kUndefined && ctx.input_dtype(1) != DType::kI64) {
    return ctx.error(str_cat("k has dtype ", dtype_name(ctx.input_dtype(1)), "; it must be int64"));
  }
  const auto& k = ctx.input_shape(1);
  const bool scalar_like = k && (k->empty() || (k->size() == 1 && (!(*k)[0].is_known() || (*k)[0].value() == 1)));
  if (k && !scalar_like) {
    return ctx.error(str_cat("k ", shape_to_string(*k), " must be a scalar"));
  }
  return Status::ok();
}

Status infer_trilu(InferContext& ctx) {
  OPFUSE_TRY(check_diagonal_offset_type(ctx));
  const auto& in = ctx.input_shape(0);
  if (in && in->size() < 2) {
    return ctx.error(str_cat("input ", shape_to_string(*in), " must have rank >= 2 (a batch of matrices)"));
  }
  ctx.set_output(0, ctx.input_dtype(0), in);
  return Status::ok();
}

Status run_trilu(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return ctx.error(str_cat("input ", x.type_string(), " must have rank >= 2"));
  int64_t k = 0;
  if (ctx.has_input(1)) {
    OPFUSE_ASSIGN_OR_RETURN(auto values, int_input(ctx, 1, "k"));
    if (values.size() != 1) return ctx.error(str_cat("k ", ctx.input(1).type_string(), " must be a scalar"));
    k = values[0];
  }
  const bool upper = ctx.attrs().get_int("upper") != 0;
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.dims()));
  const int64_t rows = x.dim(-2), cols = x.dim(-1);
  const int64_t matrices = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  const size_t elem = dtype_size(x.dtype());
  const auto* src = static_cast<const uint8_t*>(x.raw_data());
  auto* dst = static_cast<uint8_t*>(y->raw_data());  // zero-filled: dropped elements stay 0
  for (int64_t m = 0; m < matrices; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      // Kept columns of row i: j >= i + k (upper) or j <= i + k (lower), clamped to [0, cols).
      // Computed in a way that cannot overflow for huge |k| (k is user data).
      int64_t first = 0, last = cols;  // [first, last)
      if (upper) {
        first = k > cols ? cols : (k < -rows ? 0 : std::clamp<int64_t>(i + k, 0, cols));
      } else {
        last = k > cols ? cols : (k < -rows ? 0 : std::clamp<int64_t>(i + k + 1, 0, cols));
      }
      if (first >= last) continue;
      const size_t offset = static_cast<size_t>((m * rows + i) * cols + first) * elem;
      std::memcpy(dst + offset, src + offset, static_cast<size_t>(last - first) * elem);
    }
  }
  return Status::ok();
}

// ---- EyeLike -------------------------------------------------------------------------------

Result<DType> eye_like_dtype(const Node& node, const AttrReader& attrs, DType input) {
  if (!attrs.has("dtype")) return input;
  const int64_t code = attrs.get_int("dtype");
  const std::optional<DType> dtype = dtype_from_onnx_code(code);
  if (!dtype) {
    return Status::user_error(str_cat(node.describe(), ": dtype ", code, " is not a supported ONNX data type"));
  }
  return *dtype;
}

Status infer_eye_like(InferContext& ctx) {
  const auto& in = ctx.input_shape(0);
  if (in && in->size() != 2) return ctx.error(str_cat("input ", shape_to_string(*in), " must be 2-D"));
  OPFUSE_ASSIGN_OR_RETURN(DType dtype, eye_like_dtype(ctx.node(), ctx.attrs(), ctx.input_dtype(0)));
  ctx.set_output(0, dtype, in);
  return Status::ok();
}

Status run_eye_like(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) return ctx.error(str_cat("input ", x.type_string(), " must be 2-D"));
  OPFUSE_ASSIGN_OR_RETURN(DType dtype, eye_like_dtype(ctx.node(), ctx.attrs(), x.dtype()));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, dtype, x.dims()));
  const int64_t k = ctx.attrs().get_int("k");
  const int64_t rows = x.dim(0), cols = x.dim(1);
  // Row i has its one at column i + k; rows whose column falls outside stay zero. A k beyond
  // the matrix (user data, possibly near INT64_MAX) gives all zeros without computing i + k.
  if (k < cols && k > -rows) {
    for (int64_t i = std::max<int64_t>(0, -k); i < rows && i + k < cols; ++i) y->set_double(i * cols + i + k, 1.0);
  }
  return Status::ok();
}

}  // namespace

std::vector<OpDef> tensor_diagonal_ops() {
  std::vector<OpDef> ops;
  OpDef trilu = op_record("Trilu", 1, 2, FusionKind::kOpaque, infer_trilu, run_trilu,
                          "keeps the upper (upper=1) or lower triangle of the last two dims from diagonal k");
  trilu.min_opset = 14;
  trilu.attrs = {{"upper", AttrType::kInt, AttrValue(int64_t{1})}};
  ops.push_back(std::move(trilu));
  OpDef eye = op_record("EyeLike", 1, 1, FusionKind::kOpaque, infer_eye_like, run_eye_like,
                        "a 2-D tensor of the input's shape with ones on diagonal k");
  eye.attrs = {{"dtype", AttrType::kInt, std::nullopt}, {"k", AttrType::kInt, AttrValue(int64_t{0})}};
  ops.push_back(std::move(eye));
  return ops;
}

}  // namespace opfuse
