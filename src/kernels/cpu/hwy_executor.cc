// The Highway backend of FusedProgram: a vector interpreter over cache-resident tiles, in two
// modes.
//
// A tile is a contiguous range of the flattened iteration space: one whole row in row mode
// (programs with reductions), else kTile elements (kept inside one row when rows are long, so
// per-row broadcasts can be read in place). Loads are classified once at compile time: same
// layout as the iteration space (read in place), a splat (filled once per thread), per-row
// contiguous or per-row splat (when tiles stay inside a row), general strides (gathered), or a
// table (Pad/Concat/Gather). A strided load that repeats a short contiguous pattern across a
// tile (a per-channel constant of a blocked nChw16c tensor: its 16 values, over H x W) is
// periodic: its tile buffer is filled once and reused while the pattern stays the same, or, on
// maps smaller than a tile (14x14, 7x7), filled stretch by stretch from each pattern. A table
// whose offsets mostly run on by one (a Concat's sources, a Pad's rows) is kept as runs instead:
// a tile inside one run reads the source in place, others copy their runs; only tables of short
// runs (a Gather) are read element by element. OpenMP splits the tiles (dynamic schedule: the
// host is shared and a descheduled thread would stall a static split).
//
// Register mode (programs without reductions, i.e. everything elementwise/broadcast/injective):
// within a tile, the whole instruction list runs per block of kFusedVectors vectors (RunFused),
// so a block's loads, ops and stores are all in flight together like one hand-written loop.
// Measured (tests/kernels/fused_bench_main.cc): running each instruction over a whole tile
// instead reads each input in bursts, one stream at a time, and loses 25-45% of the memory
// bandwidth even with tiles of 64 elements. Large outputs are written with non-temporal stores.
//
// Tiled mode (row mode: reductions need the whole row): every instruction runs as one tight
// vector loop over the tile (hwy_vector_ops-inl.h, the same code as the elementwise kernel),
// writing a tile buffer that stays in L1/L2; buffers are reused once their value is dead. An
// instruction stored element-wise exactly once writes straight into the output.
//
// Channel-affine mode: a program that is y = x * s + t [then max(y, 0)] with s and t per-channel
// constants of a blocked tensor whose pattern is one vector (a BatchNorm + ReLU no conv absorbed)
// runs per vector in registers (hwy_channel_affine.h), stretch by stretch within each channel
// block: the interpreter moved DenseNet's Concat + BN + ReLU regions at 7-20 GB/s (14x14 maps:
// 50 us for 400 KB), spending two thirds of it dispatching ops block by block.
//
// Both share the per-op vector code (VisitOp); a JIT backend would replace the interpretation
// behind the same ProgramBackend interface.
#ifndef OPFUSE_KERNELS_HWY_EXECUTOR_DECLS_
#define OPFUSE_KERNELS_HWY_EXECUTOR_DECLS_
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/cpu/hwy_executor.h"
#include "kernels/cpu/hwy_vinstr.h"
#include "kernels/cpu/strided_gather.h"

namespace opfuse::hwy_cpu {
struct ExecInstr {
  VInstr v;
  codegen::InstrKind kind;
  ReduceCombiner combiner;
  bool mean;
};

// One tile of a purely elementwise program in register mode (RunFused): every instruction runs
// per block of a few vectors, so all loads and stores of a block are in flight together.
struct FusedTile {
  const ExecInstr* code;
  const float** cur;        // per instruction: its current block (ops, constants: fixed slots)
  const int32_t* ops;       // the computing instructions, in order
  size_t num_ops;
  const int32_t* moving;    // loads whose block moves through the tile
  const float* const* moving_base;  // their tile start
  float* const* moving_pad;  // their tail buffers (a block each)
  size_t num_moving;
  const int32_t* store_instr;  // stores: instruction and tile start in the output
  float* const* store_out;
  const int32_t* op_store;     // per op: the store it writes directly (its only reader), or -1
  const uint8_t* store_written;  // per store: written directly by its op (full blocks)
  size_t num_stores;
  size_t num_prefetch;      // the first moving loads read memory in place: prefetched ahead
  bool stream;              // non-temporal stores (outputs much larger than the cache, aligned)
  size_t n;
};
// Vectors in a register-mode block (one jump per op and block: more vectors amortise it; 16
// measured faster than 8, 8 than 4).
constexpr size_t kFusedVectors = 16;
// Register mode prefetches in-place loads 8 KiB ahead: the interpreter's work per block keeps
// fewer loads in flight than a hand-written loop, and the hardware prefetcher alone left the
// arithmetic chain at ~75% of triad bandwidth (~95% with this).
constexpr size_t kPrefetchFloats = 2048;
}  // namespace opfuse::hwy_cpu
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/hwy_executor.cc"
#include "hwy/cache_control.h"   // FlushStream
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

size_t FusedBlockLen() { return kFusedVectors * hn::Lanes(DF()); }

// Register mode: for each block of kFusedVectors vectors, point the moving loads at it, run
// every op (one jump per op and block; operands are a few vectors in L1), store the outputs.
void RunFused(const FusedTile& t) {
  constexpr size_t U = kFusedVectors;
  const DF d;
  const size_t N = hn::Lanes(d), B = U * N;
  // direct: ops whose only reader is a store write the output block themselves (full blocks
  // only; the tail goes through the slots).
  const auto body = [&](bool direct, size_t j) HWY_ATTR {
    for (size_t k = 0; k < t.num_ops; ++k) {
      const int32_t i = t.ops[k];
      const VInstr& in = t.code[i].v;
      const float* a = t.cur[in.a];
      const float* b = in.b >= 0 ? t.cur[in.b] : a;
      const float* c = in.c >= 0 ? t.cur[in.c] : a;
      const int32_t store = direct ? t.op_store[k] : -1;
      float* o = store >= 0 ? t.store_out[store] + j : const_cast<float*>(t.cur[i]);
      const bool stream = store >= 0 && t.stream;
      VisitOp(in, [&](auto fn, auto arity) HWY_ATTR {
        constexpr int kArity = decltype(arity)::value;
        for (size_t u = 0; u < U; ++u) {
          const VF va = hn::LoadU(d, a + u * N);
          const VF vb = kArity >= 2 ? hn::LoadU(d, b + u * N) : va;
          const VF vc = kArity >= 3 ? hn::LoadU(d, c + u * N) : va;
          if (stream) {
            hn::Stream(fn(va, vb, vc), d, o + u * N);
          } else {
            hn::StoreU(fn(va, vb, vc), d, o + u * N);
          }
        }
      });
    }
  };
  size_t j = 0;
  for (; j + B <= t.n; j += B) {
    for (size_t k = 0; k < t.num_moving; ++k) {
      t.cur[t.moving[k]] = t.moving_base[k] + j;
      if (k < t.num_prefetch) {
        const float* ahead = t.moving_base[k] + j + kPrefetchFloats;
        for (size_t l = 0; l < B; l += 16) hwy::Prefetch(ahead + l);
      }
    }
    body(true, j);
    for (size_t k = 0; k < t.num_stores; ++k) {
      if (t.store_written[k]) continue;
      const float* v = t.cur[t.store_instr[k]];
      float* out = t.store_out[k] + j;
      for (size_t u = 0; u < U; ++u) {
        if (t.stream) {
          hn::Stream(hn::LoadU(d, v + u * N), d, out + u * N);
        } else {
          hn::StoreU(hn::LoadU(d, v + u * N), d, out + u * N);
        }
      }
    }
  }
  if (t.stream) hwy::FlushStream();  // the stored lines are visible before the tile ends
  if (j == t.n) return;
  // The tail: moving loads copied into zero-padded blocks; only the valid part is stored.
  const size_t rest = t.n - j;
  for (size_t k = 0; k < t.num_moving; ++k) {
    float* pad = t.moving_pad[k];
    std::memcpy(pad, t.moving_base[k] + j, rest * sizeof(float));
    std::fill(pad + rest, pad + B, 0.0f);
    t.cur[t.moving[k]] = pad;
  }
  body(false, j);
  for (size_t k = 0; k < t.num_stores; ++k) {
    std::memcpy(t.store_out[k] + j, t.cur[t.store_instr[k]], rest * sizeof(float));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace opfuse::hwy_cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "codegen/index_map.h"
#include "hwy/aligned_allocator.h"
#include "kernels/cpu/hwy_channel_affine.h"

namespace opfuse::hwy_cpu {
HWY_EXPORT(RunTile);
HWY_EXPORT(RunFused);
HWY_EXPORT(FusedBlockLen);
static void run_fused(const FusedTile& t) { HWY_DYNAMIC_DISPATCH(RunFused)(t); }
static size_t fused_block_len() { return HWY_DYNAMIC_DISPATCH(FusedBlockLen)(); }
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
// Outputs at least this large are written with non-temporal stores in register mode: they do
// not fit the cache next to their inputs, so reading their lines first (write-allocate) is waste.
constexpr int64_t kStreamBytes = int64_t{32} << 20;
constexpr int64_t kOffsetMask = (int64_t{1} << 48) - 1;

enum class LoadMode { kContiguous, kSplat, kRowPointer, kRowSplat, kGather, kPeriodic, kTable, kRuns };

// A strided load that repeats, along the flat iteration space, `period` consecutive source
// elements (the dims after the last broadcast dim, read contiguously) for `group` elements
// (those dims and the broadcast dims just before them); zero when the load is not like that.
struct Periodicity {
  int64_t period = 0, group = 0;
};

Periodicity periodicity(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  int64_t q = static_cast<int64_t>(dims.size()) - 1;
  while (q >= 0 && (dims[q] == 1 || strides[q] != 0)) --q;
  if (q < 0) return {};
  int64_t period = 1;
  for (size_t j = dims.size(); j-- > static_cast<size_t>(q) + 1;) {
    if (dims[j] > 1 && strides[j] != period) return {};
    period *= dims[j];
  }
  int64_t group = period;
  for (; q >= 0 && (dims[q] == 1 || strides[q] == 0); --q) group *= dims[q];
  return {period, group};
}

// A stretch of a table load whose elements read consecutive offsets of one source (or the pad
// value): from flat index `start` to the next run's start.
struct TableRun {
  int64_t start;
  int64_t entry;  // the first element's table entry (source << 48 | offset), or -1: pad
};
// Periodic loads whose group is shorter than a tile repeat their pattern at least this often.
constexpr int64_t kMinPeriodicGroup = 8;
// Tables average at least this many elements per run to be kept as runs.
constexpr int64_t kMinMeanRun = 16;

std::vector<TableRun> table_runs(const std::vector<int64_t>& table) {
  std::vector<TableRun> runs;
  for (size_t i = 0; i < table.size(); ++i) {
    const int64_t e = table[i];
    const bool continues = i > 0 && (e < 0 ? table[i - 1] < 0 : table[i - 1] >= 0 && e == table[i - 1] + 1);
    if (!continues) runs.push_back({static_cast<int64_t>(i), e});
  }
  runs.push_back({static_cast<int64_t>(table.size()), -1});  // sentinel: the end of the last run
  return runs;
}

// `len` elements of a pattern of `period` floats at `pattern`, from its element `phase` on:
// the head of the pattern, its start, then the filled part doubled.
void fill_pattern(float* buf, int64_t len, const float* pattern, int64_t period, int64_t phase) {
  const int64_t head = std::min(period - phase, len);
  std::memcpy(buf, pattern + phase, static_cast<size_t>(head) * sizeof(float));
  std::memcpy(buf + head, pattern, static_cast<size_t>(std::min(phase, len - head)) * sizeof(float));
  for (int64_t filled = std::min(period, len); filled < len; filled *= 2) {
    std::memcpy(buf + filled, buf, static_cast<size_t>(std::min(filled, len - filled)) * sizeof(float));
  }
}

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
      std::vector<TableRun> runs;
      if (mode == LoadMode::kTable) {
        runs = table_runs(l.table);
        if (static_cast<int64_t>(runs.size() - 1) * kMinMeanRun <= numel_) mode = LoadMode::kRuns;
      }
      modes_.push_back(mode);
      runs_.push_back(mode == LoadMode::kRuns ? std::move(runs) : std::vector<TableRun>{});
    }
    // Tables kept as runs are not read again.
    for (size_t k = 0; k < p_.loads.size(); ++k) {
      if (modes_[k] == LoadMode::kRuns) std::vector<int64_t>().swap(p_.loads[k].table);
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
    // Flat tiles: a periodic load is filled from its pattern, once per pattern when its group
    // holds for at least a tile, else stretch by stretch in every tile; groups of a few periods
    // would be filled in pieces no longer than the gather's runs.
    periodic_.assign(p_.loads.size(), {});
    for (size_t k = 0; k < p_.loads.size() && !row_tiles_; ++k) {
      if (modes_[k] != LoadMode::kGather) continue;
      const Periodicity pattern = periodicity(p_.dims, p_.loads[k].strides);
      if (pattern.period > 0 && (pattern.group >= tile_len_ || pattern.group >= kMinPeriodicGroup * pattern.period)) {
        modes_[k] = LoadMode::kPeriodic;
        periodic_[k] = pattern;
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
    // Register mode for programs without reductions: loads other than splats move through the
    // tile (in place when contiguous, else from a per-tile gather buffer); every store copies
    // a block of its instruction.
    register_mode_ = !p_.row_mode;
    for (const ProgramStore& s : p_.stores) register_mode_ &= !s.per_row;
    if (register_mode_) {
      int64_t out_bytes = 0;
      for (size_t i = 0; i < count; ++i) {
        if (p_.code[i].kind == InstrKind::kOp) fused_ops_.push_back(static_cast<int32_t>(i));
        if (p_.code[i].kind != InstrKind::kLoad || modes_[p_.code[i].a] == LoadMode::kSplat) continue;
        if (modes_[p_.code[i].a] != LoadMode::kContiguous) gathered_.push_back(static_cast<int32_t>(i));
        if (modes_[p_.code[i].a] == LoadMode::kContiguous) moving_.push_back(static_cast<int32_t>(i));
      }
      num_in_place_ = moving_.size();  // in-place loads first, then the gathered ones
      moving_.insert(moving_.end(), gathered_.begin(), gathered_.end());
      for (const ProgramStore& s : p_.stores) {
        store_instr_.push_back(s.instr);
        out_bytes += numel_ * static_cast<int64_t>(sizeof(float));
      }
      // An op read by nothing but one store writes that output itself (saves a copy per block).
      std::vector<int> readers(count, 0);
      for (const ProgramInstr& in : p_.code) {
        for (int32_t o : {in.a, in.b, in.c}) {
          if (in.kind == InstrKind::kOp && o >= 0) ++readers[o];
        }
      }
      for (const ProgramStore& s : p_.stores) ++readers[s.instr];
      store_written_.assign(p_.stores.size(), 0);
      for (int32_t i : fused_ops_) {
        int32_t store = -1;
        for (size_t k = 0; k < p_.stores.size(); ++k) {
          if (p_.stores[k].instr == i && readers[i] == 1) store = static_cast<int32_t>(k);
        }
        op_store_.push_back(store);
        if (store >= 0) store_written_[store] = 1;
      }
      stream_ = out_bytes >= kStreamBytes;
    }
    affine_ = affine_of();
    return Status::ok();
  }

  std::string_view backend_name() const override { return "hwy"; }
  std::string_view mode() const override {
    return affine_ ? "channel affine" : register_mode_ ? "registers" : "tiles";
  }

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
    if (affine_) return run_affine(*affine_, inputs, outputs);
    if (register_mode_) return run_registers(inputs, outputs);
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
        const auto [start, n] = tile_range(t, inner);
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
  // y = x * s + t [then max(y, 0)] with s and t per-channel constants of a blocked tensor whose
  // pattern is one vector (a BatchNorm no conv absorbed, and its ReLU; x read in place or as a
  // Concat's runs): the program runs per vector in registers (hwy_channel_affine.h) instead of
  // through the interpreter, which moved DenseNet's Concat + BN + ReLU regions at 7-20 GB/s.
  struct Affine {
    int32_t x = -1, s = -1, t = -1;  // load indices
    bool relu = false;
  };

  std::optional<Affine> affine_of() const {
    if (!register_mode_ || row_tiles_ || p_.stores.size() != 1 || p_.stores[0].per_row) return std::nullopt;
    const int64_t lanes = static_cast<int64_t>(hwy_cpu::channel_affine_lanes());
    if (numel_ % lanes != 0 || tile_len_ % lanes != 0) return std::nullopt;
    std::vector<int32_t> ops;
    for (size_t i = 0; i < p_.code.size(); ++i) {
      if (p_.code[i].kind == InstrKind::kReduce) return std::nullopt;
      if (p_.code[i].kind == InstrKind::kOp) ops.push_back(static_cast<int32_t>(i));
    }
    if (ops.size() < 2 || ops.size() > 3) return std::nullopt;
    const auto load_of = [&](int32_t i) { return i >= 0 && p_.code[i].kind == InstrKind::kLoad ? p_.code[i].a : -1; };
    const auto streamed = [&](int32_t i) {
      const int32_t l = load_of(i);
      return l >= 0 && (modes_[l] == LoadMode::kContiguous || modes_[l] == LoadMode::kRuns);
    };
    const auto one_vector = [&](int32_t i) {
      const int32_t l = load_of(i);
      return l >= 0 && modes_[l] == LoadMode::kPeriodic && periodic_[l].period == lanes && periodic_[l].group % lanes == 0;
    };
    const ProgramInstr& mul = p_.code[ops[0]];
    const ProgramInstr& add = p_.code[ops[1]];
    if (mul.op != ScalarOp::kMul || add.op != ScalarOp::kAdd) return std::nullopt;
    Affine a;
    if (streamed(mul.a) && one_vector(mul.b)) {
      a.x = load_of(mul.a), a.s = load_of(mul.b);
    } else if (streamed(mul.b) && one_vector(mul.a)) {
      a.x = load_of(mul.b), a.s = load_of(mul.a);
    } else {
      return std::nullopt;
    }
    if (add.a == ops[0] && one_vector(add.b)) {
      a.t = load_of(add.b);
    } else if (add.b == ops[0] && one_vector(add.a)) {
      a.t = load_of(add.a);
    } else {
      return std::nullopt;
    }
    if (ops.size() == 3) {
      const ProgramInstr& max = p_.code[ops[2]];
      // max(y, +0): a negative y becomes +0 (max(y, -0) would give -0, which the path does not).
      if (max.op != ScalarOp::kMax || max.a != ops[1] || max.b < 0 || p_.code[max.b].kind != InstrKind::kConst ||
          p_.code[max.b].value != 0.0f || std::signbit(p_.code[max.b].value)) {
        return std::nullopt;
      }
      a.relu = true;
    }
    if (p_.stores[0].instr != ops.back() || periodic_[a.s].group != periodic_[a.t].group) return std::nullopt;
    return a;
  }

  Status run_affine(const Affine& a, std::span<const Tensor* const> inputs, std::span<Tensor* const> outputs) const {
    const int64_t inner = p_.dims.back(), group = periodic_[a.s].group;
    const int64_t chunk = std::max<int64_t>(1, 8192 / std::max<int64_t>(tile_len_, 1));
    const ProgramLoad& ls = p_.loads[a.s];
    const ProgramLoad& lt = p_.loads[a.t];
    const float* s = inputs[ls.sources[0]]->data<float>();
    const float* t = inputs[lt.sources[0]]->data<float>();
    float* out = outputs[p_.stores[0].output]->data<float>();
#pragma omp parallel if (numel_ > kParallelThreshold)
    {
      // A tile of x that straddles two Concat sources is copied here (kRuns).
      hwy::AlignedFreeUniquePtr<float[]> buf = hwy::AllocateAligned<float>(static_cast<size_t>(tile_len_));
      std::vector<int64_t> coords;
      int64_t unused = -1;
#pragma omp for schedule(dynamic, chunk)
      for (int64_t tile = 0; tile < num_tiles_; ++tile) {
        const auto [start, n] = tile_range(tile, inner);
        const float* x = load(a.x, inputs, start, n, buf.get(), unused, coords);
        // Stretch by stretch, one channel block each: its pattern is the vector at its start.
        for (int64_t i = start; i < start + n;) {
          const int64_t stop = std::min(start + n, (i / group + 1) * group);
          hwy_cpu::channel_affine(x + (i - start), out + i, static_cast<size_t>(stop - i), s + offset_of(ls, i),
                                  t + offset_of(lt, i), a.relu);
          i = stop;
        }
      }
    }
    return Status::ok();
  }

  // Register mode (no reductions): tiles as in the tiled path, loads that are not in place
  // materialised per tile, then the instruction list per block of vectors (RunFused).
  Status run_registers(std::span<const Tensor* const> inputs, std::span<Tensor* const> outputs) const {
    const size_t count = code_.size();
    const int64_t inner = p_.dims.back();
    const int64_t chunk = std::max<int64_t>(1, 8192 / std::max<int64_t>(tile_len_, 1));
    const size_t block = hwy_cpu::fused_block_len();
#pragma omp parallel if (numel_ > kParallelThreshold)
    {
      // Slots of one block (ops, constants, splats, the tail of moving loads), then one tile
      // buffer per load that is gathered. Slots are a cache line apart more than a block, so
      // a slot just written and the next op's operands do not alias modulo 4 KiB (a store and
      // a later load 4 KiB apart stall as if dependent).
      const size_t tile_stride = static_cast<size_t>((tile_len_ + 15) / 16 * 16);
      const size_t slot_stride = block + 16;
      hwy::AlignedFreeUniquePtr<float[]> scratch = hwy::AllocateAligned<float>(
          static_cast<size_t>(num_slots_) * slot_stride + gathered_.size() * tile_stride + 16);
      float* const slots = scratch.get();
      float* const gather_bufs = slots + static_cast<size_t>(num_slots_) * slot_stride;
      std::vector<const float*> cur(count);
      std::vector<const float*> moving_base(moving_.size());
      std::vector<float*> moving_pad(moving_.size()), store_out(p_.stores.size());
      std::vector<int64_t> splat_at(count, -1), coords;
      for (size_t i = 0; i < count; ++i) {
        float* slot = slots + static_cast<size_t>(slot_[i]) * slot_stride;
        cur[i] = slot;
        if (code_[i].kind == InstrKind::kConst) {
          std::fill(slot, slot + block, code_[i].v.value);
        } else if (code_[i].kind == InstrKind::kLoad && modes_[code_[i].v.a] == LoadMode::kSplat) {
          const ProgramLoad& l = p_.loads[code_[i].v.a];
          std::fill(slot, slot + block, inputs[l.sources[0]]->data<float>()[l.base]);
        }
      }
      for (size_t k = 0; k < moving_.size(); ++k) moving_pad[k] = const_cast<float*>(cur[moving_[k]]);
      hwy_cpu::FusedTile tile{code_.data(), cur.data(), fused_ops_.data(), fused_ops_.size(), moving_.data(),
                              moving_base.data(), moving_pad.data(), moving_.size(), store_instr_.data(),
                              store_out.data(), op_store_.data(), store_written_.data(), store_out.size(),
                              num_in_place_, false, 0};
#pragma omp for schedule(dynamic, chunk)
      for (int64_t t = 0; t < num_tiles_; ++t) {
        const auto [start, n] = tile_range(t, inner);
        size_t g = 0;
        for (size_t k = 0; k < moving_.size(); ++k) {
          const int32_t i = moving_[k];
          float* buf = modes_[code_[i].v.a] == LoadMode::kContiguous ? nullptr : gather_bufs + (g++) * tile_stride;
          moving_base[k] = load(code_[i].v.a, inputs, start, n, buf, splat_at[i], coords);
        }
        bool aligned = true;
        for (size_t k = 0; k < store_out.size(); ++k) {
          store_out[k] = outputs[p_.stores[k].output]->data<float>() + start;
          aligned &= reinterpret_cast<uintptr_t>(store_out[k]) % 64 == 0;
        }
        tile.stream = stream_ && aligned;
        tile.n = static_cast<size_t>(n);
        hwy_cpu::run_fused(tile);
      }
    }
    return Status::ok();
  }

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
      case LoadMode::kPeriodic: {
        const auto [period, group] = periodic_[li];
        const int64_t phase = start % period;
        if (start / group == (start + n - 1) / group) {
          // The tile's buffer holds the pattern from this phase on, for a whole tile.
          const int64_t from = offset_of(l, start - phase);
          const int64_t key = from * period + phase;
          if (splat_at != key) {
            fill_pattern(buf, tile_len_, src + from, period, phase);
            splat_at = key;
          }
          return buf;
        }
        // A tile across patterns (groups shorter than a tile: a per-channel constant of a
        // blocked map of 14x14 or 7x7): each group's stretch filled from its own pattern.
        for (int64_t i = start; i < start + n;) {
          const int64_t stop = std::min(start + n, (i / group + 1) * group);
          fill_pattern(buf + (i - start), stop - i, src + offset_of(l, i - i % period), period, i % period);
          i = stop;
        }
        splat_at = -1;
        return buf;
      }
      case LoadMode::kGather:
        gather_strided(p_.dims, l.strides, l.base, start, n, buf, coords, [src](int64_t e) { return src[e]; }, src);
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
      case LoadMode::kRuns: {
        const std::vector<TableRun>& runs = runs_[li];
        auto run = std::upper_bound(runs.begin(), runs.end(), start,
                                    [](int64_t s, const TableRun& r) { return s < r.start; }) - 1;
        const int64_t end = start + n;
        const auto source_at = [&](int64_t entry, int64_t skip) {
          return inputs[l.sources[entry >> 48]]->data<float>() + (entry & kOffsetMask) + skip;
        };
        if (run->entry >= 0 && end <= (run + 1)->start) return source_at(run->entry, start - run->start);
        for (int64_t i = start; i < end; ++run) {
          const int64_t stop = std::min(end, (run + 1)->start);
          if (run->entry < 0) {
            std::fill(buf + (i - start), buf + (stop - start), l.pad_value);
          } else {
            std::memcpy(buf + (i - start), source_at(run->entry, i - run->start), static_cast<size_t>(stop - i) * sizeof(float));
          }
          i = stop;
        }
        return buf;
      }
    }
    return buf;
  }


  FusedProgram p_;
  std::optional<Affine> affine_;
  bool register_mode_ = false;
  size_t num_in_place_ = 0;
  bool stream_ = false;
  std::vector<int32_t> fused_ops_, moving_, gathered_, store_instr_, op_store_;
  std::vector<uint8_t> store_written_;
  std::vector<ExecInstr> code_;
  std::vector<LoadMode> modes_;
  std::vector<std::vector<TableRun>> runs_;  // per load: its table's runs (kRuns)
  std::vector<Periodicity> periodic_;        // per load: its pattern (kPeriodic)
  std::vector<int> direct_;
  std::vector<int> slot_;
  int num_slots_ = 0;
  int64_t numel_ = 0;
  // Tile t's first flat element and length: whole-row chunks in row mode, else flat slices.
  std::pair<int64_t, int64_t> tile_range(int64_t t, int64_t inner) const {
    if (!row_tiles_) {
      const int64_t start = t * tile_len_;
      return {start, std::min(tile_len_, numel_ - start)};
    }
    const int64_t col = (t % chunks_per_row_) * tile_len_;
    return {t / chunks_per_row_ * inner + col, std::min(tile_len_, inner - col)};
  }

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
