// The generic reference kernel of elementwise and broadcast ops: evaluates the node's scalar
// expression over its inputs with ONNX multidirectional broadcasting.
//
// The output index space is walked in chunks of kChunk elements. For each chunk every
// instruction of the expression runs as one tight loop over a small scratch array (see
// elementwise_math.h), so the per-element cost is that of plain array arithmetic. Inputs are
// read according to how they broadcast:
//   - same shape and dtype as the compute type: read in place, no copy;
//   - one element (scalar operand, constants): a scratch array filled once per thread;
//   - otherwise: gathered per chunk by walking the collapsed output index with strides
//     (0 on broadcast dims), copying whole contiguous runs at a time.
// Output dims with the same broadcast pattern across all inputs are merged first, so
// per-channel [C,1,1] against [N,C,H,W] walks a 3-d space [N, C, H*W].
#include <algorithm>
#include <type_traits>
#include <vector>

#include "ops/elementwise_math.h"
#include "ops/reference.h"

namespace opfuse {
namespace {

constexpr int64_t kChunk = 512;
// Below this many elements thread start-up costs more than it saves.
constexpr int64_t kParallelThreshold = int64_t{1} << 16;

enum class ArgMode { kContiguous, kScalar, kStrided };

struct ArgView {
  const void* data = nullptr;
  DType dtype = DType::kUndefined;
  ArgMode mode = ArgMode::kContiguous;
  std::vector<int64_t> strides;  // per collapsed output dim, in elements; 0 where broadcast
};

// The output index space after dropping size-1 dims and merging neighbours that every input
// treats alike (all broadcast or all not).
struct Layout {
  std::vector<int64_t> dims;
  int64_t numel = 1;
};

bool is_predicate(ScalarOp op) {
  switch (op) {
    case ScalarOp::kLess: case ScalarOp::kLessEqual: case ScalarOp::kGreater:
    case ScalarOp::kGreaterEqual: case ScalarOp::kEqual: case ScalarOp::kAnd: case ScalarOp::kOr:
    case ScalarOp::kXor: case ScalarOp::kNot: case ScalarOp::kIsNaN:
      return true;
    default:
      return false;
  }
}

// f64 anywhere, or floats mixed with integers (Pow(f32, i64)), computes in double; other float
// inputs in float; integer and bool inputs in int64.
DType compute_dtype(const std::vector<const Tensor*>& inputs) {
  bool any_f64 = false, any_float = false, any_int = false;
  for (const Tensor* t : inputs) {
    if (t == nullptr) continue;
    any_f64 |= t->dtype() == DType::kF64;
    any_float |= is_float(t->dtype());
    any_int |= is_integer(t->dtype());
  }
  if (any_f64 || (any_float && any_int)) return DType::kF64;
  if (any_float) return DType::kF32;
  return DType::kI64;
}

Status validate(const ScalarExpr& expr, const KernelContext& ctx) {
  if (expr.empty()) {
    return Status::internal_error(str_cat(ctx.node().describe(), ": empty scalar expression"));
  }
  for (size_t i = 0; i < expr.code.size(); ++i) {
    const ScalarInstr& in = expr.code[i];
    const int32_t here = static_cast<int32_t>(i);
    if (in.op == ScalarOp::kArg) {
      if (in.a < 0 || !ctx.has_input(static_cast<size_t>(in.a))) {
        return Status::internal_error(str_cat(ctx.node().describe(), ": scalar expression reads input ",
                                              in.a, " which is not present"));
      }
      continue;
    }
    const int arity = scalar_op_arity(in.op);
    const int32_t operands[3] = {in.a, in.b, in.c};
    for (int k = 0; k < arity; ++k) {
      if (operands[k] < 0 || operands[k] >= here) {
        return Status::internal_error(str_cat(ctx.node().describe(), ": malformed scalar expression ",
                                              expr.to_string()));
      }
    }
  }
  return Status::ok();
}

Layout collapse(const std::vector<int64_t>& out_dims, const std::vector<const Tensor*>& inputs,
                std::vector<ArgView>& views) {
  const size_t rank = out_dims.size();
  // Per input: its dims left-padded to the output rank, and its row-major strides.
  std::vector<std::vector<int64_t>> padded, strides;
  for (const Tensor* t : inputs) {
    std::vector<int64_t> p(rank, 1), s(rank, 0);
    if (t != nullptr) {
      std::copy(t->dims().begin(), t->dims().end(), p.begin() + (rank - t->dims().size()));
      int64_t stride = 1;
      for (size_t k = rank; k-- > 0;) {
        s[k] = stride;
        stride *= p[k];
      }
    }
    padded.push_back(std::move(p));
    strides.push_back(std::move(s));
  }
  auto broadcast_at = [&](size_t j, size_t k) { return padded[j][k] == 1; };
  Layout layout;
  std::vector<size_t> group_last;  // last original dim of each merged group
  for (size_t k = 0; k < rank; ++k) {
    if (out_dims[k] == 1) continue;
    bool merge = !group_last.empty();
    for (size_t j = 0; merge && j < inputs.size(); ++j) {
      if (inputs[j] != nullptr && broadcast_at(j, k) != broadcast_at(j, group_last.back())) {
        merge = false;
      }
    }
    if (merge) {
      layout.dims.back() *= out_dims[k];
      group_last.back() = k;
    } else {
      layout.dims.push_back(out_dims[k]);
      group_last.push_back(k);
    }
    layout.numel *= out_dims[k];
  }
  if (layout.dims.empty()) {  // a single element
    layout.dims.push_back(1);
    group_last.push_back(rank);
  }
  for (size_t j = 0; j < inputs.size(); ++j) {
    const Tensor* t = inputs[j];
    if (t == nullptr) continue;
    ArgView& v = views[j];
    v.data = t->raw_data();
    v.dtype = t->dtype();
    if (t->numel() == 1) {
      v.mode = ArgMode::kScalar;
    } else if (padded[j] == out_dims) {
      v.mode = ArgMode::kContiguous;
    } else {
      v.mode = ArgMode::kStrided;
      for (size_t last : group_last) {
        v.strides.push_back(last >= rank || broadcast_at(j, last) ? 0 : strides[j][last]);
      }
    }
  }
  return layout;
}

template <typename S, typename T>
inline T load(S v) {
  if constexpr (std::is_same_v<S, Half>) {
    return static_cast<T>(half_to_float(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename T, typename D>
inline D store(T v) {
  if constexpr (std::is_same_v<D, Half>) {
    return float_to_half(static_cast<float>(v));
  } else if constexpr (std::is_same_v<D, bool>) {
    return v != T(0);
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<T>) {
    return static_cast<D>(ew::saturating_to_int(static_cast<double>(v)));
  } else {
    return static_cast<D>(v);  // integers wrap into narrower types
  }
}

// Copies `n` consecutive elements of `src` (any dtype) into dst as T.
template <typename T>
void convert_run(const void* src, DType dtype, int64_t offset, int64_t n, T* dst) {
  visit_dtype(dtype, [&](auto tag) {
    using S = decltype(tag);
    const S* s = static_cast<const S*>(src) + offset;
    for (int64_t i = 0; i < n; ++i) dst[i] = load<S, T>(s[i]);
  });
}

// Fills dst[0, n) with the broadcast view of `v` over output elements [start, start + n).
template <typename T>
void gather(const ArgView& v, const Layout& layout, int64_t start, int64_t n, T* dst,
            std::vector<int64_t>& index) {
  const size_t rank = layout.dims.size();
  index.assign(rank, 0);
  int64_t offset = 0, rem = start;
  for (size_t k = rank; k-- > 0;) {
    index[k] = rem % layout.dims[k];
    rem /= layout.dims[k];
    offset += index[k] * v.strides[k];
  }
  const int64_t inner = layout.dims[rank - 1], inner_stride = v.strides[rank - 1];
  visit_dtype(v.dtype, [&](auto tag) {
    using S = decltype(tag);
    const S* src = static_cast<const S*>(v.data);
    int64_t left = n;
    while (left > 0) {
      const int64_t run = std::min(inner - index[rank - 1], left);
      if (inner_stride == 0) {
        const T value = load<S, T>(src[offset]);
        std::fill(dst, dst + run, value);
      } else if (inner_stride == 1) {
        for (int64_t i = 0; i < run; ++i) dst[i] = load<S, T>(src[offset + i]);
      } else {
        for (int64_t i = 0; i < run; ++i) dst[i] = load<S, T>(src[offset + i * inner_stride]);
      }
      dst += run;
      left -= run;
      offset += run * inner_stride;
      index[rank - 1] += run;
      if (index[rank - 1] < inner) continue;
      // Carry into the outer dims.
      index[rank - 1] = 0;
      offset -= inner * inner_stride;
      for (size_t k = rank - 1; k-- > 0;) {
        offset += v.strides[k];
        if (++index[k] < layout.dims[k]) break;
        offset -= layout.dims[k] * v.strides[k];
        index[k] = 0;
      }
    }
  });
}

template <typename T>
void evaluate(const ScalarExpr& expr, const std::vector<ArgView>& views, const Layout& layout,
              Tensor& out) {
  const size_t count = expr.code.size();
  const int64_t numel = layout.numel;
  const int64_t num_chunks = (numel + kChunk - 1) / kChunk;
  const bool direct_output = out.dtype() == DTypeOf<T>::value;
  const size_t last = count - 1;

  // A chunk is never longer than the tensor: whole chunks of scratch, allocated, zeroed and
  // filled per call, took most of a scalar op's 2.5 us (Silero VAD's sample-rate arithmetic).
  const int64_t len = std::min(kChunk, numel);

#pragma omp parallel if (numel > kParallelThreshold)
  {
    std::vector<T> scratch(count * static_cast<size_t>(len));
    std::vector<const T*> values(count);
    std::vector<int64_t> index;
    auto buffer = [&](size_t i) { return scratch.data() + i * len; };
    // Constants and one-element inputs are the same in every chunk: fill their arrays once.
    for (size_t i = 0; i < count; ++i) {
      const ScalarInstr& in = expr.code[i];
      if (in.op == ScalarOp::kConst) {
        std::fill(buffer(i), buffer(i) + len, ew::from_const<T>(in.value));
      } else if (in.op == ScalarOp::kArg && views[in.a].mode == ArgMode::kScalar) {
        T v;
        convert_run<T>(views[in.a].data, views[in.a].dtype, 0, 1, &v);
        std::fill(buffer(i), buffer(i) + len, v);
      }
    }

// Dynamic: on a loaded machine a descheduled thread would stall a static split.
#pragma omp for schedule(dynamic, 16)
    for (int64_t chunk = 0; chunk < num_chunks; ++chunk) {
      const int64_t start = chunk * kChunk;
      const int64_t n = std::min(kChunk, numel - start);
      for (size_t i = 0; i < count; ++i) {
        const ScalarInstr& in = expr.code[i];
        // The final instruction writes straight into the output when the types agree.
        T* dst = (i == last && direct_output) ? out.data<T>() + start : buffer(i);
        if (in.op == ScalarOp::kConst) {
          values[i] = buffer(i);
        } else if (in.op == ScalarOp::kArg) {
          const ArgView& v = views[in.a];
          if (v.mode == ArgMode::kScalar) {
            values[i] = buffer(i);
          } else if (v.mode == ArgMode::kContiguous && v.dtype == DTypeOf<T>::value) {
            values[i] = static_cast<const T*>(v.data) + start;
          } else if (v.mode == ArgMode::kContiguous) {
            convert_run<T>(v.data, v.dtype, start, n, buffer(i));
            values[i] = buffer(i);
          } else {
            gather<T>(v, layout, start, n, buffer(i), index);
            values[i] = buffer(i);
          }
        } else if (in.op == ScalarOp::kSelect) {
          ew::apply_select<T>(values[in.a], values[in.b], values[in.c], dst, n);
          values[i] = dst;
        } else if (scalar_op_arity(in.op) == 1) {
          ew::apply_unary<T>(in.op, values[in.a], dst, n);
          values[i] = dst;
        } else {
          ew::apply_binary<T>(in.op, values[in.a], values[in.b], dst, n);
          values[i] = dst;
        }
      }
      const T* result = values[last];
      if (direct_output && result == out.data<T>() + start) continue;
      visit_dtype(out.dtype(), [&](auto tag) {
        using D = decltype(tag);
        D* o = out.data<D>() + start;
        for (int64_t i = 0; i < n; ++i) o[i] = store<T, D>(result[i]);
      });
    }
  }
}

// The output dtype and dims: the op's own inference function run on the concrete inputs (which
// also rejects bad dtypes and attributes), checked against plain broadcasting.
Status output_type(KernelContext& ctx, const ScalarExpr& expr, DType& dtype,
                   std::vector<int64_t>& dims) {
  const Node& node = ctx.node();
  std::vector<ValueType> types;
  std::vector<const Tensor*> tensors;
  std::vector<std::vector<int64_t>> input_dims;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor* t = ctx.input_or_null(i);
    types.push_back(t ? ValueType{t->dtype(), t->shape()} : ValueType{});
    tensors.push_back(t);
    if (t) input_dims.push_back(t->dims());
  }
  // The node's description only for an error: every run of a reference op comes here.
  auto broadcast = broadcast_dims(input_dims, "");
  if (!broadcast.is_ok()) return Status::user_error(str_cat(node.describe(), broadcast.status().message()));
  dims = std::move(*broadcast);
  InferContext infer(node, std::move(types), tensors);
  OPFUSE_TRY(node.def().infer(infer));
  if (infer.outputs().empty()) {
    return Status::internal_error(str_cat(node.describe(), ": elementwise op has no output"));
  }
  const ValueType& out = infer.outputs()[0];
  if (out.shape) {
    auto inferred = static_dims(*out.shape);
    if (inferred && *inferred != dims) {
      return ctx.error(str_cat("inputs broadcast to ", dims_to_string(dims),
                               " but the op's output shape is ", dims_to_string(*inferred)));
    }
  }
  dtype = out.dtype;
  if (dtype == DType::kUndefined) {
    // Inference could not tell: predicates give bool, anything else the first data input's type.
    dtype = DType::kBool;
    if (!is_predicate(expr.code.back().op)) {
      for (const Tensor* t : tensors) {
        if (t && t->dtype() != DType::kBool) {
          dtype = t->dtype();
          break;
        }
      }
    }
  }
  return Status::ok();
}

}  // namespace

Status evaluate_f32_scalar_expr(const ScalarExpr& expr, const std::vector<const Tensor*>& inputs, Tensor& out) {
  if (expr.empty()) return Status::internal_error("empty scalar expression");
  for (const ScalarInstr& in : expr.code) {
    if (in.op != ScalarOp::kArg) continue;
    const Tensor* t = in.a >= 0 && static_cast<size_t>(in.a) < inputs.size() ? inputs[in.a] : nullptr;
    if (t == nullptr || t->dtype() != DType::kF32 || t->dims() != out.dims()) {
      return Status::internal_error(str_cat("scalar expression ", expr.to_string(), ": argument ", in.a,
                                            " is not an f32 tensor of ", dims_to_string(out.dims())));
    }
  }
  if (out.dtype() != DType::kF32) return Status::internal_error("scalar expression: the output is not f32");
  if (out.numel() == 0) return Status::ok();
  std::vector<ArgView> views(inputs.size());
  const Layout layout = collapse(out.dims(), inputs, views);
  evaluate<float>(expr, views, layout, out);
  return Status::ok();
}

Status run_scalar_expr_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  if (node.def().scalar == nullptr) {
    return Status::internal_error(str_cat(node.describe(), ": op has no scalar expression"));
  }
  const ScalarExpr expr = node.def().scalar(ScalarExprContext{ctx.attrs(), node});
  OPFUSE_TRY(validate(expr, ctx));
  DType out_dtype;
  std::vector<int64_t> out_dims;
  OPFUSE_TRY(output_type(ctx, expr, out_dtype, out_dims));
  OPFUSE_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, out_dtype, out_dims));
  if (out->numel() == 0) return Status::ok();

  std::vector<const Tensor*> inputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) inputs.push_back(ctx.input_or_null(i));
  std::vector<ArgView> views(inputs.size());
  const Layout layout = collapse(out_dims, inputs, views);
  switch (compute_dtype(inputs)) {
    case DType::kF64: evaluate<double>(expr, views, layout, *out); break;
    case DType::kF32: evaluate<float>(expr, views, layout, *out); break;
    default: evaluate<int64_t>(expr, views, layout, *out); break;
  }
  return Status::ok();
}

}  // namespace opfuse
