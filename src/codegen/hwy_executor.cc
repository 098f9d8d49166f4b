// The Highway backend of FusedProgram: a vector interpreter over cache-resident tiles.
//
// A tile is a contiguous range of the flattened iteration space: one whole row in row mode
// (programs with reductions), else kTile elements (kept inside one row when rows are long, so
// per-row broadcasts can be read in place). Every instruction runs as one tight vector loop over
// the tile (hwy_vector_ops-inl.h, the same code as the elementwise kernel), writing a tile buffer
// that stays in L1/L2; buffers are reused once their value is dead. Loads are classified once at
// compile time: same layout as the iteration space (read in place), a splat (filled once per
// thread), per-row contiguous or per-row splat (when tiles stay inside a row), general strides
// (gathered), or a table (Pad/Concat/Gather). An instruction stored element-wise exactly once
// writes straight into the output. OpenMP splits the tiles (dynamic schedule: the host is
// shared and a descheduled thread would stall a static split).
#ifndef OPFUSE_CODEGEN_HWY_EXECUTOR_DECLS_
#define OPFUSE_CODEGEN_HWY_EXECUTOR_DECLS_
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "codegen/fused_program.h"
#include "kernels/cpu/hwy_vinstr.h"

namespace opfuse::hwy_cpu {
struct ExecInstr {
  VInstr v;
  codegen::InstrKind kind;
  ReduceCombiner combiner;
  bool mean;
};
}  // namespace opfuse::hwy_cpu
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "codegen/hwy_executor.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/hwy_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace opfuse::hwy_cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#include "kernels/cpu/hwy_vector_ops-inl.h"

float ReduceRow(ReduceCombiner comb, const float* a, size_t n) {
  const DF d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  if (comb == ReduceCombiner::kSum) {
    VF acc0 = hn::Zero(d), acc1 = hn::Zero(d);
    for (; i + 2 * N <= n; i += 2 * N) {
      acc0 = hn::Add(acc0, hn::LoadU(d, a + i));
      acc1 = hn::Add(acc1, hn::LoadU(d, a + i + N));
    }
    float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0, acc1)));
    for (; i < n; ++i) s += a[i];
    return s;
  }
  const bool is_max = comb == ReduceCombiner::kMax;
  const float id = is_max ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  VF acc = hn::Set(d, id);
  bool nan = false;
  for (; i + N <= n; i += N) {
    const VF x = hn::LoadU(d, a + i);
    nan |= !hn::AllFalse(d, hn::IsNaN(x));
    acc = is_max ? hn::Max(acc, x) : hn::Min(acc, x);
  }
  float r = hn::GetLane(is_max ? hn::MaxOfLanes(d, acc) : hn::MinOfLanes(d, acc));
  for (; i < n; ++i) {
    nan |= std::isnan(a[i]);
    r = is_max ? std::max(r, a[i]) : std::min(r, a[i]);
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : r;
}

// Runs the tile's instructions: vals[i] of loads and constants are set by the caller; every
// other instruction writes bufs[i] (n floats) and publishes it in vals[i].
void RunTile(const ExecInstr* code, size_t count, const float** vals, float* const* bufs, size_t n) {
  for (size_t i = 0; i < count; ++i) {
    const ExecInstr& e = code[i];
    const VInstr& in = e.v;
    float* o = bufs[i];
    switch (e.kind) {
      case codegen::InstrKind::kLoad:
      case codegen::InstrKind::kConst:
        continue;
      case codegen::InstrKind::kReduce: {
        float r = ReduceRow(e.combiner, vals[in.a], n);
        if (e.mean) r /= static_cast<float>(n);
        std::fill(o, o + n, r);
        break;
      }
      case codegen::InstrKind::kOp:
        ApplyOp(in, vals, o, n);
        break;
    }
    vals[i] = o;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "codegen/index_map.h"

namespace opfuse::hwy_cpu {
HWY_EXPORT(RunTile);
static void run_tile(const ExecInstr* code, size_t count, const float** vals, float* const* bufs, size_t n) {
  HWY_DYNAMIC_DISPATCH(RunTile)(code, count, vals, bufs, n);
}
}  // namespace opfuse::hwy_cpu

namespace opfuse::codegen {
namespace {

using hwy_cpu::ExecInstr;
using hwy_cpu::VInstr;

constexpr int64_t kTile = 1024;
constexpr int64_t kRowAlignedMin = 256;
constexpr int64_t kParallelThreshold = int64_t{1} << 15;
constexpr int64_t kOffsetMask = (int64_t{1} << 48) - 1;

enum class LoadMode { kContiguous, kSplat, kRowPointer, kRowSplat, kGather, kTable };

class HwyProgram final : public CompiledProgram {
 public:
  explicit HwyProgram(FusedProgram p) : p_(std::move(p)) {}

  Status prepare() {
    numel_ = p_.numel();
    const size_t count = p_.code.size();
    for (const ProgramInstr& in : p_.code) {
      ExecInstr e{VInstr{in.op, in.a, in.b, in.c, in.value, false}, in.kind, in.combiner, in.mean};
      if (in.kind == InstrKind::kOp && in.op == ScalarOp::kPow) {
        const ProgramInstr& ex = p_.code[in.b];
        if (ex.kind == InstrKind::kConst) {
          e.v.pow_exp = true;
          e.v.value = ex.value;
        }
      }
      code_.push_back(e);
    }
    const int64_t inner = p_.dims.empty() ? 1 : p_.dims.back();
    const std::vector<int64_t> iter_strides = row_major_strides(p_.dims);
    bool any_strided = false;
    for (const ProgramLoad& l : p_.loads) {
      LoadMode mode = LoadMode::kTable;
      if (l.affine) {
        bool contiguous = true, splat = true;
        for (size_t j = 0; j < p_.dims.size(); ++j) {
          if (p_.dims[j] == 1) continue;
          contiguous &= l.strides[j] == iter_strides[j];
          splat &= l.strides[j] == 0;
        }
        mode = splat ? LoadMode::kSplat : contiguous ? LoadMode::kContiguous : LoadMode::kGather;
        any_strided |= mode == LoadMode::kGather;
      }
      modes_.push_back(mode);
    }
    row_tiles_ = p_.row_mode || (any_strided && inner >= kRowAlignedMin);
    if (p_.row_mode) {
      tile_len_ = inner;
      chunks_per_row_ = 1;
    } else if (row_tiles_) {
      tile_len_ = std::min(kTile, inner);
      chunks_per_row_ = (inner + kTile - 1) / kTile;
    } else {
      tile_len_ = std::min(kTile, std::max<int64_t>(numel_, 1));
    }
    num_tiles_ = row_tiles_ ? (inner == 0 ? 0 : numel_ / inner) * chunks_per_row_ : (numel_ + tile_len_ - 1) / tile_len_;
    if (row_tiles_) {
      for (size_t k = 0; k < p_.loads.size(); ++k) {
        if (modes_[k] != LoadMode::kGather) continue;
        const int64_t last = p_.loads[k].strides.back();
        if (last == 1) modes_[k] = LoadMode::kRowPointer;
        if (last == 0) modes_[k] = LoadMode::kRowSplat;
      }
    }
    // Stores: an op stored once per element writes into the output directly.
    std::vector<int> element_stores(count, 0);
    for (const ProgramStore& s : p_.stores) element_stores[s.instr] += s.per_row ? 2 : 1;
    direct_.assign(count, -1);
    for (const ProgramStore& s : p_.stores) {
      if (!s.per_row && element_stores[s.instr] == 1 && p_.code[s.instr].kind != InstrKind::kLoad &&
          p_.code[s.instr].kind != InstrKind::kConst) {
        direct_[s.instr] = s.output;
      }
    }
    // Buffer slots by liveness: constants and loads keep theirs (splats are filled once per
    // thread or cached per row); computed values are freed after their last use.
    std::vector<size_t> last_use(count, 0);
    for (size_t i = 0; i < count; ++i) {
      const ProgramInstr& in = p_.code[i];
      if (in.kind == InstrKind::kOp || in.kind == InstrKind::kReduce) {
        for (int32_t o : {in.a, in.b, in.c}) {
          if (o >= 0) last_use[o] = std::max(last_use[o], i);
        }
      }
    }
    for (const ProgramStore& s : p_.stores) last_use[s.instr] = count;
    slot_.assign(count, -1);
    std::vector<int> free_slots;
    std::vector<std::vector<size_t>> dying(count + 1);
    for (size_t i = 0; i < count; ++i) {
      for (size_t dead : dying[i]) free_slots.push_back(slot_[dead]);
      const bool pinned = p_.code[i].kind == InstrKind::kConst || p_.code[i].kind == InstrKind::kLoad;
      // Pinned buffers are filled before the tile's instructions run: never shared.
      if (pinned || free_slots.empty()) {
        slot_[i] = num_slots_++;
      } else {
        slot_[i] = free_slots.back();
        free_slots.pop_back();
      }
      if (!pinned && last_use[i] < count) {
        // Freed when instruction last_use[i] + 1 starts (its operands are read before it writes).
        dying[last_use[i] + 1 <= count ? last_use[i] + 1 : count].push_back(i);
      }
    }
    return Status::ok();
  }

  std::string_view backend_name() const override { return "hwy"; }

  Status run(std::span<const Tensor* const> inputs, std::span<Tensor* const> outputs) const override {
    if (inputs.size() != p_.input_dims.size() || outputs.size() != p_.output_dims.size()) {
      return Status::internal_error("fused program: wrong number of inputs or outputs");
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i] == nullptr || inputs[i]->dtype() != DType::kF32 || inputs[i]->dims() != p_.input_dims[i]) {
        return Status::internal_error(str_cat("fused program: input ", i, " is not f32", dims_to_string(p_.input_dims[i])));
      }
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i] == nullptr || outputs[i]->dtype() != DType::kF32 || outputs[i]->dims() != p_.output_dims[i]) {
        return Status::internal_error(str_cat("fused program: output ", i, " is not f32", dims_to_string(p_.output_dims[i])));
      }
    }
    if (numel_ == 0) return Status::ok();
    const size_t count = code_.size();
    const int64_t inner = p_.dims.back();
    const int64_t chunk = std::max<int64_t>(1, 8192 / std::max<int64_t>(tile_len_, 1));
#pragma omp parallel if (numel_ > kParallelThreshold)
    {
      const size_t stride = static_cast<size_t>((tile_len_ + 15) / 16 * 16);
      std::vector<float> scratch(static_cast<size_t>(num_slots_) * stride + 16);
      std::vector<const float*> vals(count);
      std::vector<float*> bufs(count), tile_bufs(count);
      std::vector<int64_t> splat_at(count, -1);
      std::vector<int64_t> coords;
      for (size_t i = 0; i < count; ++i) {
        bufs[i] = scratch.data() + static_cast<size_t>(slot_[i]) * stride;
        if (code_[i].kind == InstrKind::kConst) {
          std::fill(bufs[i], bufs[i] + tile_len_, code_[i].v.value);
        } else if (code_[i].kind == InstrKind::kLoad && modes_[code_[i].v.a] == LoadMode::kSplat) {
          const ProgramLoad& l = p_.loads[code_[i].v.a];
          std::fill(bufs[i], bufs[i] + tile_len_, inputs[l.sources[0]]->data<float>()[l.base]);
        }
        vals[i] = bufs[i];
      }
#pragma omp for schedule(dynamic, chunk)
      for (int64_t t = 0; t < num_tiles_; ++t) {
        int64_t start, n;
        if (row_tiles_) {
          const int64_t row = t / chunks_per_row_;
          const int64_t col = (t % chunks_per_row_) * tile_len_;
          start = row * inner + col;
          n = std::min(tile_len_, inner - col);
        } else {
          start = t * tile_len_;
          n = std::min(tile_len_, numel_ - start);
        }
        for (size_t i = 0; i < count; ++i) {
          const ExecInstr& e = code_[i];
          if (e.kind == InstrKind::kLoad) vals[i] = load(e.v.a, inputs, start, n, bufs[i], splat_at[i], coords);
        }
        // Direct stores: the instruction writes this tile of its output in place.
        for (size_t i = 0; i < count; ++i) {
          tile_bufs[i] = direct_[i] >= 0 ? outputs[direct_[i]]->data<float>() + start : bufs[i];
        }
        hwy_cpu::run_tile(code_.data(), count, vals.data(), tile_bufs.data(), static_cast<size_t>(n));
        for (const ProgramStore& s : p_.stores) {
          if (direct_[s.instr] == s.output && !s.per_row) continue;
          float* o = outputs[s.output]->data<float>();
          if (s.per_row) {
            o[start / inner] = vals[s.instr][0];
          } else {
            std::memcpy(o + start, vals[s.instr], static_cast<size_t>(n) * sizeof(float));
          }
        }
      }
    }
    return Status::ok();
  }

 private:
  int64_t offset_of(const ProgramLoad& l, int64_t flat) const {
    int64_t off = l.base;
    for (size_t k = p_.dims.size(); k-- > 0;) {
      off += (flat % p_.dims[k]) * l.strides[k];
      flat /= p_.dims[k];
    }
    return off;
  }

  const float* load(int li, std::span<const Tensor* const> inputs, int64_t start, int64_t n, float* buf,
                    int64_t& splat_at, std::vector<int64_t>& coords) const {
    const ProgramLoad& l = p_.loads[li];
    const float* src = inputs[l.sources[0]]->data<float>();
    switch (modes_[li]) {
      case LoadMode::kSplat:
        return buf;
      case LoadMode::kContiguous:
        return src + l.base + start;
      case LoadMode::kRowPointer:
        return src + offset_of(l, start);
      case LoadMode::kRowSplat: {
        const int64_t off = offset_of(l, start);
        if (splat_at != off) {
          std::fill(buf, buf + tile_len_, src[off]);
          splat_at = off;
        }
        return buf;
      }
      case LoadMode::kGather:
        gather(l, src, start, n, buf, coords);
        return buf;
      case LoadMode::kTable: {
        const int64_t* table = l.table.data() + start;
        for (int64_t i = 0; i < n; ++i) {
          const int64_t e = table[i];
          if (e < 0) {
            buf[i] = l.pad_value;
          } else {
            buf[i] = inputs[l.sources[e >> 48]]->data<float>()[e & kOffsetMask];
          }
        }
        return buf;
      }
    }
    return buf;
  }

  // buf[0, n) = the load's elements for iteration elements [start, start + n).
  void gather(const ProgramLoad& l, const float* src, int64_t start, int64_t n, float* dst,
              std::vector<int64_t>& index) const {
    const size_t rank = p_.dims.size();
    index.assign(rank, 0);
    int64_t offset = l.base, rem = start;
    for (size_t k = rank; k-- > 0;) {
      index[k] = rem % p_.dims[k];
      rem /= p_.dims[k];
      offset += index[k] * l.strides[k];
    }
    const int64_t inner = p_.dims[rank - 1], stride = l.strides[rank - 1];
    while (n > 0) {
      const int64_t run = std::min(inner - index[rank - 1], n);
      if (stride == 0) {
        std::fill(dst, dst + run, src[offset]);
      } else if (stride == 1) {
        std::memcpy(dst, src + offset, static_cast<size_t>(run) * sizeof(float));
      } else {
        for (int64_t i = 0; i < run; ++i) dst[i] = src[offset + i * stride];
      }
      dst += run;
      n -= run;
      offset += run * stride;
      index[rank - 1] += run;
      if (index[rank - 1] < inner) continue;
      index[rank - 1] = 0;
      offset -= inner * stride;
      for (size_t k = rank - 1; k-- > 0;) {
        offset += l.strides[k];
        if (++index[k] < p_.dims[k]) break;
        offset -= p_.dims[k] * l.strides[k];
        index[k] = 0;
      }
    }
  }

  FusedProgram p_;
  std::vector<ExecInstr> code_;
  std::vector<LoadMode> modes_;
  std::vector<int> direct_;
  std::vector<int> slot_;
  int num_slots_ = 0;
  int64_t numel_ = 0;
  bool row_tiles_ = false;
  int64_t tile_len_ = 1;
  int64_t chunks_per_row_ = 1;
  int64_t num_tiles_ = 0;
};

class HighwayBackend final : public ProgramBackend {
 public:
  std::string_view name() const override { return "hwy"; }
  Result<std::unique_ptr<CompiledProgram>> compile(FusedProgram program) const override {
    OPFUSE_TRY(program.validate());
    if (program.dims.empty()) program.dims.push_back(1);
    for (ProgramLoad& l : program.loads) {
      if (l.affine && l.strides.empty()) l.strides.push_back(0);
      if (!l.affine && static_cast<int64_t>(l.table.size()) != program.numel()) {
        return Status::internal_error("fused program: a table load has no table (lowered without tables?)");
      }
    }
    auto p = std::make_unique<HwyProgram>(std::move(program));
    OPFUSE_TRY(p->prepare());
    return std::unique_ptr<CompiledProgram>(std::move(p));
  }
};

}  // namespace

const ProgramBackend& highway_backend() {
  static const HighwayBackend backend;
  return backend;
}

}  // namespace opfuse::codegen
#endif  // HWY_ONCE
