// FusedProgram: what a fused region computes, as data a backend can execute or compile.
//
//   iteration space  dims[0..r)  (static); with reductions the last dim is the reduced axis and
//                    the program runs row by row (a row = all of dims[r-1] for fixed leading
//                    coordinates), else over flat tiles of the whole space.
//   loads            region input j read at an index map from the iteration coordinates:
//                    affine (offset = base + sum_k strides[k] * c[k], stride 0 = broadcast) or,
//                    for Pad/Concat/Gather and reshapes that do not stay affine, a table of
//                    offsets precomputed at compile time (source and offset per element, or
//                    "pad value").
//   code             SSA list: loads, constants, per-element ops (ScalarOp, composed from the
//                    OpDef scalar expressions of the members), and reductions along the last
//                    axis whose result is the same for every element of a row (row-wise
//                    consumers read it as a broadcast).
//   stores           an instruction's values written to region output j, per element, or once
//                    per row for row-level values (a reduction output with keepdims).
//
// Backends implement ProgramBackend: today the Highway interpreter over cache-resident tiles
// (kernels/cpu/hwy_executor.h); a JIT emitting native code per program fits the same interface.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/op_def.h"
#include "ops/scalar_expr.h"

namespace opfuse::codegen {

struct ProgramLoad {
  // Region inputs this load reads: one, except for a Concat (several sources).
  std::vector<int> sources;
  bool affine = true;
  int64_t base = 0;
  std::vector<int64_t> strides;  // affine: per iteration dim, in elements of the source
  // Table form: per iteration element, source index << 48 | offset, or -1 for the pad value.
  std::vector<int64_t> table;
  float pad_value = 0;
};

enum class InstrKind : uint8_t { kLoad, kConst, kOp, kReduce };

struct ProgramInstr {
  InstrKind kind = InstrKind::kOp;
  ScalarOp op = ScalarOp::kAdd;      // kOp
  int32_t a = -1, b = -1, c = -1;    // operands (instruction indices); kLoad: a = load index
  float value = 0;                   // kConst
  ReduceCombiner combiner = ReduceCombiner::kNone;  // kReduce over operand a along the row
  bool mean = false;                 // kReduce: divide by the row length
};

struct ProgramStore {
  int32_t instr = -1;
  int output = 0;
  bool per_row = false;  // one value per row (the output has the reduced dim as 1 or dropped)
};

struct FusedProgram {
  std::vector<int64_t> dims;
  bool row_mode = false;  // has reductions: runs row by row, rows of dims.back() elements
  std::vector<ProgramLoad> loads;
  std::vector<ProgramInstr> code;
  std::vector<ProgramStore> stores;
  std::vector<std::vector<int64_t>> input_dims;   // per region input
  std::vector<std::vector<int64_t>> output_dims;  // per region output

  int64_t numel() const;
  // One line per instruction, for tests and `--print-after-all` style debugging.
  std::string to_string() const;
  // Checks operand indices, load sources and store targets: a malformed program is an
  // internal error, never a crash in a backend.
  Status validate() const;
};

// A program ready to run: f32 inputs and outputs of the planned dims.
class CompiledProgram {
 public:
  virtual ~CompiledProgram() = default;
  virtual Status run(std::span<const Tensor* const> inputs, std::span<Tensor* const> outputs) const = 0;
  virtual std::string_view backend_name() const = 0;
  // How the backend runs this program (profiles show it beside the kernel); empty if one way.
  virtual std::string_view mode() const { return {}; }
};

class ProgramBackend {
 public:
  virtual ~ProgramBackend() = default;
  virtual std::string_view name() const = 0;
  virtual Result<std::unique_ptr<CompiledProgram>> compile(FusedProgram program) const = 0;
};

}  // namespace opfuse::codegen
