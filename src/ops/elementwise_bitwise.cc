// BitShift: elementwise shifts of unsigned integers, with broadcasting. Not a scalar expression:
// the evaluator computes integers as int64, which cannot hold every uint64 bit pattern through
// a shift, so the op is opaque with its own kernel that shifts in the element type.
#include <type_traits>

#include "ops/elementwise_common.h"
#include "ops/tensor_helpers.h"

namespace opfuse::ew {
namespace {

Result<bool> shift_left(const Node& node, const AttrReader& attrs) {
  const std::string direction = attrs.get_string("direction");
  if (direction == "LEFT") return true;
  if (direction == "RIGHT") return false;
  return Status::user_error(str_cat(node.describe(), ": direction '", direction, "' is not 'LEFT' or 'RIGHT'"));
}

Status infer_bit_shift(InferContext& ctx) {
  OPFUSE_TRY(shift_left(ctx.node(), ctx.attrs()).status());
  for (size_t i = 0; i < 2; ++i) {
    const DType t = ctx.input_dtype(i);
    if (t != DType::kUndefined && !is_unsigned_int(t)) {
      return ctx.error(str_cat("input ", i, " has dtype ", dtype_name(t), "; BitShift takes unsigned integers"));
    }
  }
  return infer_broadcast_impl(ctx, TypeClass::kNumeric, OutType::kSame);
}

// Shifting by the type's width or more gives 0 (C++ leaves it undefined; numpy gives 0).
template <typename T>
T shift(T x, T amount, bool left) {
  if (amount >= static_cast<T>(sizeof(T) * 8)) return 0;
  return left ? static_cast<T>(x << amount) : static_cast<T>(x >> amount);
}

Status run_bit_shift(KernelContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(bool left, shift_left(ctx.node(), ctx.attrs()));
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  if (!is_unsigned_int(x.dtype()) || x.dtype() != y.dtype()) {
    return ctx.error(str_cat("inputs ", x.type_string(), " and ", y.type_string(),
                             " must have the same unsigned integer dtype"));
  }
  OPFUSE_ASSIGN_OR_RETURN(std::vector<int64_t> out_dims, broadcast_dims({x.dims(), y.dims()}, ctx.node().describe()));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * z, ctx.allocate_output(0, x.dtype(), out_dims));
  // Per input: its row-major strides aligned to the output's dims, 0 where it broadcasts.
  auto aligned_strides = [&](const Tensor& t) {
    std::vector<int64_t> s(out_dims.size(), 0);
    const std::vector<int64_t> own = row_strides(t.dims());
    const size_t pad = out_dims.size() - t.dims().size();
    for (size_t d = 0; d < t.dims().size(); ++d) s[pad + d] = t.dims()[d] == 1 ? 0 : own[d];
    return s;
  };
  const std::vector<int64_t> sx = aligned_strides(x), sy = aligned_strides(y);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T> && !std::is_same_v<T, bool>) {
      const T* a = x.data<T>();
      const T* b = y.data<T>();
      T* out = z->data<T>();
      std::vector<int64_t> pos(out_dims.size(), 0);
      int64_t ia = 0, ib = 0;
      for (int64_t flat = 0; flat < z->numel(); ++flat) {
        out[flat] = shift<T>(a[ia], b[ib], left);
        for (int64_t d = static_cast<int64_t>(out_dims.size()) - 1; d >= 0; --d) {
          ia += sx[d];
          ib += sy[d];
          if (++pos[d] < out_dims[d]) break;
          ia -= sx[d] * out_dims[d];
          ib -= sy[d] * out_dims[d];
          pos[d] = 0;
        }
      }
    }
  });
  return Status::ok();
}

}  // namespace

void append_bitwise_ops(std::vector<OpDef>& ops) {
  OpDef def;
  def.name = "BitShift";
  def.min_inputs = def.max_inputs = 2;
  def.kind = FusionKind::kOpaque;
  def.attrs = {AttrSpec{"direction", AttrType::kString, std::nullopt, true}};
  def.infer = infer_bit_shift;
  def.reference = run_bit_shift;
  def.summary = "x << y or x >> y (direction LEFT or RIGHT) on unsigned integers, broadcast";
  ops.push_back(std::move(def));
}

}  // namespace opfuse::ew
