// MaxPool, AveragePool (1-3 spatial dims) and the global pools. Direct loops: pools are
// memory-bound and cheap next to the convolutions around them.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/nn_common.h"

namespace opfuse {
namespace {

bool maxpool_dtype_ok(DType t) {
  return is_float(t) || t == DType::kI8 || t == DType::kU8;
}

Status check_pool_rank(const std::string& who, const Shape& xs, size_t max_rank) {
  if (xs.size() < 3 || xs.size() > max_rank) {
    return Status::user_error(str_cat(who, ": input X has shape ", shape_to_string(xs),
                                      "; expected [N, C, spatial...] with 1 to ", max_rank - 2,
                                      " spatial dims"));
  }
  return Status::ok();
}

Status infer_window_pool(InferContext& ctx, bool is_max) {
  const std::string who = ctx.node().describe();
  const DType t = ctx.input_dtype(0);
  if (t != DType::kUndefined && !(is_max ? maxpool_dtype_ok(t) : is_float(t))) {
    return ctx.error(str_cat("input X has unsupported dtype ", dtype_name(t)));
  }
  const auto& xs = ctx.input_shape(0);
  if (!xs) {
    ctx.set_output(0, t, std::nullopt);
    if (ctx.num_outputs() > 1) ctx.set_output(1, DType::kI64, std::nullopt);
    return Status::ok();
  }
  OPFUSE_TRY(check_pool_rank(who, *xs, 5));
  const size_t spatial = xs->size() - 2;
  OPFUSE_ASSIGN_OR_RETURN(WindowAttrs w,
                          read_window_attrs(ctx.attrs(), spatial, std::nullopt, is_max, who));
  const bool ceil_mode = ctx.attrs().get_int("ceil_mode") != 0;
  Shape out = {(*xs)[0], (*xs)[1]};
  for (size_t i = 0; i < spatial; ++i) {
    const Dim& in = (*xs)[2 + i];
    OPFUSE_ASSIGN_OR_RETURN(WindowDim d,
                            window_dim(w, i, in.is_known() ? in.value() : -1, ceil_mode, who));
    out.push_back(d.out >= 0 ? Dim(d.out) : Dim::unknown());
  }
  ctx.set_output(0, t, out);
  if (ctx.num_outputs() > 1) ctx.set_output(1, DType::kI64, out);
  return Status::ok();
}

Status infer_maxpool(InferContext& ctx) { return infer_window_pool(ctx, true); }
Status infer_averagepool(InferContext& ctx) { return infer_window_pool(ctx, false); }

struct PoolSetup {
  Geometry3 geo;
  int64_t pad_end[3] = {0, 0, 0};
  std::vector<int64_t> out_dims;
};

Result<PoolSetup> pool_setup(const Node& node, const Tensor& x, bool is_max) {
  const std::string who = node.describe();
  const AttrReader attrs(node);
  OPFUSE_TRY(check_pool_rank(who, x.shape(), 5));
  const size_t spatial = static_cast<size_t>(x.rank() - 2);
  OPFUSE_ASSIGN_OR_RETURN(WindowAttrs w,
                          read_window_attrs(attrs, spatial, std::nullopt, is_max, who));
  PoolSetup s;
  s.out_dims = {x.dim(0), x.dim(1)};
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t in = x.dim(2 + static_cast<int64_t>(i));
    OPFUSE_ASSIGN_OR_RETURN(WindowDim d,
                            window_dim(w, i, in, attrs.get_int("ceil_mode") != 0, who));
    set_geometry_axis(s.geo, spatial, i, in, w, d);
    s.pad_end[3 - spatial + i] = d.pad_end;
    s.out_dims.push_back(d.out);
  }
  return s;
}

// Window of output position o along slot `a`: input indices start + k*dilation, k in [lo, hi)
// are the ones inside the input.
struct WindowRange {
  int64_t start, lo, hi;
};
WindowRange window_range(const Geometry3& g, int a, int64_t o) {
  const int64_t start = o * g.stride[a] - g.pad_begin[a], dil = g.dilation[a];
  int64_t lo = start < 0 ? (-start + dil - 1) / dil : 0;
  int64_t hi = g.in[a] - start <= 0 ? 0 : (g.in[a] - start + dil - 1) / dil;
  hi = std::min(hi, g.kernel[a]);
  return {start, std::min(lo, hi), hi};
}

// Calls visit(plane, flat output index, depth, height and width window ranges) for every output
// element of every (batch, channel) plane; planes run in parallel when the output is large.
template <typename Visit>
void for_each_window(const Geometry3& g, int64_t planes, Visit visit) {
  const int64_t out_size = g.out_size();
#pragma omp parallel for if (planes * out_size > 4096)
  for (int64_t p = 0; p < planes; ++p) {
    int64_t o = p * out_size;
    for (int64_t od = 0; od < g.out[0]; ++od) {
      const WindowRange rd = window_range(g, 0, od);
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        const WindowRange rh = window_range(g, 1, oh);
        for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) visit(p, o, rd, rh, window_range(g, 2, ow));
      }
    }
  }
}

template <typename T>
Result<std::vector<Tensor>> maxpool_compute(const Node& node, const std::vector<const Tensor*>& in,
                                            bool want_indices) {
  const Tensor& x = *in[0];
  OPFUSE_ASSIGN_OR_RETURN(PoolSetup s, pool_setup(node, x, true));
  const Geometry3& g = s.geo;
  OPFUSE_ASSIGN_OR_RETURN(Tensor y, Tensor::zeros(x.dtype(), s.out_dims, node.describe()));
  Tensor indices;
  if (want_indices) {
    OPFUSE_ASSIGN_OR_RETURN(indices, Tensor::zeros(DType::kI64, s.out_dims, node.describe()));
  }
  const bool column_major = AttrReader(node).get_int("storage_order") == 1;
  const int64_t planes = x.dim(0) * x.dim(1), in_size = g.in_size();
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
  int64_t* id_out = want_indices ? indices.data<int64_t>() : nullptr;
  for_each_window(g, planes, [&](int64_t p, int64_t o, const WindowRange& rd, const WindowRange& rh,
                                  const WindowRange& rw) {
    const T* xp = xd + p * in_size;
    // A window entirely in the padding yields the lowest value (and index -1).
    T best = std::numeric_limits<T>::lowest();
    int64_t bd = -1, bh = -1, bw = -1;
    for (int64_t kd = rd.lo; kd < rd.hi; ++kd) {
      const int64_t id = rd.start + kd * g.dilation[0];
      for (int64_t kh = rh.lo; kh < rh.hi; ++kh) {
        const int64_t ih = rh.start + kh * g.dilation[1];
        const T* row = xp + (id * g.in[1] + ih) * g.in[2];
        for (int64_t kw = rw.lo; kw < rw.hi; ++kw) {
          const int64_t iw = rw.start + kw * g.dilation[2];
          // NaN anywhere in the window gives NaN (as numpy's max in ONNX's reference), the
          // first one's index.
          if (bd < 0 || row[iw] > best || (row[iw] != row[iw] && best == best)) {
            best = row[iw];
            bd = id, bh = ih, bw = iw;
          }
        }
      }
    }
    if constexpr (std::numeric_limits<T>::has_infinity) {
      if (bd < 0) best = -std::numeric_limits<T>::infinity();
    }
    yd[o] = best;
    if (id_out) {
      // Flat index into X; storage_order 1 numbers the spatial dims column-major.
      const int64_t spatial_index = bd < 0 ? -1
                                    : column_major
                                        ? bd + bh * g.in[0] + bw * g.in[0] * g.in[1]
                                        : (bd * g.in[1] + bh) * g.in[2] + bw;
      id_out[o] = spatial_index < 0 ? -1 : p * in_size + spatial_index;
    }
  });
  std::vector<Tensor> out;
  out.push_back(std::move(y));
  if (want_indices) out.push_back(std::move(indices));
  return out;
}

template <typename T>
Result<std::vector<Tensor>> averagepool_compute(const Node& node,
                                                const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  OPFUSE_ASSIGN_OR_RETURN(PoolSetup s, pool_setup(node, x, false));
  const Geometry3& g = s.geo;
  OPFUSE_ASSIGN_OR_RETURN(Tensor y, Tensor::zeros(x.dtype(), s.out_dims, node.describe()));
  const bool include_pad = AttrReader(node).get_int("count_include_pad") != 0;
  const int64_t planes = x.dim(0) * x.dim(1), in_size = g.in_size();
  // With count_include_pad, the divisor counts padding elements too, but not the part of a
  // ceil_mode window that hangs past the end padding (PyTorch / onnxruntime semantics).
  auto padded_count = [&](int a, const WindowRange& r) {
    return std::min(r.start + g.kernel[a], g.in[a] + s.pad_end[a]) - r.start;
  };
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
  for_each_window(g, planes, [&](int64_t p, int64_t o, const WindowRange& rd, const WindowRange& rh,
                                  const WindowRange& rw) {
    const T* xp = xd + p * in_size;
    T sum = 0;
    for (int64_t id = rd.start + rd.lo; id < rd.start + rd.hi; ++id) {
      for (int64_t ih = rh.start + rh.lo; ih < rh.start + rh.hi; ++ih) {
        const T* row = xp + (id * g.in[1] + ih) * g.in[2];
        for (int64_t iw = rw.start + rw.lo; iw < rw.start + rw.hi; ++iw) sum += row[iw];
      }
    }
    const int64_t count =
        include_pad ? padded_count(0, rd) * padded_count(1, rh) * padded_count(2, rw)
                    : (rd.hi - rd.lo) * (rh.hi - rh.lo) * (rw.hi - rw.lo);
    yd[o] = count > 0 ? sum / static_cast<T>(count) : T(0);
  });
  return std::vector<Tensor>{std::move(y)};
}

Status maxpool_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const bool want_indices = ctx.num_outputs() > 1 && node.output(1) != nullptr;
  const DType t = ctx.input(0).dtype();
  if (is_float(t)) {
    return run_float_kernel(
        ctx, [&](const auto& in) { return maxpool_compute<float>(node, in, want_indices); },
        [&](const auto& in) { return maxpool_compute<double>(node, in, want_indices); });
  }
  Result<std::vector<Tensor>> out = Status::user_error("unset");
  if (t == DType::kU8) {
    out = maxpool_compute<uint8_t>(node, {&ctx.input(0)}, want_indices);
  } else if (t == DType::kI8) {
    out = maxpool_compute<int8_t>(node, {&ctx.input(0)}, want_indices);
  } else {
    return ctx.error(str_cat("input X has unsupported dtype ", dtype_name(t)));
  }
  OPFUSE_TRY(out.status());
  for (size_t i = 0; i < out->size(); ++i) ctx.set_output(i, std::move((*out)[i]));
  return Status::ok();
}

Status averagepool_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  return run_float_kernel(
      ctx, [&](const auto& in) { return averagepool_compute<float>(node, in); },
      [&](const auto& in) { return averagepool_compute<double>(node, in); });
}

// ---------------------------------------------------------------- global pools

Status infer_global_pool(InferContext& ctx) {
  const DType t = ctx.input_dtype(0);
  if (t != DType::kUndefined && !is_float(t)) {
    return ctx.error(str_cat("input X has unsupported dtype ", dtype_name(t)));
  }
  const auto& xs = ctx.input_shape(0);
  if (!xs) {
    ctx.set_output(0, t, std::nullopt);
    return Status::ok();
  }
  OPFUSE_TRY(check_pool_rank(ctx.node().describe(), *xs, 64));
  Shape out(xs->size(), Dim(1));
  out[0] = (*xs)[0];
  out[1] = (*xs)[1];
  ctx.set_output(0, t, std::move(out));
  return Status::ok();
}

template <typename T>
Result<std::vector<Tensor>> global_pool_compute(const Node& node,
                                                const std::vector<const Tensor*>& in, bool is_max) {
  const Tensor& x = *in[0];
  OPFUSE_TRY(check_pool_rank(node.describe(), x.shape(), 64));
  std::vector<int64_t> dims(x.dims().size(), 1);
  dims[0] = x.dim(0);
  dims[1] = x.dim(1);
  OPFUSE_ASSIGN_OR_RETURN(Tensor y, Tensor::zeros(x.dtype(), dims, node.describe()));
  const int64_t planes = x.dim(0) * x.dim(1), size = planes ? x.numel() / planes : 0;
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
#pragma omp parallel for if (x.numel() > 65536)
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = xd + p * size;
    if (is_max) {
      T best = size ? xp[0] : -std::numeric_limits<T>::infinity();
      // NaN anywhere gives NaN, whatever its position.
      for (int64_t i = 1; i < size; ++i) {
        if (best == best && (xp[i] > best || xp[i] != xp[i])) best = xp[i];
      }
      yd[p] = best;
    } else {
      double sum = 0;  // accumulate in double: planes can be large
      for (int64_t i = 0; i < size; ++i) sum += xp[i];
      yd[p] = size ? static_cast<T>(sum / static_cast<double>(size)) : T(0);
    }
  }
  return std::vector<Tensor>{std::move(y)};
}

Status global_average_pool_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  return run_float_kernel(
      ctx, [&](const auto& in) { return global_pool_compute<float>(node, in, false); },
      [&](const auto& in) { return global_pool_compute<double>(node, in, false); });
}

Status global_max_pool_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  return run_float_kernel(
      ctx, [&](const auto& in) { return global_pool_compute<float>(node, in, true); },
      [&](const auto& in) { return global_pool_compute<double>(node, in, true); });
}

// ---------------------------------------------------------------- flops

// One comparison or addition per window element per output.
int64_t window_pool_flops(const Node& node) {
  const auto y = static_value_dims(node.output(0));
  if (!y) return -1;
  int64_t window = 1;
  for (int64_t k : AttrReader(node).get_ints("kernel_shape")) window *= k;
  return numel_of(*y) * window;
}

int64_t global_pool_flops(const Node& node) {
  const auto x = static_value_dims(node.input(0));
  return x ? numel_of(*x) : -1;
}

OpDef window_pool_def(const std::string& name) {
  OpDef d;
  d.name = name;
  d.attrs = {
      {"auto_pad", AttrType::kString, AttrValue(std::string("NOTSET"))},
      {"ceil_mode", AttrType::kInt, AttrValue(int64_t{0})},
      {"kernel_shape", AttrType::kInts, std::nullopt, /*required=*/true},
      {"pads", AttrType::kInts, std::nullopt},
      {"strides", AttrType::kInts, std::nullopt},
  };
  d.kind = FusionKind::kOpaque;
  d.flops = window_pool_flops;
  return d;
}

}  // namespace

std::vector<OpDef> pool_ops() {
  std::vector<OpDef> ops;
  {
    OpDef d = window_pool_def("MaxPool");
    d.max_outputs = 2;
    d.attrs.push_back({"dilations", AttrType::kInts, std::nullopt});
    d.attrs.push_back({"storage_order", AttrType::kInt, AttrValue(int64_t{0})});
    d.infer = infer_maxpool;
    d.reference = maxpool_kernel;
    d.summary = "max over sliding windows (1-3 spatial dims), optional argmax Indices";
    ops.push_back(std::move(d));
  }
  {
    OpDef d = window_pool_def("AveragePool");
    d.attrs.push_back({"count_include_pad", AttrType::kInt, AttrValue(int64_t{0})});
    d.infer = infer_averagepool;
    d.reference = averagepool_kernel;
    d.summary = "mean over sliding windows (1-3 spatial dims)";
    ops.push_back(std::move(d));
  }
  {
    OpDef d;
    d.name = "GlobalAveragePool";
    d.kind = FusionKind::kReduction;
    d.reduce = ReduceSpec{ReduceCombiner::kSum, 0.0, /*divide_by_count=*/true};
    d.infer = infer_global_pool;
    d.reference = global_average_pool_kernel;
    d.flops = global_pool_flops;
    d.summary = "mean over all spatial dims: [N, C, ...] -> [N, C, 1, ...]";
    ops.push_back(std::move(d));
  }
  {
    OpDef d;
    d.name = "GlobalMaxPool";
    d.kind = FusionKind::kReduction;
    d.reduce = ReduceSpec{ReduceCombiner::kMax, -std::numeric_limits<double>::infinity(), false};
    d.infer = infer_global_pool;
    d.reference = global_max_pool_kernel;
    d.flops = global_pool_flops;
    d.summary = "max over all spatial dims: [N, C, ...] -> [N, C, 1, ...]";
    ops.push_back(std::move(d));
  }
  return ops;
}

}  // namespace opfuse
