// Element movers: Transpose, Expand, Slice (one strided-copy engine planned at compile time),
// Concat and Gather. These ops do no arithmetic, so there is nothing for vector math to do; the
// speed comes from planning (dims collapsed once, runs copied with memcpy/fill), cache blocking
// (a transposition is copied in 32x32 tiles so both sides stay in cache) and OpenMP over rows or
// tiles when the tensor is large.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/collapsed_view.h"
#include "kernels/cpu/hwy_kernels.h"
#include "ops/op_def.h"
#include "ops/slice_bounds.h"

namespace opfuse::hwy_cpu {
namespace {

constexpr int64_t kTile = 32;

// dst (dense, `dims`) [o] = src[offset + sum o_k * strides[k]], after collapsing.
struct MovePlan {
  std::vector<int64_t> dims, strides;
  int64_t offset = 0, numel = 1;
  int tile_dim = -1;  // transposition: the dim (not the last) whose source stride is 1
};

MovePlan plan_move(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, int64_t offset) {
  CollapsedView v = collapse_view(dims, strides);
  MovePlan p;
  p.dims = std::move(v.dims);
  p.strides = std::move(v.strides);
  p.numel = v.numel;
  p.offset = offset;
  const size_t r = p.dims.size();
  if (r >= 2 && p.strides[r - 1] > 1) {
    for (size_t k = 0; k + 1 < r; ++k) {
      if (p.strides[k] == 1 && p.dims[k] >= 4) p.tile_dim = static_cast<int>(k);
    }
  }
  return p;
}

// The source offset of row `row` (an index over dims[0, skip...]), skipping dims in `skip`.
int64_t src_offset(const MovePlan& p, int64_t index, size_t ndims, int skip_a, int skip_b,
                   std::vector<int64_t>* coords = nullptr, std::vector<int64_t>* dst_strides = nullptr,
                   int64_t* dst_off = nullptr) {
  int64_t off = p.offset, doff = 0;
  for (size_t k = ndims; k-- > 0;) {
    if (static_cast<int>(k) == skip_a || static_cast<int>(k) == skip_b) continue;
    const int64_t c = index % p.dims[k];
    index /= p.dims[k];
    off += c * p.strides[k];
    if (dst_strides) doff += c * (*dst_strides)[k];
  }
  if (dst_off) *dst_off = doff;
  (void)coords;
  return off;
}

// Runs this short are copied by a loop: a memcpy call per run of a few floats (a detector's
// [4420, 4] boxes sliced into pairs) costs more than the copy.
constexpr int64_t kShortRun = 8;

// One run of `inner` floats, `s` apart in the source.
inline void copy_run(const float* in, float* out, int64_t inner, int64_t s) {
  if (s == 1 && inner > kShortRun) {
    std::memcpy(out, in, static_cast<size_t>(inner) * sizeof(float));
  } else if (s == 0) {
    std::fill(out, out + inner, in[0]);
  } else {
    for (int64_t i = 0; i < inner; ++i) out[i] = in[i * s];
  }
}

void run_move(const MovePlan& p, const float* src, float* dst) {
  const size_t r = p.dims.size();
  const int64_t inner = p.dims[r - 1], s = p.strides[r - 1];
  const bool parallel = p.numel > kParallelThreshold;
  if (p.tile_dim < 0) {
    const int64_t rows = p.numel / inner;
    if (r <= 2) {
      // One outer dim: its stride steps the rows, without index arithmetic per row.
      const int64_t row_stride = r == 2 ? p.strides[0] : 0;
#pragma omp parallel for schedule(static) if (parallel && rows > 1)
      for (int64_t row = 0; row < rows; ++row) {
        copy_run(src + p.offset + row * row_stride, dst + row * inner, inner, s);
      }
      return;
    }
#pragma omp parallel for schedule(static) if (parallel && rows > 1)
    for (int64_t row = 0; row < rows; ++row) {
      copy_run(src + src_offset(p, row, r - 1, -1, -1), dst + row * inner, inner, s);
    }
    return;
  }
  // Tiled transposition between dim t (source-contiguous) and the last dim (dest-contiguous).
  const int t = p.tile_dim;
  std::vector<int64_t> dst_strides(r);
  int64_t st = 1;
  for (size_t k = r; k-- > 0;) {
    dst_strides[k] = st;
    st *= p.dims[k];
  }
  const int64_t nt = p.dims[t];
  const int64_t tiles_t = (nt + kTile - 1) / kTile, tiles_i = (inner + kTile - 1) / kTile;
  const int64_t outer = p.numel / (nt * inner);
  const int64_t dt = dst_strides[t];
#pragma omp parallel for collapse(2) schedule(static) if (parallel)
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t tt = 0; tt < tiles_t; ++tt) {
      int64_t doff = 0;
      const int64_t soff = src_offset(p, o, r - 1, t, -1, nullptr, &dst_strides, &doff);
      const int64_t a0 = tt * kTile, a1 = std::min(nt, a0 + kTile);
      for (int64_t ti = 0; ti < tiles_i; ++ti) {
        const int64_t i0 = ti * kTile, i1 = std::min(inner, i0 + kTile);
        for (int64_t a = a0; a < a1; ++a) {
          const float* in = src + soff + a;
          float* out = dst + doff + a * dt;
          for (int64_t i = i0; i < i1; ++i) out[i] = in[i * s];
        }
      }
    }
  }
}

std::vector<int64_t> row_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size());
  int64_t st = 1;
  for (size_t k = dims.size(); k-- > 0;) {
    s[k] = st;
    st *= dims[k];
  }
  return s;
}

class MoveKernel final : public Kernel {
 public:
  MoveKernel(std::string_view name, std::vector<int64_t> in_dims, std::vector<int64_t> out_dims, MovePlan plan)
      : name_(name), in_dims_(std::move(in_dims)), out_dims_(std::move(out_dims)), plan_(std::move(plan)) {}
  std::string_view name() const override { return name_; }
  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    if (in[0] == nullptr || in[0]->dims() != in_dims_ || out[0] == nullptr || out[0]->dims() != out_dims_) {
      return Status::internal_error(str_cat(name_, ": a tensor does not have its planned shape"));
    }
    if (plan_.numel > 0) run_move(plan_, in[0]->data<float>(), out[0]->data<float>());
    return Status::ok();
  }

 private:
  std::string_view name_;
  std::vector<int64_t> in_dims_, out_dims_;
  MovePlan plan_;
};

bool io_static(const Node& node) {
  return static_dims_of(node.input(0)).has_value() && static_dims_of(node.output(0)).has_value();
}

// ---- Transpose ----

std::optional<std::vector<int64_t>> transpose_perm(const Node& node, int64_t rank) {
  const AttrReader attrs(node);
  std::vector<int64_t> perm;
  if (!attrs.has("perm")) {
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
    return perm;
  }
  return normalize_permutation(attrs.get_ints("perm"), rank);
}

bool supports_transpose(const KernelCompileContext& ctx) {
  if (!io_static(ctx.node)) return false;
  return transpose_perm(ctx.node, static_cast<int64_t>(static_dims_of(ctx.node.input(0))->size())).has_value();
}

Result<std::unique_ptr<Kernel>> create_transpose(const KernelCompileContext& ctx) {
  auto in = *static_dims_of(ctx.node.input(0));
  auto out = *static_dims_of(ctx.node.output(0));
  auto perm = *transpose_perm(ctx.node, static_cast<int64_t>(in.size()));
  const auto in_strides = row_strides(in);
  std::vector<int64_t> dims, strides;
  for (int64_t p : perm) {
    dims.push_back(in[p]);
    strides.push_back(in_strides[p]);
  }
  if (dims != out) return Status::internal_error(str_cat(ctx.node.describe(), ": output shape disagrees with perm"));
  return std::unique_ptr<Kernel>(std::make_unique<MoveKernel>("hwy.transpose", in, out, plan_move(dims, strides, 0)));
}

// ---- Expand ----

bool supports_expand(const KernelCompileContext& ctx) {
  if (!io_static(ctx.node)) return false;
  auto in = *static_dims_of(ctx.node.input(0));
  auto out = *static_dims_of(ctx.node.output(0));
  if (in.size() > out.size()) return false;
  const size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != 1 && in[i] != out[off + i]) return false;
  }
  return true;
}

Result<std::unique_ptr<Kernel>> create_expand(const KernelCompileContext& ctx) {
  auto in = *static_dims_of(ctx.node.input(0));
  auto out = *static_dims_of(ctx.node.output(0));
  const auto in_strides = row_strides(in);
  std::vector<int64_t> strides(out.size(), 0);
  const size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) strides[off + i] = in[i] == 1 ? 0 : in_strides[i];
  return std::unique_ptr<Kernel>(std::make_unique<MoveKernel>("hwy.expand", in, out, plan_move(out, strides, 0)));
}

// ---- Slice (starts/ends/axes/steps constant) ----

std::optional<std::vector<int64_t>> const_ints(const KernelCompileContext& ctx, size_t i) {
  if (i >= ctx.constants.size() || ctx.constants[i] == nullptr) return std::nullopt;
  const DType t = ctx.constants[i]->dtype();
  if (t != DType::kI64 && t != DType::kI32) return std::nullopt;
  return ctx.constants[i]->to_int_vector();
}

std::optional<MovePlan> slice_plan(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  if (!io_static(node)) return std::nullopt;
  auto in = *static_dims_of(node.input(0));
  auto out = *static_dims_of(node.output(0));
  const int64_t rank = static_cast<int64_t>(in.size());
  auto starts = const_ints(ctx, 1), ends = const_ints(ctx, 2);
  if (!starts || !ends || starts->size() != ends->size()) return std::nullopt;
  const size_t n = starts->size();
  std::vector<int64_t> axes(n), steps(n, 1);
  for (size_t i = 0; i < n; ++i) axes[i] = static_cast<int64_t>(i);
  if (node.has_input(3)) {
    auto a = const_ints(ctx, 3);
    if (!a || a->size() != n) return std::nullopt;
    axes = *a;
  }
  if (node.has_input(4)) {
    auto s = const_ints(ctx, 4);
    if (!s || s->size() != n) return std::nullopt;
    steps = *s;
  }
  const auto in_strides = row_strides(in);
  std::vector<int64_t> dims = in, strides = in_strides;
  std::vector<bool> seen(rank, false);
  int64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    int64_t a = axes[i];
    if (a < -rank || a >= rank || steps[i] == 0) return std::nullopt;
    if (a < 0) a += rank;
    if (seen[a]) return std::nullopt;
    seen[a] = true;
    auto [first, count] = resolve_slice((*starts)[i], (*ends)[i], steps[i], in[a]);
    dims[a] = count;
    if (count > 0) offset += first * in_strides[a];
    strides[a] = in_strides[a] * bounded_slice_step(steps[i], in[a]);
  }
  if (dims != out) return std::nullopt;
  return plan_move(dims, strides, offset);
}

bool supports_slice(const KernelCompileContext& ctx) { return slice_plan(ctx).has_value(); }

Result<std::unique_ptr<Kernel>> create_slice(const KernelCompileContext& ctx) {
  return std::unique_ptr<Kernel>(std::make_unique<MoveKernel>(
      "hwy.slice", *static_dims_of(ctx.node.input(0)), *static_dims_of(ctx.node.output(0)), *slice_plan(ctx)));
}

// ---- Concat ----

class ConcatKernel final : public Kernel {
 public:
  std::vector<std::vector<int64_t>> in_dims;
  std::vector<int64_t> out_dims;
  std::vector<int64_t> widths;  // per input: elements per outer row (axis * inner)
  int64_t outer = 1, out_width = 0;
  std::string_view name() const override { return "hwy.concat"; }
  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    for (size_t i = 0; i < in_dims.size(); ++i) {
      if (in[i] == nullptr || in[i]->dims() != in_dims[i]) {
        return Status::internal_error("hwy.concat: an input does not have its planned shape");
      }
    }
    if (out[0] == nullptr || out[0]->dims() != out_dims) {
      return Status::internal_error("hwy.concat: the output does not have its planned shape");
    }
    float* y = out[0]->data<float>();
    const bool parallel = outer > 1 && outer * out_width > kParallelThreshold;
    int64_t col = 0;
    for (size_t i = 0; i < in_dims.size(); ++i) {
      const float* x = in[i]->data<float>();
      const int64_t w = widths[i];
#pragma omp parallel for schedule(static) if (parallel)
      for (int64_t o = 0; o < outer; ++o) copy_run(x + o * w, y + o * out_width + col, w, 1);
      col += w;
    }
    return Status::ok();
  }
};

std::optional<int64_t> concat_axis(const Node& node) {
  auto out = static_dims_of(node.output(0));
  if (!out || out->empty() || node.inputs().empty()) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(out->size());
  const AttrReader attrs(node);
  if (!attrs.has("axis")) return std::nullopt;
  int64_t axis = attrs.get_int("axis");
  if (axis < -rank || axis >= rank) return std::nullopt;
  if (axis < 0) axis += rank;
  int64_t sum = 0;
  for (const Value* v : node.inputs()) {
    auto d = static_dims_of(v);
    if (!d || d->size() != out->size()) return std::nullopt;
    for (int64_t k = 0; k < rank; ++k) {
      if (k != axis && (*d)[k] != (*out)[k]) return std::nullopt;
    }
    sum += (*d)[axis];
  }
  if (sum != (*out)[axis]) return std::nullopt;
  return axis;
}

bool supports_concat(const KernelCompileContext& ctx) { return concat_axis(ctx.node).has_value(); }

Result<std::unique_ptr<Kernel>> create_concat(const KernelCompileContext& ctx) {
  const int64_t axis = *concat_axis(ctx.node);
  auto k = std::make_unique<ConcatKernel>();
  k->out_dims = *static_dims_of(ctx.node.output(0));
  int64_t inner = 1;
  for (size_t d = axis + 1; d < k->out_dims.size(); ++d) inner *= k->out_dims[d];
  for (int64_t d = 0; d < axis; ++d) k->outer *= k->out_dims[d];
  for (const Value* v : ctx.node.inputs()) {
    k->in_dims.push_back(*static_dims_of(v));
    k->widths.push_back(k->in_dims.back()[axis] * inner);
    k->out_width += k->widths.back();
  }
  return std::unique_ptr<Kernel>(std::move(k));
}

// ---- Gather (constant or run-time indices) ----

class GatherKernel final : public Kernel {
 public:
  std::vector<int64_t> data_dims, idx_dims, out_dims;
  std::vector<int64_t> const_indices;  // normalised; empty when read at run time
  bool constant = false;
  int64_t outer = 1, axis_len = 0, inner = 1, axis = 0;
  std::string_view name() const override { return "hwy.gather"; }
  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    if (in[0] == nullptr || in[0]->dims() != data_dims || in[1] == nullptr || in[1]->dims() != idx_dims ||
        out[0] == nullptr || out[0]->dims() != out_dims) {
      return Status::internal_error("hwy.gather: a tensor does not have its planned shape");
    }
    std::vector<int64_t> runtime;
    const std::vector<int64_t>* indices = &const_indices;
    if (!constant) {
      runtime = in[1]->to_int_vector();
      for (int64_t& i : runtime) {
        if (i < -axis_len || i >= axis_len) {
          return Status::user_error(str_cat("Gather: index ", i, " is out of range for axis ", axis,
                                            " of size ", axis_len, " (data ", in[0]->type_string(), ")"));
        }
        if (i < 0) i += axis_len;
      }
      indices = &runtime;
    }
    const float* x = in[0]->data<float>();
    float* y = out[0]->data<float>();
    const int64_t n = static_cast<int64_t>(indices->size());
    const bool parallel = outer * n * inner > kParallelThreshold;
#pragma omp parallel for collapse(2) schedule(static) if (parallel)
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < n; ++j) {
        std::memcpy(y + (o * n + j) * inner, x + (o * axis_len + (*indices)[j]) * inner,
                    static_cast<size_t>(inner) * sizeof(float));
      }
    }
    return Status::ok();
  }
};

bool supports_gather(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  if (!io_static(node)) return false;
  auto idx = static_dims_of(node.input(1), DType::kI64);
  if (!idx) idx = static_dims_of(node.input(1), DType::kI32);
  if (!idx) return false;
  auto data = *static_dims_of(node.input(0));
  const int64_t rank = static_cast<int64_t>(data.size());
  int64_t axis = AttrReader(node).get_int("axis");
  if (rank == 0 || axis < -rank || axis >= rank) return false;
  if (axis < 0) axis += rank;
  if (auto c = const_ints(ctx, 1)) {  // constant indices out of range: the reference reports it
    for (int64_t i : *c) {
      if (i < -data[axis] || i >= data[axis]) return false;
    }
  }
  return true;
}

Result<std::unique_ptr<Kernel>> create_gather(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  auto k = std::make_unique<GatherKernel>();
  k->data_dims = *static_dims_of(node.input(0));
  k->out_dims = *static_dims_of(node.output(0));
  const Value* iv = node.input(1);
  k->idx_dims = *static_dims(*iv->shape);
  const int64_t rank = static_cast<int64_t>(k->data_dims.size());
  k->axis = AttrReader(node).get_int("axis");
  if (k->axis < 0) k->axis += rank;
  k->axis_len = k->data_dims[k->axis];
  for (int64_t d = 0; d < k->axis; ++d) k->outer *= k->data_dims[d];
  for (int64_t d = k->axis + 1; d < rank; ++d) k->inner *= k->data_dims[d];
  if (auto c = const_ints(ctx, 1)) {
    k->constant = true;
    for (int64_t i : *c) k->const_indices.push_back(i < 0 ? i + k->axis_len : i);
  }
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace

std::vector<KernelImpl> layout_kernels() {
  return {
      KernelImpl{"hwy.transpose", "Transpose", supports_transpose, create_transpose},
      KernelImpl{"hwy.expand", "Expand", supports_expand, create_expand},
      KernelImpl{"hwy.slice", "Slice", supports_slice, create_slice},
      KernelImpl{"hwy.concat", "Concat", supports_concat, create_concat},
      KernelImpl{"hwy.gather", "Gather", supports_gather, create_gather},
  };
}

}  // namespace opfuse::hwy_cpu
