// Ops that change only how elements are indexed, never their order: Reshape, Flatten, Squeeze,
// Unsqueeze, Identity, Dropout (inference), plus Shape and Size which read only the shape.
// Kernels return tensors sharing the input's storage.
#include <algorithm>
#include <set>

#include "ops/tensor_helpers.h"

namespace opfuse {
namespace {

// ---- Reshape -------------------------------------------------------------------------------

// The output shape of Reshape(input, spec). Works on symbolic shapes: 0 entries copy the input
// dim (symbol included), and a -1 is solved by cancelling symbols common to both sides.
// `ctx_error` turns a message into a user error naming the node.
template <typename ErrorFn>
Result<Shape> reshape_output(const Shape& in, const std::vector<int64_t>& spec, bool allowzero,
                             ErrorFn ctx_error) {
  const std::string shapes = str_cat("input ", shape_to_string(in), ", requested shape ",
                                     ints_to_string(spec));
  Shape out;
  int infer_at = -1;
  bool has_zero = false;
  for (size_t i = 0; i < spec.size(); ++i) {
    const int64_t v = spec[i];
    if (v == -1) {
      if (infer_at >= 0) return ctx_error(str_cat("more than one -1 in the shape (", shapes, ")"));
      infer_at = static_cast<int>(i);
      out.push_back(Dim::unknown());
    } else if (v == 0 && !allowzero) {
      if (i >= in.size()) {
        return ctx_error(str_cat("shape entry ", i, " is 0 (copy the input dim) but the input has rank ",
                                 in.size(), " (", shapes, ")"));
      }
      out.push_back(in[i]);
    } else if (v < 0) {
      return ctx_error(str_cat("invalid shape entry ", v, " (", shapes, ")"));
    } else {
      has_zero |= v == 0;
      out.push_back(Dim(v));
    }
  }
  if (allowzero && has_zero && infer_at >= 0) {
    return ctx_error(str_cat("allowzero=1 forbids both 0 and -1 in the shape (", shapes, ")"));
  }

  // Split each side into a known product and a multiset of symbols; unknown dims stop us.
  struct Parts {
    int64_t known = 1;
    std::multiset<std::string> symbols;
    bool unknown = false;
    bool overflow = false;
  };
  auto split = [](const Shape& s, int skip) {
    Parts p;
    for (size_t i = 0; i < s.size(); ++i) {
      if (static_cast<int>(i) == skip) continue;
      if (s[i].is_known()) {
        auto m = checked_mul(p.known, s[i].value());
        if (m) p.known = *m; else p.overflow = true;
      } else if (s[i].is_symbolic()) {
        p.symbols.insert(s[i].symbol_name());
      } else {
        p.unknown = true;
      }
    }
    return p;
  };
  const Parts pin = split(in, -1);
  const Parts pout = split(out, infer_at);
  if (pin.overflow || pout.overflow) return ctx_error(str_cat("element count overflows (", shapes, ")"));
  const bool all_static = !pin.unknown && !pout.unknown && pin.symbols.empty() && pout.symbols.empty();

  if (infer_at < 0) {
    if (all_static && pin.known != pout.known) {
      return ctx_error(str_cat("cannot reshape ", pin.known, " elements to ", pout.known, " (", shapes, ")"));
    }
    return out;
  }
  if (all_static) {
    if (pout.known == 0 || pin.known % pout.known != 0) {
      return ctx_error(str_cat("cannot infer the -1 dim: ", pin.known, " elements do not fit (",
                               shapes, ")"));
    }
    out[infer_at] = Dim(pin.known / pout.known);
    return out;
  }
  if (pin.unknown || pout.unknown || pout.known == 0) return out;  // -1 stays unknown
  // Cancel the output's symbols against the input's.
  std::multiset<std::string> rest = pin.symbols;
  for (const std::string& s : pout.symbols) {
    auto it = rest.find(s);
    if (it == rest.end()) return out;
    rest.erase(it);
  }
  if (rest.empty()) {
    if (pin.known % pout.known == 0) out[infer_at] = Dim(pin.known / pout.known);
  } else if (rest.size() == 1 && pin.known == pout.known) {
    out[infer_at] = Dim::symbol(*rest.begin());
  }
  return out;
}

Status infer_reshape(InferContext& ctx) {
  OPFUSE_TRY(check_integer_input(ctx, 1, "shape"));
  const auto spec = constant_ints(ctx, 1);
  std::optional<Shape> out;
  if (spec && ctx.input_shape(0)) {
    OPFUSE_ASSIGN_OR_RETURN(
        out, reshape_output(*ctx.input_shape(0), *spec, ctx.attrs().get_int("allowzero") != 0,
                            [&](const std::string& m) { return ctx.error(m); }));
  } else if (spec) {
    // Input rank unknown: entries other than 0 and -1 are still known.
    out = Shape();
    for (int64_t v : *spec) out->push_back(v > 0 ? Dim(v) : Dim::unknown());
  } else if (auto len = known_length(ctx, 1)) {
    out = unknown_shape(static_cast<size_t>(*len));
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
  return Status::ok();
}

Status run_reshape(KernelContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(auto spec, int_input(ctx, 1, "shape"));
  const Tensor& x = ctx.input(0);
  OPFUSE_ASSIGN_OR_RETURN(
      Shape out, reshape_output(x.shape(), spec, ctx.attrs().get_int("allowzero") != 0,
                                [&](const std::string& m) { return ctx.error(m); }));
  OPFUSE_ASSIGN_OR_RETURN(Tensor y, x.reshaped(*static_dims(out)));
  ctx.set_output(0, std::move(y));
  return Status::ok();
}

// ---- Flatten -------------------------------------------------------------------------------

template <typename ErrorFn>
Result<int64_t> flatten_axis(int64_t axis, int64_t rank, ErrorFn error) {
  if (axis < -rank || axis > rank) {
    return error(str_cat("axis ", axis, " is out of range for rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

Status infer_flatten(InferContext& ctx) {
  const auto& in = ctx.input_shape(0);
  if (!in) {
    ctx.set_output(0, ctx.input_dtype(0), unknown_shape(2));
    return Status::ok();
  }
  OPFUSE_ASSIGN_OR_RETURN(int64_t axis,
                          flatten_axis(ctx.attrs().get_int("axis"), static_cast<int64_t>(in->size()),
                                       [&](std::string m) { return ctx.error(m); }));
  ctx.set_output(0, ctx.input_dtype(0),
                 Shape{dim_product(*in, 0, axis), dim_product(*in, axis, in->size())});
  return Status::ok();
}

Status run_flatten(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  OPFUSE_ASSIGN_OR_RETURN(int64_t axis, flatten_axis(ctx.attrs().get_int("axis"), x.rank(),
                                                     [&](std::string m) { return ctx.error(m); }));
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(i);
  int64_t inner = 1;
  for (int64_t i = axis; i < x.rank(); ++i) inner *= x.dim(i);
  OPFUSE_ASSIGN_OR_RETURN(Tensor y, x.reshaped({outer, inner}));
  ctx.set_output(0, std::move(y));
  return Status::ok();
}

// ---- Squeeze / Unsqueeze -------------------------------------------------------------------

// Normalises `axes` against `rank`, rejecting out-of-range and repeated axes.
template <typename ErrorFn>
Result<std::vector<int64_t>> normalize_axes(std::vector<int64_t> axes, int64_t rank,
                                            ErrorFn error) {
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return error(str_cat("axis ", a, " is out of range for rank ", rank));
    if (a < 0) a += rank;
  }
  std::vector<int64_t> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return error(str_cat("axes ", ints_to_string(axes), " repeat an axis"));
  }
  return sorted;
}

// Squeezed shape; with no axes, every dim that is 1 goes (only decidable when all are known).
template <typename ErrorFn>
Result<std::optional<Shape>> squeeze_output(const Shape& in, const std::optional<std::vector<int64_t>>& axes,
                                            ErrorFn error) {
  std::vector<bool> drop(in.size(), false);
  if (axes) {
    OPFUSE_ASSIGN_OR_RETURN(auto norm, normalize_axes(*axes, in.size(), error));
    for (int64_t a : norm) {
      if (in[a].is_known() && in[a].value() != 1) {
        return error(str_cat("cannot squeeze axis ", a, " of shape ", shape_to_string(in),
                             ": its size is not 1"));
      }
      drop[a] = true;
    }
  } else {
    if (!is_static(in)) return std::optional<Shape>();  // a symbolic dim may be 1 at run time
    for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i].value() == 1;
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!drop[i]) out.push_back(in[i]);
  }
  return std::optional<Shape>(out);
}

Status infer_squeeze(InferContext& ctx) {
  OPFUSE_TRY(check_integer_input(ctx, 1, "axes"));
  const auto& in = ctx.input_shape(0);
  std::optional<Shape> out;
  const bool has_axes = ctx.has_input(1);
  const auto axes = constant_ints(ctx, 1);
  auto error = [&](const std::string& m) { return ctx.error(m); };
  if (in && (!has_axes || axes)) {
    OPFUSE_ASSIGN_OR_RETURN(out, squeeze_output(*in, axes, error));
  } else if (in && known_length(ctx, 1)) {
    const int64_t n = *known_length(ctx, 1);
    if (n <= static_cast<int64_t>(in->size())) out = unknown_shape(in->size() - n);
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
  return Status::ok();
}

Status run_squeeze(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::optional<std::vector<int64_t>> axes;
  if (ctx.has_input(1)) {
    OPFUSE_ASSIGN_OR_RETURN(axes, int_input(ctx, 1, "axes"));
  }
  OPFUSE_ASSIGN_OR_RETURN(auto out, squeeze_output(x.shape(), axes,
                                                   [&](const std::string& m) { return ctx.error(m); }));
  OPFUSE_ASSIGN_OR_RETURN(Tensor y, x.reshaped(*static_dims(*out)));
  ctx.set_output(0, std::move(y));
  return Status::ok();
}

template <typename ErrorFn>
Result<Shape> unsqueeze_output(const Shape& in, const std::vector<int64_t>& axes, ErrorFn error) {
  const int64_t rank = static_cast<int64_t>(in.size() + axes.size());
  OPFUSE_ASSIGN_OR_RETURN(auto norm, normalize_axes(axes, rank, error));
  Shape out;
  size_t next_in = 0;
  size_t next_axis = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (next_axis < norm.size() && norm[next_axis] == i) {
      out.push_back(Dim(1));
      ++next_axis;
    } else {
      out.push_back(in[next_in++]);
    }
  }
  return out;
}

Status infer_unsqueeze(InferContext& ctx) {
  OPFUSE_TRY(check_integer_input(ctx, 1, "axes"));
  const auto& in = ctx.input_shape(0);
  const auto axes = constant_ints(ctx, 1);
  std::optional<Shape> out;
  if (in && axes) {
    OPFUSE_ASSIGN_OR_RETURN(out, unsqueeze_output(*in, *axes, [&](const std::string& m) { return ctx.error(m); }));
  } else if (in && known_length(ctx, 1)) {
    out = unknown_shape(in->size() + *known_length(ctx, 1));
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
  return Status::ok();
}

Status run_unsqueeze(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  OPFUSE_ASSIGN_OR_RETURN(auto axes, int_input(ctx, 1, "axes"));
  OPFUSE_ASSIGN_OR_RETURN(Shape out, unsqueeze_output(x.shape(), axes,
                                                      [&](const std::string& m) { return ctx.error(m); }));
  OPFUSE_ASSIGN_OR_RETURN(Tensor y, x.reshaped(*static_dims(out)));
  ctx.set_output(0, std::move(y));
  return Status::ok();
}

// ---- Identity / Dropout --------------------------------------------------------------------

Status infer_identity(InferContext& ctx) {
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  return Status::ok();
}

Status run_identity(KernelContext& ctx) {
  ctx.set_output(0, ctx.input(0));
  return Status::ok();
}

Status infer_dropout(InferContext& ctx) {
  if (const Tensor* training = ctx.input_constant(2); training && training->numel() == 1 &&
                                                      training->get_int(0) != 0) {
    return ctx.error("training_mode=true is not supported (opfuse runs inference only)");
  }
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  if (ctx.num_outputs() > 1) ctx.set_output(1, DType::kBool, ctx.input_shape(0));
  return Status::ok();
}

// Inference-mode Dropout is the identity; its mask (if asked for) keeps every element.
Status run_dropout(KernelContext& ctx) {
  if (ctx.has_input(2)) {
    const Tensor& training = ctx.input(2);
    if (training.numel() != 1) {
      return ctx.error(str_cat("training_mode must be a scalar, got ", training.type_string()));
    }
    if (training.get_int(0) != 0) {
      return ctx.error("training_mode=true is not supported (opfuse runs inference only)");
    }
  }
  const Tensor& x = ctx.input(0);
  ctx.set_output(0, x);
  if (ctx.num_outputs() > 1) {
    OPFUSE_ASSIGN_OR_RETURN(Tensor * mask, ctx.allocate_output(1, DType::kBool, x.dims()));
    std::fill_n(mask->data<bool>(), mask->numel(), true);
  }
  return Status::ok();
}

// ---- Shape / Size --------------------------------------------------------------------------

// The [start, end) range of dims Shape returns, clamped per opset 15.
std::pair<int64_t, int64_t> shape_range(const AttrReader& attrs, int64_t rank) {
  auto clamp = [rank](int64_t v) {
    if (v < 0) v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  const int64_t start = clamp(attrs.get_int("start"));
  const int64_t end = attrs.has("end") ? clamp(attrs.get_int("end")) : rank;
  return {start, std::max(start, end)};
}

Status infer_shape(InferContext& ctx) {
  std::optional<Shape> out;
  if (const auto& in = ctx.input_shape(0)) {
    auto [start, end] = shape_range(ctx.attrs(), in->size());
    out = Shape{Dim(end - start)};
  } else {
    out = unknown_shape(1);
  }
  ctx.set_output(0, DType::kI64, out);
  return Status::ok();
}

Status run_shape(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto [start, end] = shape_range(ctx.attrs(), x.rank());
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kI64, {end - start}));
  for (int64_t i = start; i < end; ++i) y->data<int64_t>()[i - start] = x.dim(i);
  return Status::ok();
}

Status infer_size(InferContext& ctx) {
  ctx.set_output(0, DType::kI64, Shape{});
  return Status::ok();
}

Status run_size(KernelContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kI64, {}));
  y->data<int64_t>()[0] = ctx.input(0).numel();
  return Status::ok();
}

OpDef view_op(std::string name, int min_inputs, int max_inputs, InferFn infer, KernelFn reference,
           std::string summary) {
  OpDef def = injective_op(std::move(name), min_inputs, max_inputs, infer, reference, std::move(summary));
  def.traits.output_is_view = true;
  return def;
}

}  // namespace

std::vector<OpDef> tensor_shape_ops() {
  std::vector<OpDef> ops;

  OpDef reshape = view_op("Reshape", 2, 2, infer_reshape, run_reshape,
                          "reinterprets the dims (0 copies an input dim, -1 is inferred)");
  reshape.attrs = {{"allowzero", AttrType::kInt, AttrValue(int64_t{0})}};
  ops.push_back(std::move(reshape));

  OpDef flatten = view_op("Flatten", 1, 1, infer_flatten, run_flatten,
                          "collapses dims before and from `axis` into a 2-D tensor");
  flatten.attrs = {{"axis", AttrType::kInt, AttrValue(int64_t{1})}};
  ops.push_back(std::move(flatten));

  ops.push_back(view_op("Squeeze", 1, 2, infer_squeeze, run_squeeze,
                        "removes size-1 dims (the `axes` input, or all of them)"));
  ops.push_back(view_op("Unsqueeze", 2, 2, infer_unsqueeze, run_unsqueeze,
                        "inserts size-1 dims at the `axes` input's positions"));
  ops.push_back(view_op("Identity", 1, 1, infer_identity, run_identity, "returns its input"));

  OpDef dropout = view_op("Dropout", 1, 3, infer_dropout, run_dropout,
                          "identity at inference; the optional mask is all true");
  dropout.max_outputs = 2;
  dropout.attrs = {{"seed", AttrType::kInt, std::nullopt}};
  ops.push_back(std::move(dropout));

  OpDef shape = view_op("Shape", 1, 1, infer_shape, run_shape,
                        "the input's dims [start, end) as an i64 tensor");
  shape.kind = FusionKind::kOpaque;
  shape.traits.reads_shape_only = true;
  shape.traits.output_is_view = false;
  shape.attrs = {{"start", AttrType::kInt, AttrValue(int64_t{0})},
                 {"end", AttrType::kInt, std::nullopt}};
  ops.push_back(std::move(shape));

  OpDef size = view_op("Size", 1, 1, infer_size, run_size, "the input's element count as an i64 scalar");
  size.kind = FusionKind::kOpaque;
  size.traits.reads_shape_only = true;
  size.traits.output_is_view = false;
  ops.push_back(std::move(size));
  return ops;
}

}  // namespace opfuse
