// FusedProgram helpers: element count, a readable listing, and structural validation.
#include "codegen/fused_program.h"

#include <sstream>

namespace opfuse::codegen {

int64_t FusedProgram::numel() const { return numel_of(dims); }

namespace {
std::string_view combiner_name(ReduceCombiner c) {
  switch (c) {
    case ReduceCombiner::kSum: return "sum";
    case ReduceCombiner::kMax: return "max";
    case ReduceCombiner::kMin: return "min";
    case ReduceCombiner::kProd: return "prod";
    default: return "none";
  }
}
}  // namespace

std::string FusedProgram::to_string() const {
  std::ostringstream os;
  os << "program " << dims_to_string(dims) << (row_mode ? " rows" : "") << "\n";
  for (size_t i = 0; i < code.size(); ++i) {
    const ProgramInstr& in = code[i];
    os << "  %" << i << " = ";
    switch (in.kind) {
      case InstrKind::kLoad: {
        const ProgramLoad& l = loads[in.a];
        os << "load in" << l.sources[0];
        for (size_t s = 1; s < l.sources.size(); ++s) os << ",in" << l.sources[s];
        if (l.affine) {
          os << " base " << l.base << " strides " << dims_to_string(l.strides);
        } else {
          os << " table";
        }
        break;
      }
      case InstrKind::kConst: os << "const " << in.value; break;
      case InstrKind::kReduce:
        os << "reduce_" << (in.mean ? "mean" : combiner_name(in.combiner)) << "(%" << in.a << ")";
        break;
      case InstrKind::kOp: {
        os << scalar_op_name(in.op) << "(";
        const int32_t ops[3] = {in.a, in.b, in.c};
        for (int k = 0; k < scalar_op_arity(in.op); ++k) os << (k ? ", %" : "%") << ops[k];
        os << ")";
        break;
      }
    }
    os << "\n";
  }
  for (const ProgramStore& s : stores) {
    os << "  store %" << s.instr << " -> out" << s.output << (s.per_row ? " per row" : "") << "\n";
  }
  return os.str();
}

Status FusedProgram::validate() const {
  auto bad = [](const std::string& what) { return Status::internal_error("malformed fused program: " + what); };
  const int32_t count = static_cast<int32_t>(code.size());
  for (int32_t i = 0; i < count; ++i) {
    const ProgramInstr& in = code[i];
    if (in.kind == InstrKind::kLoad) {
      if (in.a < 0 || in.a >= static_cast<int32_t>(loads.size())) return bad(str_cat("load %", i));
      continue;
    }
    if (in.kind == InstrKind::kConst) continue;
    const int arity = in.kind == InstrKind::kReduce ? 1 : scalar_op_arity(in.op);
    if (in.kind == InstrKind::kReduce && !row_mode) return bad("reduction outside row mode");
    const int32_t ops[3] = {in.a, in.b, in.c};
    for (int k = 0; k < 3; ++k) {
      const bool ok = k < arity ? (ops[k] >= 0 && ops[k] < i) : ops[k] < 0;
      if (!ok) return bad(str_cat("operands of %", i));
    }
  }
  for (const ProgramLoad& l : loads) {
    if (l.sources.empty()) return bad("load without source");
    for (int s : l.sources) {
      if (s < 0 || s >= static_cast<int>(input_dims.size())) return bad("load source");
    }
    if (l.affine && !l.strides.empty() && l.strides.size() != dims.size()) return bad("load strides");
    if (!l.affine && !l.table.empty() && static_cast<int64_t>(l.table.size()) != numel()) return bad("load table size");
    // Every element a load can reach lies inside its sources.
    if (l.affine && !l.strides.empty()) {
      int64_t lo = l.base, hi = l.base;
      for (size_t j = 0; j < dims.size(); ++j) {
        if (dims[j] == 0) continue;
        (l.strides[j] < 0 ? lo : hi) += l.strides[j] * (dims[j] - 1);
      }
      if (numel() > 0 && (lo < 0 || hi >= numel_of(input_dims[l.sources[0]]))) return bad("load out of bounds");
    }
    for (int64_t e : l.table) {
      if (e < 0) continue;
      const int64_t src = e >> 48, off = e & ((int64_t{1} << 48) - 1);
      if (src >= static_cast<int64_t>(l.sources.size()) || off >= numel_of(input_dims[l.sources[src]])) {
        return bad("table entry out of bounds");
      }
    }
  }
  for (const ProgramStore& s : stores) {
    if (s.instr < 0 || s.instr >= count || s.output < 0 || s.output >= static_cast<int>(output_dims.size())) {
      return bad("store");
    }
  }
  return Status::ok();
}

}  // namespace opfuse::codegen
