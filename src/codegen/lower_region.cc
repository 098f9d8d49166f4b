// Lowering a region's member subgraph into a FusedProgram by inlining from the outputs (see
// lower_region.h). Each (value, index map) pair is emitted once (memoised by the map's text), so a
// value read through two different maps is computed twice; LowerStats counts how often that
// duplicates an expensive op, and region fusion bounds it.
#include "codegen/lower_region.h"

#include <algorithm>
#include <map>
#include <set>

#include "codegen/index_map.h"
#include "ops/elementwise_common.h"
#include "ops/slice_bounds.h"

namespace opfuse::codegen {
namespace {

class Lowerer {
 public:
  Lowerer(const Graph& body, const std::vector<const Tensor*>& constants, const LowerOptions& options)
      : body_(body), constants_(constants), options_(options) {
    for (size_t i = 0; i < body.inputs().size(); ++i) input_index_[body.inputs()[i]] = static_cast<int>(i);
  }

  Result<FusedProgram> run(LowerStats* stats) {
    for (const Value* v : body_.inputs()) {
      OPFUSE_ASSIGN_OR_RETURN(auto d, dims_of(v));
      prog_.input_dims.push_back(std::move(d));
    }
    for (const Value* v : body_.outputs()) {
      OPFUSE_ASSIGN_OR_RETURN(auto d, dims_of(v));
      prog_.output_dims.push_back(std::move(d));
    }
    OPFUSE_TRY(choose_iteration_space());
    const size_t r = prog_.dims.size();
    for (size_t j = 0; j < body_.outputs().size(); ++j) {
      const Value* o = body_.outputs()[j];
      const std::vector<int64_t>& od = prog_.output_dims[j];
      IndexChain chain;
      bool per_row = false;
      if (od != prog_.dims) {
        std::vector<int64_t> lead(prog_.dims.begin(), prog_.dims.end() - (r ? 1 : 0));
        std::vector<int64_t> lead1 = lead;
        lead1.push_back(1);
        if (!prog_.row_mode || (od != lead && od != lead1)) {
          return Status::user_error(str_cat("output ", o->name(), " has dims ", dims_to_string(od),
                                            ", not those of the iteration space ", dims_to_string(prog_.dims)));
        }
        per_row = true;
        chain.push_back(drop_last_map(od.size()));
      }
      OPFUSE_ASSIGN_OR_RETURN(int32_t id, emit(o, chain));
      prog_.stores.push_back(ProgramStore{id, static_cast<int>(j), per_row});
    }
    if (stats) {
      stats->table_bytes = table_elems_ * 8;
      for (const auto& [node, count] : expensive_emits_) stats->duplicated_expensive += count - 1;
    }
    OPFUSE_TRY(prog_.validate());
    return std::move(prog_);
  }

 private:
  Result<std::vector<int64_t>> dims_of(const Value* v) const {
    if (v->dtype != DType::kF32) {
      return Status::user_error(str_cat("value ", v->name(), " is ", dtype_name(v->dtype), ", not f32"));
    }
    if (!v->shape) return Status::user_error(str_cat("value ", v->name(), " has no shape"));
    auto d = static_dims(*v->shape);
    if (!d) return Status::user_error(str_cat("value ", v->name(), " has a dynamic shape"));
    return *d;
  }

  const Tensor* constant_of(const Value* v) const {
    if (v == nullptr) return nullptr;
    auto it = input_index_.find(v);
    if (it != input_index_.end()) return constants_[it->second];
    return v->constant();
  }

  // Reductions decide the iteration space: the row is the reduced axis. Without them it is the
  // largest output.
  Status choose_iteration_space() {
    int64_t best = -1;
    for (const auto& d : prog_.output_dims) {
      if (numel_of(d) > best) {
        best = numel_of(d);
        prog_.dims = d;
      }
    }
    for (const Node* n : body_.nodes()) {
      if (n->def().kind != FusionKind::kReduction) continue;
      prog_.row_mode = true;
      OPFUSE_ASSIGN_OR_RETURN(auto in, dims_of(n->input(0)));
      if (numel_of(in) > best) {
        best = numel_of(in);
        prog_.dims = in;
      }
    }
    if (prog_.row_mode && (prog_.dims.empty() || prog_.dims.back() > options_.max_row)) {
      return Status::user_error(str_cat("reduction rows of ", prog_.dims.empty() ? 0 : prog_.dims.back(),
                                        " elements exceed the tile limit ", options_.max_row));
    }
    return Status::ok();
  }

  // Iteration coordinates -> a per-row value's coordinates (last dim 1 or dropped).
  Transform drop_last_map(size_t out_rank) const {
    const size_t r = prog_.dims.size();
    Transform t{Transform::Kind::kAffine, {}, {}, {}, {}, 0};
    t.in_dims.assign(out_rank, 1);
    t.a.assign(out_rank * r, 0);
    t.b.assign(out_rank, 0);
    for (size_t k = 0; k + 1 < r && k < out_rank; ++k) {
      t.a[k * r + k] = 1;
      t.in_dims[k] = prog_.dims[k];
    }
    return t;
  }

  static std::string chain_key(const IndexChain& chain) {
    std::string key;
    for (const Transform& t : chain) key += t.key() + ";";
    return key;
  }

  int32_t push(ProgramInstr in) {
    prog_.code.push_back(in);
    return static_cast<int32_t>(prog_.code.size() - 1);
  }

  // Affine chains are replaced by their composition, so two paths reaching a value through the
  // same map (x read directly and as a reduction operand) share one evaluation.
  Result<int32_t> emit(const Value* v, IndexChain chain) {
    if (v->shape && !chain.empty()) {
      auto vd = static_dims(*v->shape);
      if (vd) {
        if (auto m = compose_affine(chain, prog_.dims)) {
          const size_t r = prog_.dims.size();
          Transform t{Transform::Kind::kAffine, *vd, {}, {}, m->b, 0};
          t.a.assign(vd->size() * r, 0);
          for (size_t k = 0; k < vd->size(); ++k) {
            if ((*vd)[k] == 1) {
              t.b[k] = 0;
              continue;
            }
            for (size_t j = 0; j < r; ++j) t.a[k * r + j] = prog_.dims[j] == 1 ? 0 : m->A[k][j];
          }
          bool identity = vd->size() == r && *vd == prog_.dims;
          for (size_t k = 0; identity && k < r; ++k) {
            for (size_t j = 0; j < r; ++j) identity &= t.a[k * r + j] == ((k == j && prog_.dims[j] != 1) ? 1 : 0);
            identity &= t.b[k] == 0;
          }
          chain = identity ? IndexChain{} : IndexChain{t};
        }
      }
    }
    const std::string key = v->name() + "@" + chain_key(chain);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    OPFUSE_ASSIGN_OR_RETURN(int32_t id, emit_uncached(v, chain));
    memo_[key] = id;
    return id;
  }

  Result<int32_t> emit_uncached(const Value* v, const IndexChain& chain) {
    if (v->is_constant() && v->producer() == nullptr && !input_index_.count(v)) {
      const Tensor* t = v->constant();
      if (t->dtype() != DType::kF32 || t->numel() != 1) {
        return Status::user_error(str_cat("constant ", v->name(), " inside the region is not an f32 scalar"));
      }
      ProgramInstr c;
      c.kind = InstrKind::kConst;
      c.value = t->data<float>()[0];
      return push(c);
    }
    if (auto it = input_index_.find(v); it != input_index_.end()) return load({it->second}, chain, 0.0f);
    const Node* n = v->producer();
    if (n == nullptr) return Status::user_error(str_cat("value ", v->name(), " has no producer in the region"));
    OPFUSE_ASSIGN_OR_RETURN(auto out_dims, dims_of(v));
    const OpDef& def = n->def();
    const std::string& op = n->op_type();
    if (def.scalar != nullptr && def.reference == nullptr) {  // built-in or custom elementwise
      return emit_elementwise(*n, out_dims, chain);
    }
    if (def.kind == FusionKind::kReduction) return emit_reduce(*n, out_dims, chain);
    if (!n->domain().empty()) return Status::user_error(str_cat(n->describe(), " cannot be fused"));
    const Value* x = n->input(0);
    OPFUSE_ASSIGN_OR_RETURN(auto in_dims, dims_of(x));
    IndexChain next = chain;
    Transform t{Transform::Kind::kReshape, in_dims, out_dims, {}, {}, 0};
    // A view (Reshape, Squeeze, Flatten, Identity ...) reads its input's elements in order;
    // Dropout's mask output is not one.
    if (def.traits.output_is_view && v->producer_output() == 0) {
      if (in_dims != out_dims) next.push_back(t);
      return emit(x, next);
    }
    if (op == "Expand") {
      t.kind = Transform::Kind::kBroadcast;
      next.push_back(t);
      return emit(x, next);
    }
    if (op == "Transpose") {
      t.kind = Transform::Kind::kTranspose;
      AttrReader attrs(*n);
      if (attrs.has("perm")) {
        t.a = attrs.get_ints("perm");
      } else {
        for (size_t k = in_dims.size(); k-- > 0;) t.a.push_back(static_cast<int64_t>(k));
      }
      if (!normalize_permutation(t.a, static_cast<int64_t>(in_dims.size()))) {
        return Status::user_error(str_cat(n->describe(), ": bad perm"));
      }
      next.push_back(t);
      return emit(x, next);
    }
    if (op == "Slice") {
      OPFUSE_TRY(slice_params(*n, in_dims, t));
      next.push_back(t);
      return emit(x, next);
    }
    if (op == "Pad" || op == "Concat" || op == "Gather") return emit_table_op(*n, in_dims, out_dims, chain);
    return Status::user_error(str_cat(n->describe(), " is not fusible"));
  }

  Result<int32_t> emit_elementwise(const Node& n, const std::vector<int64_t>& out_dims, const IndexChain& chain) {
    const ScalarExpr expr = n.def().scalar(ScalarExprContext{AttrReader(n), n});
    std::vector<int32_t> ids(expr.code.size(), -1);
    std::map<int, int32_t> args;
    bool expensive = false;
    for (size_t i = 0; i < expr.code.size(); ++i) {
      const ScalarInstr& s = expr.code[i];
      if (s.op == ScalarOp::kArg) {
        const Value* in = n.input(static_cast<size_t>(s.a));
        if (in == nullptr) return Status::user_error(str_cat(n.describe(), " reads an absent input"));
        if (!args.count(s.a)) {
          OPFUSE_ASSIGN_OR_RETURN(auto in_dims, dims_of(in));
          IndexChain next = chain;
          if (in_dims != out_dims) next.push_back(Transform{Transform::Kind::kBroadcast, in_dims, out_dims, {}, {}, 0});
          OPFUSE_ASSIGN_OR_RETURN(args[s.a], emit(in, next));
        }
        ids[i] = args[s.a];
        continue;
      }
      ProgramInstr p;
      if (s.op == ScalarOp::kConst) {
        p.kind = InstrKind::kConst;
        p.value = static_cast<float>(s.value);
      } else {
        p.kind = InstrKind::kOp;
        p.op = s.op;
        const int arity = scalar_op_arity(s.op);
        const int32_t operands[3] = {s.a, s.b, s.c};
        int32_t* dst[3] = {&p.a, &p.b, &p.c};
        for (int k = 0; k < arity; ++k) {
          if (operands[k] < 0 || operands[k] >= static_cast<int32_t>(i)) {
            return Status::internal_error(str_cat(n.describe(), ": malformed scalar expression"));
          }
          *dst[k] = ids[operands[k]];
        }
        expensive |= ew::is_transcendental(s.op);
      }
      ids[i] = push(p);
    }
    if (expensive) ++expensive_emits_[&n];
    return ids.back();
  }

  Result<int32_t> emit_reduce(const Node& n, const std::vector<int64_t>& out_dims, const IndexChain& chain) {
    const ReduceSpec& spec = n.def().reduce;
    if (spec.combiner != ReduceCombiner::kSum && spec.combiner != ReduceCombiner::kMax &&
        spec.combiner != ReduceCombiner::kMin) {
      return Status::user_error(str_cat(n.describe(), ": only sum/mean/max/min reductions fuse"));
    }
    const Value* x = n.input(0);
    OPFUSE_ASSIGN_OR_RETURN(auto in_dims, dims_of(x));
    OPFUSE_ASSIGN_OR_RETURN(int64_t axis, single_axis(n, in_dims));
    const int64_t rank = static_cast<int64_t>(in_dims.size());
    const size_t r = prog_.dims.size();
    if (axis != rank - 1 || in_dims.back() != prog_.dims.back()) {
      return Status::user_error(str_cat(n.describe(), " reduces axis ", axis, " of ", dims_to_string(in_dims),
                                        ", not the row of the iteration space ", dims_to_string(prog_.dims)));
    }
    const bool keepdims = AttrReader(n).get_int("keepdims") != 0;
    auto m = compose_affine(chain, prog_.dims);
    if (!m) return Status::user_error(str_cat(n.describe(), ": its output is read through a non-affine map"));
    for (size_t k = 0; k < m->rank(); ++k) {
      if (m->A[k][r - 1] != 0) {
        return Status::user_error(str_cat(n.describe(), ": its output varies along the reduced row"));
      }
    }
    // The operand's map: the kept dims as for the output, the reduced axis along the row.
    Transform t{Transform::Kind::kAffine, in_dims, in_dims, {}, {}, 0};
    t.a.assign(static_cast<size_t>(rank) * r, 0);
    t.b.assign(static_cast<size_t>(rank), 0);
    for (int64_t k = 0; k + 1 < rank; ++k) {
      for (size_t j = 0; j < r; ++j) t.a[k * r + j] = m->A[k][j];
      t.b[k] = m->b[k];
    }
    t.a[(rank - 1) * r + (r - 1)] = 1;
    (void)keepdims;  // with or without the kept 1, the leading rows of m are the kept dims
    OPFUSE_ASSIGN_OR_RETURN(int32_t operand, emit(x, IndexChain{t}));
    ProgramInstr p;
    p.kind = InstrKind::kReduce;
    p.a = operand;
    p.combiner = spec.combiner;
    p.mean = spec.divide_by_count;
    (void)out_dims;
    return push(p);
  }

  Result<int64_t> single_axis(const Node& n, const std::vector<int64_t>& in_dims) const {
    std::vector<int64_t> axes;
    AttrReader attrs(n);
    if (n.def().max_inputs >= 2) {
      const Tensor* t = constant_of(n.input(1));
      if (n.input(1) == nullptr || t == nullptr) return Status::user_error(str_cat(n.describe(), ": axes not constant"));
      axes = t->to_int_vector();
    } else if (attrs.has("axes")) {
      axes = attrs.get_ints("axes");
    }
    const int64_t rank = static_cast<int64_t>(in_dims.size());
    if (axes.size() != 1) {
      // All non-trivial dims but the last may be size 1: a reduction over them all is a row.
      std::vector<int64_t> nontrivial;
      for (int64_t a : axes) {
        const int64_t na = a < 0 ? a + rank : a;
        if (na >= 0 && na < rank && in_dims[na] != 1) nontrivial.push_back(na);
      }
      if (axes.empty() || nontrivial.size() != 1) {
        return Status::user_error(str_cat(n.describe(), ": reduces more than one axis"));
      }
      return nontrivial[0];
    }
    int64_t a = axes[0] < 0 ? axes[0] + rank : axes[0];
    if (a < 0 || a >= rank) return Status::user_error(str_cat(n.describe(), ": bad axis"));
    return a;
  }

  Status slice_params(const Node& n, const std::vector<int64_t>& in_dims, Transform& t) const {
    const size_t rank = in_dims.size();
    t.kind = Transform::Kind::kSlice;
    t.a.assign(rank, 0);
    t.b.assign(rank, 1);
    const Tensor* starts = constant_of(n.input(1));
    const Tensor* axes_t = constant_of(n.input(3));
    const Tensor* steps_t = constant_of(n.input(4));
    if (starts == nullptr || (n.input(3) && !axes_t) || (n.input(4) && !steps_t)) {
      return Status::user_error(str_cat(n.describe(), ": slice parameters are not constant"));
    }
    const auto s = starts->to_int_vector();
    std::vector<int64_t> axes = axes_t ? axes_t->to_int_vector() : std::vector<int64_t>{};
    if (!axes_t) {
      for (size_t k = 0; k < s.size(); ++k) axes.push_back(static_cast<int64_t>(k));
    }
    const auto steps = steps_t ? steps_t->to_int_vector() : std::vector<int64_t>(s.size(), 1);
    if (axes.size() != s.size() || steps.size() != s.size()) return Status::user_error(str_cat(n.describe(), ": bad slice"));
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t a = axes[i] < 0 ? axes[i] + static_cast<int64_t>(rank) : axes[i];
      if (a < 0 || a >= static_cast<int64_t>(rank) || steps[i] == 0) return Status::user_error(str_cat(n.describe(), ": bad slice"));
      const int64_t dim = in_dims[a];
      int64_t st = s[i] < 0 ? s[i] + dim : s[i];
      st = steps[i] > 0 ? std::clamp<int64_t>(st, 0, dim) : std::clamp<int64_t>(st, 0, dim - 1);
      t.a[a] = st;
      t.b[a] = bounded_slice_step(steps[i], dim);
    }
    return Status::ok();
  }

  Result<int32_t> emit_table_op(const Node& n, const std::vector<int64_t>& in_dims,
                                const std::vector<int64_t>& out_dims, const IndexChain& chain) {
    const std::string& op = n.op_type();
    IndexChain next = chain;
    Transform t{Transform::Kind::kPad, in_dims, out_dims, {}, {}, 0};
    std::vector<int> sources;
    float pad_value = 0;
    auto leaf = [&](const Value* v) -> Result<int> {
      auto it = input_index_.find(v);
      if (it == input_index_.end()) {
        return Status::user_error(str_cat(n.describe(), " reads a value computed inside the region"));
      }
      return it->second;
    };
    if (op == "Pad") {
      AttrReader attrs(n);
      if (attrs.get_string("mode") != "constant") return Status::user_error(str_cat(n.describe(), ": only constant padding fuses"));
      const Tensor* pads = constant_of(n.input(1));
      if (pads == nullptr) return Status::user_error(str_cat(n.describe(), ": pads not constant"));
      const auto p = pads->to_int_vector();
      if (p.size() != 2 * in_dims.size()) return Status::user_error(str_cat(n.describe(), ": bad pads"));
      for (size_t k = 0; k < in_dims.size(); ++k) {
        if (p[k] < 0 || p[k + in_dims.size()] < 0) return Status::user_error(str_cat(n.describe(), ": negative pads"));
        t.a.push_back(p[k]);
      }
      if (n.input(2)) {
        const Tensor* cv = constant_of(n.input(2));
        if (cv == nullptr || cv->dtype() != DType::kF32 || cv->numel() != 1) {
          return Status::user_error(str_cat(n.describe(), ": pad value not a constant f32"));
        }
        pad_value = cv->data<float>()[0];
      }
      OPFUSE_ASSIGN_OR_RETURN(int s, leaf(n.input(0)));
      sources.push_back(s);
    } else if (op == "Concat") {
      t.kind = Transform::Kind::kConcat;
      int64_t axis = AttrReader(n).get_int("axis");
      if (axis < 0) axis += static_cast<int64_t>(out_dims.size());
      t.axis = axis;
      for (const Value* v : n.inputs()) {
        OPFUSE_ASSIGN_OR_RETURN(auto d, dims_of(v));
        t.b.push_back(d[axis]);
        OPFUSE_ASSIGN_OR_RETURN(int s, leaf(v));
        sources.push_back(s);
      }
    } else {  // Gather with constant indices
      t.kind = Transform::Kind::kGather;
      int64_t axis = AttrReader(n).get_int("axis");
      if (axis < 0) axis += static_cast<int64_t>(in_dims.size());
      t.axis = axis;
      const Tensor* idx = constant_of(n.input(1));
      if (idx == nullptr) return Status::user_error(str_cat(n.describe(), ": indices not constant"));
      t.b = idx->dims();
      for (int64_t i : idx->to_int_vector()) {
        const int64_t ni = i < 0 ? i + in_dims[axis] : i;
        if (ni < 0 || ni >= in_dims[axis]) return Status::user_error(str_cat(n.describe(), ": index out of range"));
        t.a.push_back(ni);
      }
      OPFUSE_ASSIGN_OR_RETURN(int s, leaf(n.input(0)));
      sources.push_back(s);
    }
    next.push_back(t);
    return load(sources, next, pad_value, /*force_table=*/true);
  }

  Result<int32_t> load(std::vector<int> sources, const IndexChain& chain, float pad_value, bool force_table = false) {
    ProgramLoad l;
    l.sources = std::move(sources);
    l.pad_value = pad_value;
    const std::vector<int64_t>& leaf_dims = prog_.input_dims[l.sources[0]];
    std::optional<AffineMap> m;
    if (!force_table) m = compose_affine(chain, prog_.dims);
    if (m) {
      const std::vector<int64_t> R = row_major_strides(leaf_dims);
      l.strides.assign(prog_.dims.size(), 0);
      for (size_t k = 0; k < m->rank(); ++k) {
        if (leaf_dims[k] == 1) continue;
        l.base += R[k] * m->b[k];
        for (size_t j = 0; j < prog_.dims.size(); ++j) l.strides[j] += R[k] * m->A[k][j];
      }
      for (size_t j = 0; j < prog_.dims.size(); ++j) {
        if (prog_.dims[j] == 1) l.strides[j] = 0;
      }
    } else {
      l.affine = false;
      const int64_t total = prog_.numel();
      table_elems_ += total;
      if (options_.build_tables) {
        l.table.resize(static_cast<size_t>(total));
        std::vector<int64_t> c(prog_.dims.size(), 0);
        for (int64_t i = 0; i < total; ++i) {
          Resolved res = resolve(chain, c);
          if (res.pad) {
            l.table[i] = -1;
          } else {
            const auto R = row_major_strides(prog_.input_dims[l.sources[res.source]]);
            int64_t off = 0;
            for (size_t k = 0; k < res.coords.size(); ++k) off += R[k] * res.coords[k];
            l.table[i] = (static_cast<int64_t>(res.source) << 48) | off;
          }
          for (size_t k = c.size(); k-- > 0;) {
            if (++c[k] < prog_.dims[k]) break;
            c[k] = 0;
          }
        }
      }
    }
    prog_.loads.push_back(std::move(l));
    ProgramInstr p;
    p.kind = InstrKind::kLoad;
    p.a = static_cast<int32_t>(prog_.loads.size() - 1);
    return push(p);
  }

  const Graph& body_;
  const std::vector<const Tensor*>& constants_;
  const LowerOptions& options_;
  std::map<const Value*, int> input_index_;
  std::map<std::string, int32_t> memo_;
  std::map<const Node*, int> expensive_emits_;
  int64_t table_elems_ = 0;
  FusedProgram prog_;
};

}  // namespace

Result<FusedProgram> lower_region(const Graph& body, const std::vector<const Tensor*>& input_constants,
                                  const LowerOptions& options, LowerStats* stats) {
  if (input_constants.size() != body.inputs().size()) {
    return Status::internal_error("lower_region: one constant slot per region input expected");
  }
  if (body.outputs().empty()) return Status::user_error("region has no outputs");
  return Lowerer(body, input_constants, options).run(stats);
}

}  // namespace opfuse::codegen
