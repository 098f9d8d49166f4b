// One kernel for every elementwise/broadcast op (every OpDef with a ScalarExpr whose reference is
// the generic evaluator): the op's scalar expression runs as a list of vector instructions over
// chunks of the output, like ops/scalar_eval.cc but with Highway vectors and with the broadcast
// iteration planned once at compile time.
//
// Plan (create): the output index space is collapsed (size-1 dims dropped, neighbouring dims
// that every input treats alike merged), and each input is classified: same shape as the output
// (read in place), one element (a splat buffer filled once per thread), or strided (0 strides on
// broadcast dims). When the innermost collapsed dim is long, chunks never cross it, so a strided
// input with inner stride 1 (a bias row) is also read in place and one with inner stride 0 (a
// per-channel value) is a splat; otherwise strided inputs are gathered per chunk.
//
// f32 only: every data input f32 (bool inputs, e.g. Where's condition, read as 0/1) and an f32
// or bool output. Integer or f64 math is declined, so the reference kernel runs it.
#ifndef OPFUSE_KERNELS_CPU_HWY_ELEMENTWISE_DECLS_
#define OPFUSE_KERNELS_CPU_HWY_ELEMENTWISE_DECLS_
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "hwy/aligned_allocator.h"
#include "kernels/cpu/hwy_kernels.h"
#include "ops/op_def.h"
#include "ops/registry.h"

#include "kernels/cpu/hwy_vinstr.h"
#include "kernels/cpu/strided_gather.h"
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/hwy_elementwise.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/hwy_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#include "kernels/cpu/hwy_vector_ops-inl.h"  // DF, VF, MapN, VisitOp, ApplyOp

// Runs the program over n elements. vals[i] of leaves (args, constants) are set by the caller;
// every other instruction writes bufs[i] and publishes it in vals[i].
void EvalChunk(const VInstr* code, size_t count, const float** vals, float* const* bufs, size_t n) {
  for (size_t i = 0; i < count; ++i) {
    const VInstr& in = code[i];
    if (in.op == ScalarOp::kArg || in.op == ScalarOp::kConst) continue;
    ApplyOp(in, vals, bufs[i], n);
    vals[i] = bufs[i];
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace opfuse::hwy_cpu {
HWY_EXPORT(EvalChunk);

namespace {

constexpr int64_t kChunk = 1024;
// Inner dims at least this long are walked row by row so broadcast rows are read in place.
constexpr int64_t kRowAlignedMin = 256;

enum class ArgMode { kContiguous, kScalar, kStrided };

struct ArgPlan {
  ArgMode mode = ArgMode::kContiguous;
  bool is_bool = false;
  std::vector<int64_t> strides;  // per collapsed dim (kStrided)
};

struct Plan {
  std::vector<int64_t> dims;  // collapsed output dims
  int64_t numel = 1;
  bool row_aligned = false;
  int64_t chunks_per_row = 1;
  int64_t num_chunks = 0;
};

bool is_leaf(ScalarOp op) { return op == ScalarOp::kArg || op == ScalarOp::kConst; }

class ElementwiseKernel final : public Kernel {
 public:
  std::vector<VInstr> code;
  std::vector<std::vector<int64_t>> in_dims;  // per input (empty vector for absent)
  std::vector<bool> present;
  std::vector<ArgPlan> args;
  std::vector<int64_t> out_dims;
  bool out_bool = false;
  bool in_place_ok = false;
  Plan plan;

  std::string_view name() const override { return "hwy.elementwise"; }
  int in_place_input() const override { return in_place_ok ? 0 : -1; }

  Status run(std::span<const Tensor* const> inputs, std::span<Tensor* const> outputs) const override {
    for (size_t i = 0; i < present.size(); ++i) {
      if (!present[i]) continue;
      if (i >= inputs.size() || inputs[i] == nullptr || inputs[i]->dims() != in_dims[i]) {
        return Status::internal_error(str_cat("hwy.elementwise: input ", i, " does not have the planned shape ",
                                              dims_to_string(in_dims[i])));
      }
    }
    if (outputs.empty() || outputs[0] == nullptr || outputs[0]->dims() != out_dims) {
      return Status::internal_error("hwy.elementwise: output does not have the planned shape");
    }
    if (plan.numel == 0) return Status::ok();
    Tensor& out = *outputs[0];
    const size_t count = code.size();
    const size_t last = count - 1;
    const bool direct_out = !out_bool && !is_leaf(code[last].op);
    // A chunk is never longer than the tensor: a whole chunk's buffers, allocated and filled
    // per run, cost more than a small op (a Relu over 32 floats took 1.1 us).
    const size_t len = static_cast<size_t>(std::min<int64_t>(kChunk, (plan.numel + 15) / 16 * 16));
#pragma omp parallel if (plan.numel > kParallelThreshold)
    {
      hwy::AlignedFreeUniquePtr<float[]> scratch = hwy::AllocateAligned<float>((count + 1) * len);
      std::vector<const float*> vals(count);
      std::vector<float*> bufs(count);
      std::vector<int64_t> fill_offset(count, -1);  // per arg instr: what its splat buffer holds
      std::vector<int64_t> index;
      auto buffer = [&](size_t i) { return scratch.get() + i * len; };
      for (size_t i = 0; i < count; ++i) {
        const VInstr& in = code[i];
        if (in.op == ScalarOp::kConst) {
          std::fill(buffer(i), buffer(i) + len, in.value);
        } else if (in.op == ScalarOp::kArg && args[in.a].mode == ArgMode::kScalar) {
          std::fill(buffer(i), buffer(i) + len, load(*inputs[in.a], in.a, 0));
        }
        vals[i] = buffer(i);
        bufs[i] = buffer(i);
      }
      float* result_buf = buffer(count);
#pragma omp for schedule(dynamic, 4)
      for (int64_t chunk = 0; chunk < plan.num_chunks; ++chunk) {
        int64_t start, n;
        if (plan.row_aligned) {
          const int64_t inner = plan.dims.back();
          const int64_t row = chunk / plan.chunks_per_row;
          const int64_t col = (chunk % plan.chunks_per_row) * kChunk;
          start = row * inner + col;
          n = std::min(kChunk, inner - col);
        } else {
          start = chunk * kChunk;
          n = std::min(kChunk, plan.numel - start);
        }
        for (size_t i = 0; i < count; ++i) {
          const VInstr& in = code[i];
          if (in.op != ScalarOp::kArg) continue;
          const ArgPlan& ap = args[in.a];
          const Tensor& t = *inputs[in.a];
          if (ap.mode == ArgMode::kScalar) continue;
          if (ap.mode == ArgMode::kContiguous && !ap.is_bool) {
            vals[i] = t.data<float>() + start;
          } else if (ap.mode == ArgMode::kContiguous) {
            const auto* src = t.data<bool>() + start;
            for (int64_t j = 0; j < n; ++j) buffer(i)[j] = src[j] ? 1.0f : 0.0f;
            vals[i] = buffer(i);
          } else if (plan.row_aligned && ap.strides.back() <= 1) {
            const int64_t off = offset_of(ap, start);
            if (ap.strides.back() == 1 && !ap.is_bool) {
              vals[i] = t.data<float>() + off;
            } else if (ap.strides.back() == 1) {
              const auto* src = t.data<bool>() + off;
              for (int64_t j = 0; j < n; ++j) buffer(i)[j] = src[j] ? 1.0f : 0.0f;
              vals[i] = buffer(i);
            } else {
              if (fill_offset[i] != off) {
                std::fill(buffer(i), buffer(i) + len, load(t, in.a, off));
                fill_offset[i] = off;
              }
              vals[i] = buffer(i);
            }
          } else {
            gather_strided(plan.dims, ap.strides, 0, start, n, buffer(i), index,
                           [&](int64_t e) { return load(t, in.a, e); },
                           ap.is_bool ? nullptr : t.data<float>());
            fill_offset[i] = -1;
            vals[i] = buffer(i);
          }
        }
        bufs[last] = direct_out ? out.data<float>() + start : result_buf;
        HWY_DYNAMIC_DISPATCH(EvalChunk)(code.data(), count, vals.data(), bufs.data(), static_cast<size_t>(n));
        const float* result = vals[last];
        if (out_bool) {
          bool* o = out.data<bool>() + start;
          for (int64_t j = 0; j < n; ++j) o[j] = result[j] != 0.0f;
        } else if (result != out.data<float>() + start) {
          std::memmove(out.data<float>() + start, result, static_cast<size_t>(n) * sizeof(float));
        }
      }
    }
    return Status::ok();
  }

 private:
  float load(const Tensor& t, int input, int64_t i) const {
    return args[input].is_bool ? (t.data<bool>()[i] ? 1.0f : 0.0f) : t.data<float>()[i];
  }
  int64_t offset_of(const ArgPlan& ap, int64_t flat) const {
    int64_t off = 0;
    for (size_t k = plan.dims.size(); k-- > 0;) {
      off += (flat % plan.dims[k]) * ap.strides[k];
      flat /= plan.dims[k];
    }
    return off;
  }
};

// Collapses the output space and classifies each input (see the file comment).
void make_plan(ElementwiseKernel& k) {
  const std::vector<int64_t>& out = k.out_dims;
  const size_t rank = out.size();
  const size_t n_in = k.in_dims.size();
  std::vector<std::vector<int64_t>> padded(n_in, std::vector<int64_t>(rank, 1)), strides(n_in);
  for (size_t j = 0; j < n_in; ++j) {
    if (!k.present[j]) continue;
    const auto& dims = k.in_dims[j];
    std::copy(dims.begin(), dims.end(), padded[j].begin() + (rank - dims.size()));
    strides[j].assign(rank, 0);
    int64_t s = 1;
    for (size_t a = rank; a-- > 0;) {
      strides[j][a] = s;
      s *= padded[j][a];
    }
  }
  std::vector<size_t> group_last;
  Plan& p = k.plan;
  for (size_t a = 0; a < rank; ++a) {
    p.numel *= out[a];
    if (out[a] == 1) continue;
    bool merge = !group_last.empty();
    for (size_t j = 0; merge && j < n_in; ++j) {
      if (k.present[j] && (padded[j][a] == 1) != (padded[j][group_last.back()] == 1)) merge = false;
    }
    if (merge) {
      p.dims.back() *= out[a];
      group_last.back() = a;
    } else {
      p.dims.push_back(out[a]);
      group_last.push_back(a);
    }
  }
  if (p.dims.empty()) {
    p.dims.push_back(1);
    group_last.push_back(rank);
  }
  bool any_strided = false;
  k.args.resize(n_in);
  for (size_t j = 0; j < n_in; ++j) {
    if (!k.present[j]) continue;
    ArgPlan& ap = k.args[j];
    if (numel_of(k.in_dims[j]) == 1) {
      ap.mode = ArgMode::kScalar;
    } else if (padded[j] == out) {
      ap.mode = ArgMode::kContiguous;
    } else {
      ap.mode = ArgMode::kStrided;
      any_strided = true;
      for (size_t last : group_last) {
        ap.strides.push_back(last >= rank || padded[j][last] == 1 ? 0 : strides[j][last]);
      }
    }
  }
  const int64_t inner = p.dims.back();
  p.row_aligned = any_strided && inner >= kRowAlignedMin;
  if (p.row_aligned) {
    p.chunks_per_row = (inner + kChunk - 1) / kChunk;
    p.num_chunks = (p.numel / inner) * p.chunks_per_row;
  } else {
    p.num_chunks = (p.numel + kChunk - 1) / kChunk;
  }
}

bool supports(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  const OpDef& def = node.def();
  if (def.scalar == nullptr || def.reference != nullptr) return false;
  if (node.outputs().size() != 1) return false;
  const Value* out = node.output(0);
  if (!static_dims_of(out) && !static_dims_of(out, DType::kBool)) return false;
  bool any_f32 = false;
  for (const Value* v : node.inputs()) {
    if (v == nullptr) continue;
    if (static_dims_of(v)) {
      any_f32 = true;
    } else if (!static_dims_of(v, DType::kBool)) {
      return false;
    }
  }
  // All-bool inputs compute in int64 in the reference (logic ops): not ours.
  return any_f32;
}

Result<std::unique_ptr<Kernel>> create(const KernelCompileContext& ctx) {
  const Node& node = ctx.node;
  auto k = std::make_unique<ElementwiseKernel>();
  const ScalarExpr expr = node.def().scalar(ScalarExprContext{AttrReader(node), node});
  if (expr.empty()) return Status::internal_error(str_cat(node.describe(), ": empty scalar expression"));
  for (size_t i = 0; i < node.inputs().size(); ++i) {
    const Value* v = node.input(i);
    k->present.push_back(v != nullptr);
    k->in_dims.push_back(v ? *static_dims(*v->shape) : std::vector<int64_t>{});
  }
  const Value* out = node.output(0);
  k->out_dims = *static_dims(*out->shape);
  k->out_bool = out->dtype == DType::kBool;
  for (size_t i = 0; i < expr.code.size(); ++i) {
    const ScalarInstr& s = expr.code[i];
    const int32_t here = static_cast<int32_t>(i);
    VInstr v{s.op, s.a, s.b, s.c, static_cast<float>(s.value)};
    if (s.op == ScalarOp::kArg) {
      if (s.a < 0 || static_cast<size_t>(s.a) >= node.inputs().size() || !k->present[s.a]) {
        return Status::internal_error(str_cat(node.describe(), ": scalar expression reads absent input ", s.a));
      }
    } else if (s.op != ScalarOp::kConst) {
      const int arity = scalar_op_arity(s.op);
      const int32_t operands[3] = {s.a, s.b, s.c};
      for (int j = 0; j < 3; ++j) {
        const bool ok = j < arity ? (operands[j] >= 0 && operands[j] < here) : operands[j] < 0;
        if (!ok) {
          return Status::internal_error(str_cat(node.describe(), ": malformed scalar expression ", expr.to_string()));
        }
      }
    }
    if (s.op == ScalarOp::kPow) {  // a known constant exponent may have an exact cheap form
      const ScalarInstr& e = expr.code[s.b];
      const Tensor* c = e.op == ScalarOp::kArg && static_cast<size_t>(e.a) < ctx.constants.size()
                            ? ctx.constants[e.a] : nullptr;
      if (e.op == ScalarOp::kConst) {
        v.pow_exp = true;
        v.value = static_cast<float>(e.value);
      } else if (c != nullptr && c->numel() == 1 && c->dtype() == DType::kF32) {
        v.pow_exp = true;
        v.value = c->data<float>()[0];
      }
    }
    k->code.push_back(v);
  }
  make_plan(*k);
  for (size_t i = 0; i < node.inputs().size(); ++i) {
    if (k->present[i]) k->args[i].is_bool = node.input(i)->dtype == DType::kBool;
  }
  k->in_place_ok = !k->out_bool && k->present.size() > 0 && k->present[0] &&
                   node.input(0)->dtype == DType::kF32 && k->in_dims[0] == k->out_dims;
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace

std::vector<KernelImpl> elementwise_kernels() {
  std::vector<KernelImpl> list;
  for (const OpDef* def : OpRegistry::global().all()) {
    if (def->scalar != nullptr && def->reference == nullptr && def->domain.empty()) {
      list.push_back(KernelImpl{"hwy.elementwise", def->name, supports, create});
    }
  }
  return list;
}

}  // namespace opfuse::hwy_cpu
#endif  // HWY_ONCE
