// opfuse::FusedAttention (ops/fused_attention.h): the layouts, shape inference and the
// reference kernel, the oracle the CPU kernel is tested against: plain loops in double, the
// softmax shifted by the row max exactly like ONNX Softmax (a row whose every score is -inf
// yields NaN, as the unfused graph does).
#include "ops/fused_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/fused.h"
#include "ops/op_list.h"

namespace opfuse {

std::string AttentionLayout::to_string() const {
  if (!merged_hd) return letters;
  return letters.substr(0, letters.size() - 2) + "(HD)";
}

Result<AttentionLayout> parse_attention_layout(std::string_view text) {
  AttentionLayout out;
  std::string_view body = text;
  if (body.size() >= 4 && body.substr(body.size() - 4) == "(HD)") {
    out.merged_hd = true;
    body.remove_suffix(4);
  }
  out.letters = std::string(body) + (out.merged_hd ? "HD" : "");
  auto bad = [&](const std::string& why) {
    return Status::user_error(str_cat("attention layout '", text, "': ", why,
                                      " (letters B H S D, each once, H S D required, '(HD)' only last)"));
  };
  for (char c : out.letters) {
    if (c != 'B' && c != 'H' && c != 'S' && c != 'D') return bad(str_cat("unknown axis '", std::string(1, c), "'"));
    if (std::count(out.letters.begin(), out.letters.end(), c) != 1) return bad("repeated axis");
  }
  for (char c : {'H', 'S', 'D'}) {
    if (out.letters.find(c) == std::string::npos) return bad(str_cat("no axis ", std::string(1, c)));
  }
  return out;
}

std::vector<int64_t> attention_operand_dims(const AttentionLayout& layout, int64_t batch,
                                            int64_t heads, int64_t seq, int64_t head_dim) {
  std::vector<int64_t> dims;
  for (char c : layout.letters) dims.push_back(c == 'B' ? batch : c == 'H' ? heads : c == 'S' ? seq : head_dim);
  if (layout.merged_hd) {
    dims.pop_back();
    dims.back() = heads * head_dim;
  }
  return dims;
}

namespace {

struct OperandSizes {
  int64_t b = 1, h = 0, s = 0, d = 0;
};

// The sizes an operand's dims give its letters (H from num_heads when merged).
Result<OperandSizes> operand_sizes(const char* what, const AttentionLayout& layout,
                                   const std::vector<int64_t>& dims, int64_t num_heads) {
  if (static_cast<int>(dims.size()) != layout.rank()) {
    return Status::user_error(str_cat("attention ", what, " ", dims_to_string(dims), " does not have layout ",
                                      layout.to_string(), " (rank ", layout.rank(), ")"));
  }
  OperandSizes s;
  for (size_t i = 0; i < layout.letters.size(); ++i) {
    const char c = layout.letters[i];
    if (layout.merged_hd && i + 2 >= layout.letters.size()) break;
    (c == 'B' ? s.b : c == 'H' ? s.h : c == 'S' ? s.s : s.d) = dims[i];
  }
  if (layout.merged_hd) {
    const int64_t hd = dims.back();
    if (num_heads <= 0 || hd % num_heads != 0) {
      return Status::user_error(str_cat("attention ", what, " ", dims_to_string(dims), ": last dim ", hd,
                                        " is not num_heads ", num_heads, " x head dim"));
    }
    s.h = num_heads;
    s.d = hd / num_heads;
  }
  return s;
}

// Row-major strides of the operand's letters.
AttentionStrides strides_of(const AttentionLayout& layout, const OperandSizes& s) {
  AttentionStrides st;
  int64_t stride = 1;
  for (int i = static_cast<int>(layout.letters.size()) - 1; i >= 0; --i) {
    const char c = layout.letters[i];
    int64_t& slot = c == 'B' ? st.b : c == 'H' ? st.h : c == 'S' ? st.s : st.d;
    slot = stride;
    stride *= c == 'B' ? s.b : c == 'H' ? s.h : c == 'S' ? s.s : s.d;
  }
  if (layout.letters.find('B') == std::string::npos) st.b = 0;
  return st;
}

}  // namespace

Result<AttentionGeometry> attention_geometry(const AttentionAttrs& attrs,
                                             const std::vector<int64_t>& q_dims,
                                             const std::vector<int64_t>& k_dims,
                                             const std::vector<int64_t>& v_dims,
                                             const std::vector<int64_t>* mask_dims) {
  OPFUSE_ASSIGN_OR_RETURN(AttentionLayout ql, parse_attention_layout(attrs.q_layout));
  OPFUSE_ASSIGN_OR_RETURN(AttentionLayout kl, parse_attention_layout(attrs.k_layout));
  OPFUSE_ASSIGN_OR_RETURN(AttentionLayout vl, parse_attention_layout(attrs.v_layout));
  OPFUSE_ASSIGN_OR_RETURN(AttentionLayout ol, parse_attention_layout(attrs.out_layout));
  if (ql.has_batch() != kl.has_batch() || ql.has_batch() != vl.has_batch() || ql.has_batch() != ol.has_batch()) {
    return Status::user_error("attention layouts must all have a B axis or none");
  }
  OPFUSE_ASSIGN_OR_RETURN(OperandSizes q, operand_sizes("Q", ql, q_dims, attrs.num_heads));
  OPFUSE_ASSIGN_OR_RETURN(OperandSizes k, operand_sizes("K", kl, k_dims, attrs.num_heads));
  OPFUSE_ASSIGN_OR_RETURN(OperandSizes v, operand_sizes("V", vl, v_dims, attrs.num_heads));
  if (q.b != k.b || q.b != v.b || q.h != k.h || q.h != v.h || q.h != attrs.num_heads || q.d != k.d ||
      k.s != v.s) {
    return Status::user_error(str_cat("attention operands disagree: Q ", dims_to_string(q_dims), " (",
                                      ql.to_string(), "), K ", dims_to_string(k_dims), " (", kl.to_string(),
                                      "), V ", dims_to_string(v_dims), " (", vl.to_string(), "), num_heads ",
                                      attrs.num_heads));
  }
  AttentionGeometry g;
  g.dims = {q.b, q.h, q.s, k.s, q.d, v.d};
  g.scale = attrs.scale;
  g.q = strides_of(ql, q);
  g.k = strides_of(kl, k);
  g.v = strides_of(vl, v);
  const OperandSizes o{q.b, q.h, q.s, v.d};
  g.out = strides_of(ol, o);
  g.out_dims = attention_operand_dims(ol, q.b, q.h, q.s, v.d);
  if (mask_dims) {
    const int scores_rank = ql.has_batch() ? 4 : 3;
    const std::array<int64_t, 4> scores = {g.dims.batch, g.dims.heads, g.dims.q_len, g.dims.kv_len};
    const int r = static_cast<int>(mask_dims->size());
    if (r > scores_rank) {
      return Status::user_error(str_cat("attention mask ", dims_to_string(*mask_dims),
                                        " has more axes than the scores (", scores_rank, ")"));
    }
    int64_t stride = 1;
    for (int i = r - 1; i >= 0; --i) {
      const int axis = 4 - (r - i);  // right-aligned onto (b, h, i, j)
      const int64_t m = (*mask_dims)[i];
      if (m != 1 && m != scores[axis]) {
        return Status::user_error(str_cat("attention mask ", dims_to_string(*mask_dims),
                                          " does not broadcast to the scores ",
                                          dims_to_string({scores.begin() + (4 - scores_rank), scores.end()})));
      }
      g.mask[axis] = m == 1 ? 0 : stride;
      stride *= m;
    }
    g.has_mask = true;
  }
  return g;
}

AttentionAttrs read_attention_attrs(const AttrReader& a) {
  return {a.get_int("num_heads"), a.get_float("scale"), a.get_string("q_layout"), a.get_string("k_layout"),
          a.get_string("v_layout"), a.get_string("out_layout")};
}

namespace {

// The Dim an operand's shape gives one letter (H from num_heads, D = HD / H when merged).
Dim letter_dim(const AttentionLayout& l, const Shape& shape, char letter, int64_t heads) {
  if (letter == 'B' && !l.has_batch()) return Dim(1);
  if (static_cast<int>(shape.size()) != l.rank()) return Dim::unknown();
  const size_t at = l.letters.find(letter);
  if (l.merged_hd && at + 2 >= l.letters.size()) {
    if (letter == 'H') return Dim(heads);
    const Dim hd = shape.back();
    return hd.is_known() && heads > 0 ? Dim(hd.value() / heads) : Dim::unknown();
  }
  return shape[at];
}

Status infer_attention(InferContext& ctx) {
  const AttentionAttrs attrs = read_attention_attrs(ctx.attrs());
  if (attrs.num_heads <= 0) return ctx.error(str_cat("num_heads must be positive, got ", attrs.num_heads));
  const size_t n = ctx.has_input(3) ? 4 : 3;
  for (size_t i = 0; i < n; ++i) {
    if (ctx.input_dtype(i) != DType::kF32) return ctx.error(str_cat("input ", i, " must be f32"));
  }
  std::vector<std::optional<std::vector<int64_t>>> dims;
  for (size_t i = 0; i < n; ++i) {
    dims.push_back(ctx.input_shape(i) ? static_dims(*ctx.input_shape(i)) : std::nullopt);
  }
  if (dims[0] && dims[1] && dims[2] && (n == 3 || dims[3])) {
    auto g = attention_geometry(attrs, *dims[0], *dims[1], *dims[2], n == 4 ? &*dims[3] : nullptr);
    if (!g.is_ok()) return ctx.error(g.status().message());
    ctx.set_output(0, DType::kF32, make_shape(g->out_dims));
    return Status::ok();
  }
  // Symbolic shapes: each output axis from the operand that names it.
  auto parse = [&](const std::string& text) -> Result<AttentionLayout> {
    auto l = parse_attention_layout(text);
    if (!l.is_ok()) return ctx.error(l.status().message());
    return l;
  };
  OPFUSE_ASSIGN_OR_RETURN(AttentionLayout ql, parse(attrs.q_layout));
  OPFUSE_ASSIGN_OR_RETURN(AttentionLayout vl, parse(attrs.v_layout));
  OPFUSE_ASSIGN_OR_RETURN(AttentionLayout ol, parse(attrs.out_layout));
  if (!ctx.input_shape(0) || !ctx.input_shape(2)) {
    ctx.set_output(0, DType::kF32, std::nullopt);
    return Status::ok();
  }
  const Shape& qs = *ctx.input_shape(0);
  const Shape& vs = *ctx.input_shape(2);
  Shape out;
  for (char c : ol.letters) {
    out.push_back(c == 'D' ? letter_dim(vl, vs, 'D', attrs.num_heads)
                           : letter_dim(ql, qs, c, attrs.num_heads));
  }
  if (ol.merged_hd) {
    const Dim d = out.back();
    out.pop_back();
    out.back() = d.is_known() ? Dim(attrs.num_heads * d.value()) : Dim::unknown();
  }
  ctx.set_output(0, DType::kF32, std::move(out));
  return Status::ok();
}

Status attention_reference(KernelContext& ctx) {
  const Tensor* mask = ctx.input_or_null(3);
  for (size_t i = 0; i < (mask ? 4u : 3u); ++i) {
    if (ctx.input(i).dtype() != DType::kF32) return ctx.error(str_cat("input ", i, " must be f32"));
  }
  auto geometry = attention_geometry(read_attention_attrs(ctx.attrs()), ctx.input(0).dims(), ctx.input(1).dims(),
                                     ctx.input(2).dims(), mask ? &mask->dims() : nullptr);
  if (!geometry.is_ok()) return ctx.error(geometry.status().message());
  const AttentionGeometry& g = *geometry;
  OPFUSE_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DType::kF32, g.out_dims));
  const float* q = ctx.input(0).data<float>();
  const float* k = ctx.input(1).data<float>();
  const float* v = ctx.input(2).data<float>();
  const float* m = mask ? mask->data<float>() : nullptr;
  float* y = out->data<float>();
  const AttentionDims& d = g.dims;
  std::vector<double> p(d.kv_len);
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      for (int64_t i = 0; i < d.q_len; ++i) {
        double row_max = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < d.kv_len; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d.head_dim; ++c) {
            dot += static_cast<double>(q[b * g.q.b + h * g.q.h + i * g.q.s + c * g.q.d]) *
                   k[b * g.k.b + h * g.k.h + j * g.k.s + c * g.k.d];
          }
          // Rounded to f32 like the unfused graph's score tensor, so masks of -1e4 and -inf
          // behave identically.
          float s = static_cast<float>(dot * g.scale);
          if (m) s += m[b * g.mask[0] + h * g.mask[1] + i * g.mask[2] + j * g.mask[3]];
          p[j] = s;
          row_max = std::isnan(s) || std::isnan(row_max) ? std::numeric_limits<double>::quiet_NaN()
                                                          : std::max(row_max, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < d.kv_len; ++j) sum += p[j] = std::exp(p[j] - row_max);
        for (int64_t c = 0; c < d.v_head_dim; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < d.kv_len; ++j) acc += p[j] * v[b * g.v.b + h * g.v.h + j * g.v.s + c * g.v.d];
          y[b * g.out.b + h * g.out.h + i * g.out.s + c * g.out.d] = static_cast<float>(acc / sum);
        }
      }
    }
  }
  return Status::ok();
}

int64_t attention_flops(const Node& node) {
  const auto q = node.input(0)->shape ? static_dims(*node.input(0)->shape) : std::nullopt;
  const auto k = node.input(1)->shape ? static_dims(*node.input(1)->shape) : std::nullopt;
  const auto v = node.input(2)->shape ? static_dims(*node.input(2)->shape) : std::nullopt;
  if (!q || !k || !v) return -1;
  auto g = attention_geometry(read_attention_attrs(AttrReader(node)), *q, *k, *v, nullptr);
  if (!g.is_ok()) return -1;
  const AttentionDims& d = g->dims;
  return 2 * d.batch * d.heads * d.q_len * d.kv_len * (d.head_dim + d.v_head_dim);
}

}  // namespace

std::vector<OpDef> fused_attention_ops() {
  OpDef d;
  d.name = "FusedAttention";
  d.domain = std::string(kFusedDomain);
  d.min_opset = d.max_opset = 1;
  d.min_inputs = 3;
  d.max_inputs = 4;
  d.attrs = {{"num_heads", AttrType::kInt, std::nullopt, true},
             {"scale", AttrType::kFloat, AttrValue(1.0f), false},
             {"q_layout", AttrType::kString, AttrValue(std::string("BHSD")), false},
             {"k_layout", AttrType::kString, AttrValue(std::string("BHDS")), false},
             {"v_layout", AttrType::kString, AttrValue(std::string("BHSD")), false},
             {"out_layout", AttrType::kString, AttrValue(std::string("BHSD")), false}};
  d.kind = FusionKind::kAnchor;
  d.infer = infer_attention;
  d.reference = attention_reference;
  d.flops = attention_flops;
  d.summary = "softmax(scale * Q K^T + mask) V per batch and head; operand layouts as attributes";
  return {d};
}

}  // namespace opfuse
