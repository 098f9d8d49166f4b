// Scaled dot-product attention, with its head split/merge, into one opfuse::FusedAttention
// (ops/fused_attention.h) whose kernel streams over key blocks and never writes the scores:
//
//   before (BERT, per layer)                           after
//   q ─► Reshape ─► Transpose(0,2,1,3) ─┐               q ──┐
//   k ─► Reshape ─► Transpose(0,2,3,1) ─┴► MatMul       k ──┤
//                          Div(., 8) ◄──────┘           v ──┼► opfuse::FusedAttention ─► y
//                          Add(., mask) ─► Softmax      mask┘   {num_heads 12, scale 0.125,
//   v ─► Reshape ─► Transpose(0,2,1,3) ─► MatMul ◄──┘            q/k/v_layout "BS(HD)",
//                     Transpose(0,2,1,3) ─► Reshape ─► y         out_layout "BS(HD)"}
//
// Algebra: per (b, h): Y = softmax_rows(s * Q K^T + M) V, where s = the product of the scalar
// Mul/Div constants on the scores (an epilogue's linear:s:0 included) or on Q ((sQ)K^T = s QK^T);
// a Transpose of an operand is a permutation of its axes and a Reshape that splits (merges) the
// last axis into H x D is a relabelling of the same bytes, so both become layout strings.
// Matched: MatMul(Q', K'^T) [-> Mul/Div by a scalar constant, either side for Mul] [-> Add(mask)]
// -> Softmax(last axis) -> MatMul(., V') [-> Transpose [-> Reshape]], where each of Q', K'^T, V'
// is Transpose(Reshape(x)), Transpose(x) or x, and Q' may carry the scale.
// Guards: interior values private to the match and not graph outputs (standard), f32, static
// shapes, a constant scalar scale, softmax over the last axis, a mask that does not broadcast the
// scores to a larger shape, layouts that reproduce every original shape.
#include <numeric>

#include "ops/fused.h"
#include "ops/fused_attention.h"
#include "passes/pass_util.h"
#include "patterns/families.h"

namespace opfuse::patterns {
namespace {

// An operand of a MatMul: Transpose(Reshape(x)) | Transpose(x) | x.
PatternNode operand(const std::string& name) {
  return one_of({op("Transpose", {op("Reshape", {any(name + "_in"), any()}).as(name + "_reshape")})
                     .as(name + "_transpose"),
                 op("Transpose", {any(name + "_in")}).as(name + "_transpose"), any(name + "_in")});
}

PatternNode attention_tree() {
  PatternNode q = operand("q");
  PatternNode q_scaled = one_of({op("Mul", {operand("q"), any("q_scale")}).as("q_scale_op"),
                                 op("Div", {operand("q"), any("q_scale")}).as("q_scale_op"), std::move(q)});
  PatternNode qk = op_head("MatMul|opfuse::FusedMatMul", {std::move(q_scaled), operand("k")}).as("qk");
  PatternNode scaled = one_of({op("Mul", {qk, any("s_scale")}).as("s_scale_op"),
                               op("Div", {qk, any("s_scale")}).as("s_scale_op"), qk});
  PatternNode masked = one_of({op("Add", {scaled, any("mask")}).as("mask_add"), scaled});
  PatternNode core = op("MatMul", {op("Softmax", {std::move(masked)}).as("softmax"), operand("v")}).as("pv");
  return one_of({op("Reshape", {op("Transpose", {core}).as("out_transpose"), any()}).as("out_reshape"),
                 op("Transpose", {core}).as("out_transpose"), core});
}

std::vector<int64_t> perm_of(const Node& transpose, size_t rank) {
  std::vector<int64_t> perm = AttrReader(transpose).get_ints("perm");
  if (perm.empty()) {
    perm.resize(rank);
    std::iota(perm.rbegin(), perm.rend(), 0);
  }
  return perm;
}

// Whether `to` is `from` with its last two dims merged.
bool merges_last_two(const Value* from, const Value* to) {
  const auto a = known_dims(from), b = known_dims(to);
  if (!a || !b || a->size() < 2 || b->size() != a->size() - 1) return false;
  for (size_t i = 0; i + 2 < a->size(); ++i) {
    if ((*a)[i] != (*b)[i]) return false;
  }
  return b->back() == (*a)[a->size() - 2] * a->back();
}

// The layout of the tensor `name`_in given the letters of what the MatMul reads.
std::optional<AttentionLayout> operand_layout(const Match& m, const std::string& name, std::string read) {
  std::string letters = read;
  if (const Node* t = m.node(name + "_transpose")) {
    const std::vector<int64_t> perm = perm_of(*t, read.size());
    if (perm.size() != read.size()) return std::nullopt;
    for (size_t j = 0; j < perm.size(); ++j) {
      if (perm[j] < 0 || perm[j] >= static_cast<int64_t>(read.size())) return std::nullopt;
      letters[perm[j]] = read[j];
    }
  }
  AttentionLayout l{letters, false};
  if (const Node* r = m.node(name + "_reshape")) {
    // Only the head split [.., H*D] -> [.., H, D] is a relabelling this op can say.
    if (letters.substr(letters.size() - 2) != "HD" || !merges_last_two(r->output(0), r->input(0))) {
      return std::nullopt;
    }
    l.merged_hd = true;
  }
  return l;
}

// The output layout: the letters of pv, permuted by the output Transpose, merged by the Reshape.
std::optional<AttentionLayout> output_layout(const Match& m, const std::string& pv) {
  std::string letters = pv;
  if (const Node* t = m.node("out_transpose")) {
    const std::vector<int64_t> perm = perm_of(*t, pv.size());
    if (perm.size() != pv.size()) return std::nullopt;
    for (size_t j = 0; j < perm.size(); ++j) {
      if (perm[j] < 0 || perm[j] >= static_cast<int64_t>(pv.size())) return std::nullopt;
      letters[j] = pv[perm[j]];
    }
  }
  AttentionLayout l{letters, false};
  if (const Node* r = m.node("out_reshape")) {
    if (letters.substr(letters.size() - 2) != "HD" || !merges_last_two(r->input(0), r->output(0))) {
      return std::nullopt;
    }
    l.merged_hd = true;
  }
  return l;
}

// Everything the rewrite needs, derived once from a match; nullopt when the shapes do not fit
// (the match is then simply not an attention).
struct Plan {
  AttentionAttrs attrs;
  Value* mask = nullptr;
  std::optional<float> scale;  // nullopt: some scale is not a constant scalar
};

// The scalar a Mul/Div node contributes (x * c, x / c), or nullopt.
std::optional<double> scalar_factor(const Node* node, const Value* c) {
  const Tensor* t = constant_operand(c);
  if (t == nullptr || t->dtype() != DType::kF32 || t->numel() < 1) return std::nullopt;
  const double v = t->get_double(0);
  for (int64_t i = 1; i < t->numel(); ++i) {
    if (t->get_double(i) != v) return std::nullopt;
  }
  if (node->op_type() == "Div") return v == 0 ? std::nullopt : std::optional<double>(1.0 / v);
  return v;
}

std::optional<Plan> make_plan(const Match& m) {
  const Node* qk = m.node("qk");
  const auto scores = known_dims(qk->output(0));
  if (!scores || (scores->size() != 4 && scores->size() != 3)) return std::nullopt;
  const bool batch = scores->size() == 4;
  Plan plan;
  plan.attrs.num_heads = (*scores)[scores->size() - 3];
  const auto ql = operand_layout(m, "q", batch ? "BHSD" : "HSD");
  const auto kl = operand_layout(m, "k", batch ? "BHDS" : "HDS");
  const auto vl = operand_layout(m, "v", batch ? "BHSD" : "HSD");
  const auto ol = output_layout(m, batch ? "BHSD" : "HSD");
  if (!ql || !kl || !vl || !ol) return std::nullopt;
  plan.attrs.q_layout = ql->to_string();
  plan.attrs.k_layout = kl->to_string();
  plan.attrs.v_layout = vl->to_string();
  plan.attrs.out_layout = ol->to_string();

  // The scale: scalar Mul/Div on Q or on the scores, and an epilogue's linear:s:0.
  double scale = 1.0;
  bool constant = true;
  for (const auto& [op_name, c_name] : {std::pair{"q_scale_op", "q_scale"}, std::pair{"s_scale_op", "s_scale"}}) {
    if (const Node* n = m.node(op_name)) {
      const auto f = scalar_factor(n, m.value(c_name));
      constant &= f.has_value();
      if (f) scale *= *f;
    }
  }
  plan.mask = m.value("mask");
  if (qk->domain() == kFusedDomain) {
    if (qk->has_input(2)) return std::nullopt;  // a bias on the scores is not attention
    const std::vector<std::string> epilogue = AttrReader(*qk).get_strings("epilogue");
    size_t i = 0;
    if (i < epilogue.size()) {
      const auto post = parse_post_op(epilogue[i]);
      if (post && post->spec->name == "linear") {
        if (post->params[1] != 0.0f) return std::nullopt;
        scale *= post->params[0];
        ++i;
      }
    }
    if (i < epilogue.size() && epilogue[i] == "add" && qk->has_input(3) && plan.mask == nullptr) {
      plan.mask = qk->input(3);
      ++i;
    }
    if (i != epilogue.size()) return std::nullopt;
  } else if (qk->inputs().size() != 2) {
    return std::nullopt;
  }
  if (constant) plan.scale = static_cast<float>(scale);
  plan.attrs.scale = plan.scale.value_or(1.0f);

  // The layouts must reproduce the original shapes: operands, scores and output.
  const auto qd = known_dims(m.value("q_in")), kd = known_dims(m.value("k_in")), vd = known_dims(m.value("v_in"));
  const auto yd = known_dims(m.root->output(0));
  if (!qd || !kd || !vd || !yd) return std::nullopt;
  std::optional<std::vector<int64_t>> md;
  if (plan.mask) {
    md = known_dims(plan.mask);
    if (!md || (plan.mask->producer() && m.contains(plan.mask->producer()))) return std::nullopt;
  }
  auto g = attention_geometry(plan.attrs, *qd, *kd, *vd, md ? &*md : nullptr);
  if (!g.is_ok() || g->out_dims != *yd) return std::nullopt;
  std::vector<int64_t> expect = {g->dims.heads, g->dims.q_len, g->dims.kv_len};
  if (batch) expect.insert(expect.begin(), g->dims.batch);
  if (*scores != expect) return std::nullopt;
  return plan;
}

// The next op would extend this match (pv into its output Transpose, that into a head merge):
// leave it to the larger match rooted there.
bool extended_by_consumer(const Match& m) {
  const Node* last = m.node("out_transpose") ? m.node("out_transpose") : m.node("pv");
  if (m.node("out_reshape")) return false;
  const Value* out = last->output(0);
  if (out->uses().size() != 1 || out->is_graph_output()) return false;
  const Node* next = out->uses().front().node;
  if (last == m.node("pv")) return next->op_type() == "Transpose" && next->domain().empty();
  return next->op_type() == "Reshape" && next->domain().empty() && merges_last_two(out, next->output(0));
}

Reason check_attention(const Match& m, const PassContext&) {
  for (const char* name : {"q_in", "k_in", "v_in"}) {
    if (Reason why = is_f32(m.value(name)); !why.empty()) return why;
  }
  const auto plan = make_plan(m);
  if (!plan->scale) return "scale is not a constant scalar";
  if (plan->mask) {
    if (Reason why = is_f32(plan->mask); !why.empty()) return "mask " + why;
    if (const Node* add = m.node("mask_add"); add && known_dims(add->output(0)) != known_dims(m.node("qk")->output(0))) {
      return "mask broadcasts the scores to a larger shape";
    }
  }
  const Node& softmax = *m.node("softmax");
  const auto dims = known_dims(softmax.output(0));
  const int64_t rank = dims ? static_cast<int64_t>(dims->size()) : 0;
  const int64_t axis = AttrReader(softmax).get_int("axis");
  if (axis != -1 && axis != rank - 1) return "softmax is not over the last axis";
  return {};
}

Result<Node*> rewrite_attention(Graph& graph, const Match& m) {
  const auto plan = make_plan(m);
  if (!plan) return Status::internal_error("attention: the plan changed between check and rewrite");
  std::vector<Value*> inputs = {m.value("q_in"), m.value("k_in"), m.value("v_in")};
  if (plan->mask) inputs.push_back(plan->mask);
  Attributes attrs;
  attrs["num_heads"] = plan->attrs.num_heads;
  attrs["scale"] = plan->attrs.scale;
  attrs["q_layout"] = plan->attrs.q_layout;
  attrs["k_layout"] = plan->attrs.k_layout;
  attrs["v_layout"] = plan->attrs.v_layout;
  attrs["out_layout"] = plan->attrs.out_layout;
  return replace_match(graph, m, "FusedAttention", std::string(kFusedDomain), std::move(inputs),
                       std::move(attrs), m.node("softmax")->name());
}

}  // namespace

std::vector<Pattern> attention_patterns() {
  Pattern p;
  p.name = "attention";
  p.family = "attention";
  p.tree = attention_tree();
  p.condition = [](const Match& m) { return !extended_by_consumer(m) && make_plan(m).has_value(); };
  p.check = check_attention;
  p.rewrite = rewrite_attention;
  p.benefit = 10;
  p.describe = [](const Match& m) { return str_cat("attention around ", node_label(*m.node("softmax"))); };
  return {p};
}

}  // namespace opfuse::patterns
