// The recurrent ops LSTM, GRU and RNN (opsets 7-21: the importer reads 7-10 and 18-21 as these
// records; `layout` is opset 14's and defaults to the older form). The reference kernel is the
// ONNX definition written out step by step, the oracle for the fast kernel
// (kernels/cpu/rnn_kernel.cc). Opaque to fusion: a recurrence is a sequential loop, nothing to
// fuse across.
//
// Where the spec is silent we do what onnxruntime does:
//  - with sequence_lens, a batch entry runs its first len steps (a reversed direction runs them
//    from len - 1 down to 0); Y is zero past len, Y_h / Y_c hold the state after its last step,
//    and zeros for len 0;
//  - `clip` bounds the pre-activation of every gate (peephole term included), not the cell state
//    LSTM's h() reads;
//  - activation_alpha / activation_beta are consumed in list order by the activations that take
//    them, the others taking none; missing ones take the default of the ONNX operator of that
//    name (LeakyRelu 0.01, HardSigmoid 0.2 / 0.5, Elu 1, ThresholdedRelu 1), Affine 1 / 0 and
//    ScaledTanh 1 / 1 (their old experimental operators' identity-like defaults);
//  - a bidirectional node may list one direction's activations, which both directions then use.
#include "ops/rnn.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

#include "ops/op_list.h"

namespace opfuse {
namespace {

struct ActivationName {
  std::string_view name;  // lower case
  RnnActivationKind kind;
  bool takes_alpha, takes_beta;
  float default_alpha, default_beta;
};

constexpr ActivationName kActivations[] = {
    {"relu", RnnActivationKind::kRelu, false, false, 0, 0},
    {"tanh", RnnActivationKind::kTanh, false, false, 0, 0},
    {"sigmoid", RnnActivationKind::kSigmoid, false, false, 0, 0},
    {"affine", RnnActivationKind::kAffine, true, true, 1.0f, 0.0f},
    {"leakyrelu", RnnActivationKind::kLeakyRelu, true, false, 0.01f, 0},
    {"thresholdedrelu", RnnActivationKind::kThresholdedRelu, true, false, 1.0f, 0},
    {"scaledtanh", RnnActivationKind::kScaledTanh, true, true, 1.0f, 1.0f},
    {"hardsigmoid", RnnActivationKind::kHardSigmoid, true, true, 0.2f, 0.5f},
    {"elu", RnnActivationKind::kElu, true, false, 1.0f, 0},
    {"softsign", RnnActivationKind::kSoftsign, false, false, 0, 0},
    {"softplus", RnnActivationKind::kSoftplus, false, false, 0, 0},
};

// The defaults: LSTM f, g, h; GRU f, g; RNN f.
constexpr RnnActivationKind kLstmDefaults[] = {RnnActivationKind::kSigmoid, RnnActivationKind::kTanh,
                                               RnnActivationKind::kTanh};
constexpr RnnActivationKind kGruDefaults[] = {RnnActivationKind::kSigmoid, RnnActivationKind::kTanh};
constexpr RnnActivationKind kRnnDefaults[] = {RnnActivationKind::kTanh};

std::span<const RnnActivationKind> default_activations_of(RnnCell cell) {
  switch (cell) {
    case RnnCell::kLstm: return kLstmDefaults;
    case RnnCell::kGru: return kGruDefaults;
    case RnnCell::kRnn: break;
  }
  return kRnnDefaults;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Status node_error(const Node& node, const std::string& message) {
  return Status::user_error(str_cat(node.describe(), ": ", message));
}

}  // namespace

double RnnActivation::apply(double x) const {
  // Written so that a NaN x gives NaN, as the elementwise ops of the same names do.
  switch (kind) {
    case RnnActivationKind::kRelu: return x < 0 ? 0.0 : x;
    case RnnActivationKind::kTanh: return std::tanh(x);
    case RnnActivationKind::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case RnnActivationKind::kAffine: return double(alpha) * x + double(beta);
    case RnnActivationKind::kLeakyRelu: return x < 0 ? double(alpha) * x : x;
    case RnnActivationKind::kThresholdedRelu: return x <= double(alpha) ? 0.0 : x;
    case RnnActivationKind::kScaledTanh: return double(alpha) * std::tanh(double(beta) * x);
    case RnnActivationKind::kHardSigmoid: {
      const double y = double(alpha) * x + double(beta);
      return y < 0 ? 0.0 : (y > 1 ? 1.0 : y);
    }
    case RnnActivationKind::kElu: return x < 0 ? double(alpha) * std::expm1(x) : x;
    case RnnActivationKind::kSoftsign: return x / (1.0 + std::fabs(x));
    case RnnActivationKind::kSoftplus:
      // log(1 + e^x) without overflowing e^x for large x.
      return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  }
  return x;
}

RnnCell rnn_cell_of(const Node& node) {
  if (node.op_type() == "LSTM") return RnnCell::kLstm;
  if (node.op_type() == "GRU") return RnnCell::kGru;
  return RnnCell::kRnn;
}

int64_t rnn_gate_count(RnnCell cell) {
  switch (cell) {
    case RnnCell::kLstm: return 4;
    case RnnCell::kGru: return 3;
    case RnnCell::kRnn: break;
  }
  return 1;
}

int64_t rnn_activations_per_direction(RnnCell cell) {
  return static_cast<int64_t>(default_activations_of(cell).size());
}

const RnnActivation& RnnAttrs::activation(int64_t direction, int64_t i) const {
  return activations[static_cast<size_t>(direction * rnn_activations_per_direction(cell) + i)];
}

bool RnnAttrs::default_activations() const {
  const auto defaults = default_activations_of(cell);
  for (size_t i = 0; i < activations.size(); ++i) {
    if (activations[i].kind != defaults[i % defaults.size()]) return false;
  }
  return true;
}

Result<RnnAttrs> read_rnn_attrs(const Node& node) {
  const AttrReader attrs(node);
  RnnAttrs a;
  a.cell = rnn_cell_of(node);
  const std::string direction = attrs.get_string("direction");
  if (direction == "bidirectional") {
    a.num_directions = 2;
  } else if (direction == "reverse") {
    a.reverse = true;
  } else if (direction != "forward") {
    return node_error(node, str_cat("direction '", direction,
                                    "' is not one of forward, reverse, bidirectional"));
  }
  if (attrs.has("hidden_size")) {
    a.hidden_size = attrs.get_int("hidden_size");
    if (a.hidden_size <= 0) return node_error(node, str_cat("hidden_size ", a.hidden_size, " must be positive"));
  }
  const int64_t layout = attrs.get_int("layout");
  if (layout != 0 && layout != 1) return node_error(node, str_cat("layout ", layout, " must be 0 or 1"));
  a.batch_major = layout == 1;
  if (attrs.has("clip")) {
    const float clip = attrs.get_float("clip");
    // A NaN threshold would make every comparison false: no bound at all, which is not what a
    // model asking for one means.
    if (!(clip > 0)) return node_error(node, str_cat("clip ", clip, " must be positive"));
    a.clip = clip;
  }
  if (a.cell == RnnCell::kLstm) a.input_forget = attrs.get_int("input_forget") != 0;
  if (a.cell == RnnCell::kGru) a.linear_before_reset = attrs.get_int("linear_before_reset") != 0;

  const int64_t per_direction = rnn_activations_per_direction(a.cell);
  const std::vector<float> alphas = attrs.has("activation_alpha") ? attrs.get_floats("activation_alpha")
                                                                  : std::vector<float>{};
  const std::vector<float> betas = attrs.has("activation_beta") ? attrs.get_floats("activation_beta")
                                                                 : std::vector<float>{};
  if (attrs.has("activations")) {
    const std::vector<std::string> names = attrs.get_strings("activations");
    const auto count = static_cast<int64_t>(names.size());
    if (count != per_direction && count != per_direction * a.num_directions) {
      return node_error(node, str_cat("activations lists ", count, " functions; ", node.op_type(), " takes ",
                                      per_direction, " per direction (", per_direction * a.num_directions,
                                      " for this node)"));
    }
    size_t next_alpha = 0, next_beta = 0;
    for (const std::string& name : names) {
      const std::string key = lower(name);
      const auto* entry = std::find_if(std::begin(kActivations), std::end(kActivations),
                                       [&](const ActivationName& e) { return e.name == key; });
      if (entry == std::end(kActivations)) {
        return node_error(node, str_cat("activation '", name,
                                        "' is not one of Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, "
                                        "ScaledTanh, HardSigmoid, Elu, Softsign, Softplus"));
      }
      RnnActivation act;
      act.kind = entry->kind;
      act.alpha = entry->default_alpha;
      act.beta = entry->default_beta;
      if (entry->takes_alpha && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
      if (entry->takes_beta && next_beta < betas.size()) act.beta = betas[next_beta++];
      a.activations.push_back(act);
    }
  } else {
    for (RnnActivationKind kind : default_activations_of(a.cell)) a.activations.push_back({kind, 0, 0});
  }
  // One direction's list serves both.
  if (static_cast<int64_t>(a.activations.size()) < per_direction * a.num_directions) {
    const std::vector<RnnActivation> first = a.activations;
    a.activations.insert(a.activations.end(), first.begin(), first.end());
  }
  return a;
}

namespace {

// ---------------------------------------------------------------- shapes

// The shape of every input as far as known (nullopt: omitted or unknown), checked against the
// attributes and each other. Shared by inference (symbolic dims) and the kernels (concrete).
struct RnnShapeDims {
  Dim seq, batch, input, hidden;
};

const char* const kInputNames[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};

Result<RnnShapeDims> check_shapes(const Node& node, const RnnAttrs& a,
                                  const std::vector<std::optional<Shape>>& shapes) {
  const int64_t gates = rnn_gate_count(a.cell);
  auto shape_of = [&](size_t i) -> const std::optional<Shape>& {
    static const std::optional<Shape> kNone;
    return i < shapes.size() ? shapes[i] : kNone;
  };
  auto rank_error = [&](size_t i, size_t rank) {
    return node_error(node, str_cat(kInputNames[i], " (input ", i, ") has shape ", shape_to_string(*shape_of(i)),
                                    "; expected rank ", rank));
  };
  RnnShapeDims d;
  if (const auto& x = shape_of(kRnnX)) {
    if (x->size() != 3) return rank_error(kRnnX, 3);
    d.seq = (*x)[a.batch_major ? 1 : 0];
    d.batch = (*x)[a.batch_major ? 0 : 1];
    d.input = (*x)[2];
  }
  if (a.hidden_size > 0) d.hidden = a.hidden_size;
  if (const auto& r = shape_of(kRnnR); r && r->size() == 3 && !d.hidden.is_known()) d.hidden = (*r)[2];
  if (const auto& w = shape_of(kRnnW); w && w->size() == 3 && !d.hidden.is_known() && (*w)[1].is_known() &&
                                       (*w)[1].value() % gates == 0) {
    d.hidden = (*w)[1].value() / gates;
  }
  const Dim dirs = a.num_directions;
  const Dim gates_hidden = d.hidden.is_known() ? Dim(gates * d.hidden.value()) : Dim();
  const Dim two_gates_hidden = d.hidden.is_known() ? Dim(2 * gates * d.hidden.value()) : Dim();
  const Dim three_hidden = d.hidden.is_known() ? Dim(3 * d.hidden.value()) : Dim();
  const std::string g = gates == 1 ? "" : str_cat(gates, "*");
  const Shape state = a.batch_major ? Shape{d.batch, dirs, d.hidden} : Shape{dirs, d.batch, d.hidden};
  const std::string state_legend = a.batch_major ? "batch_size, num_directions, hidden_size"
                                                 : "num_directions, batch_size, hidden_size";
  struct Expected {
    size_t input;
    Shape dims;
    std::string legend;
  };
  const std::vector<Expected> expected = {
      {kRnnW, {dirs, gates_hidden, d.input}, str_cat("num_directions, ", g, "hidden_size, input_size")},
      {kRnnR, {dirs, gates_hidden, d.hidden}, str_cat("num_directions, ", g, "hidden_size, hidden_size")},
      {kRnnB, {dirs, two_gates_hidden}, str_cat("num_directions, ", 2 * gates, "*hidden_size")},
      {kRnnSequenceLens, {d.batch}, "batch_size"},
      {kRnnInitialH, state, state_legend},
      {kRnnInitialC, state, state_legend},
      {kRnnP, {dirs, three_hidden}, "num_directions, 3*hidden_size"},
  };
  for (const Expected& e : expected) {
    const auto& s = shape_of(e.input);
    if (!s) continue;
    bool matches = s->size() == e.dims.size();
    for (size_t k = 0; matches && k < s->size(); ++k) {
      matches = !(*s)[k].is_known() || !e.dims[k].is_known() || (*s)[k] == e.dims[k];
    }
    if (!matches) {
      return node_error(node, str_cat(kInputNames[e.input], " (input ", e.input, ") has shape ", shape_to_string(*s),
                                      "; expected ", shape_to_string(e.dims), " (", e.legend, ")"));
    }
  }
  return d;
}

bool is_rnn_float(DType t) { return t == DType::kF32 || t == DType::kF64 || t == DType::kF16; }

Status infer_rnn(InferContext& ctx) {
  const Node& node = ctx.node();
  OPFUSE_ASSIGN_OR_RETURN(RnnAttrs a, read_rnn_attrs(node));
  const DType t = ctx.input_dtype(kRnnX);
  if (t != DType::kUndefined && !is_rnn_float(t)) {
    return ctx.error(str_cat("X (input 0) has dtype ", dtype_name(t), "; expected f32, f64 or f16"));
  }
  std::vector<std::optional<Shape>> shapes(ctx.num_inputs());
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    shapes[i] = ctx.input_shape(i);
    const DType ti = ctx.input_dtype(i);
    const DType want = i == kRnnSequenceLens ? DType::kI32 : t;
    if (ti != DType::kUndefined && want != DType::kUndefined && ti != want) {
      return ctx.error(str_cat(kInputNames[i], " (input ", i, ") has dtype ", dtype_name(ti), "; expected ",
                               dtype_name(want), i == kRnnSequenceLens ? "" : " like X"));
    }
  }
  OPFUSE_ASSIGN_OR_RETURN(RnnShapeDims d, check_shapes(node, a, shapes));
  const Dim dirs = a.num_directions;
  const Shape y = a.batch_major ? Shape{d.batch, d.seq, dirs, d.hidden} : Shape{d.seq, dirs, d.batch, d.hidden};
  const Shape state = a.batch_major ? Shape{d.batch, dirs, d.hidden} : Shape{dirs, d.batch, d.hidden};
  for (size_t i = 0; i < ctx.num_outputs(); ++i) ctx.set_output(i, t, i == 0 ? y : state);
  return Status::ok();
}

}  // namespace

Result<RnnDims> check_rnn_tensors(const Node& node, const RnnAttrs& attrs, std::span<const Tensor* const> inputs) {
  if (inputs.size() < 3 || inputs[kRnnX] == nullptr || inputs[kRnnW] == nullptr || inputs[kRnnR] == nullptr) {
    return node_error(node, "X, W and R (inputs 0-2) are required");
  }
  const DType t = inputs[kRnnX]->dtype();
  if (!is_rnn_float(t)) {
    return node_error(node, str_cat("X (input 0) is ", inputs[kRnnX]->type_string(), "; expected f32, f64 or f16"));
  }
  std::vector<std::optional<Shape>> shapes(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr) continue;
    const DType want = i == kRnnSequenceLens ? DType::kI32 : t;
    if (inputs[i]->dtype() != want) {
      return node_error(node, str_cat(kInputNames[i], " (input ", i, ") is ", inputs[i]->type_string(), "; expected ",
                                      dtype_name(want), i == kRnnSequenceLens ? "" : " like X"));
    }
    shapes[i] = inputs[i]->shape();
  }
  OPFUSE_ASSIGN_OR_RETURN(RnnShapeDims s, check_shapes(node, attrs, shapes));
  RnnDims d;
  d.seq = s.seq.value();
  d.batch = s.batch.value();
  d.input = s.input.value();
  d.hidden = s.hidden.value();
  d.directions = attrs.num_directions;
  if (d.hidden <= 0) {
    return node_error(node, str_cat("R (input 2) ", inputs[kRnnR]->type_string(), " gives hidden_size ", d.hidden,
                                    "; it must be positive"));
  }
  if (const Tensor* lens = inputs.size() > kRnnSequenceLens ? inputs[kRnnSequenceLens] : nullptr) {
    for (int64_t b = 0; b < d.batch; ++b) {
      const int32_t len = lens->data<int32_t>()[b];
      if (len < 0 || len > d.seq) {
        return node_error(node, str_cat("sequence_lens (input 4) holds ", len, " for batch entry ", b,
                                        "; expected 0 to the sequence length ", d.seq));
      }
    }
  }
  return d;
}

namespace {

// ---------------------------------------------------------------- reference kernel

// Where element (t, b) of the time-major / batch-major tensors lives.
struct RnnLayout {
  const RnnAttrs& a;
  const RnnDims& d;
  int64_t x_row(int64_t t, int64_t b) const { return a.batch_major ? b * d.seq + t : t * d.batch + b; }
  int64_t y_row(int64_t t, int64_t dir, int64_t b) const {
    return a.batch_major ? (b * d.seq + t) * d.directions + dir : (t * d.directions + dir) * d.batch + b;
  }
  int64_t state_row(int64_t dir, int64_t b) const { return a.batch_major ? b * d.directions + dir : dir * d.batch + b; }
};

// Inputs as T (f16 is computed in f32).
template <typename T>
struct RnnOperands {
  const T* x = nullptr;
  const T* w = nullptr;
  const T* r = nullptr;
  const T* bias = nullptr;  // null: zeros
  const int32_t* lens = nullptr;
  const T* h0 = nullptr;
  const T* c0 = nullptr;
  const T* p = nullptr;
};

// One direction of one batch entry, step by step as the ONNX equations read; the dot products
// are summed in double, the state kept in T between steps as a T-typed implementation would.
template <typename T>
void reference_sequence(const RnnAttrs& a, const RnnDims& d, const RnnOperands<T>& in, int64_t dir, int64_t b,
                        T* y, T* y_h, T* y_c) {
  const RnnLayout at{a, d};
  const int64_t hidden = d.hidden, input = d.input, gates = rnn_gate_count(a.cell);
  const T* w = in.w + dir * gates * hidden * input;   // [gates*hidden, input]
  const T* r = in.r + dir * gates * hidden * hidden;  // [gates*hidden, hidden]
  const T* wb = in.bias ? in.bias + dir * 2 * gates * hidden : nullptr;
  const T* rb = wb ? wb + gates * hidden : nullptr;
  const T* p = in.p ? in.p + dir * 3 * hidden : nullptr;
  auto dot = [](const T* u, const T* v, int64_t n) {
    double s = 0;
    for (int64_t k = 0; k < n; ++k) s += double(u[k]) * double(v[k]);
    return s;
  };
  auto clip = [&](double v) {
    if (!a.clip) return v;
    const double c = *a.clip;
    return v > c ? c : (v < -c ? -c : v);
  };
  // x W_n^T + Wb_n and h R_n^T + Rb_n for row n of the stacked gates.
  auto wx = [&](const T* x, int64_t n) { return dot(x, w + n * input, input) + (wb ? double(wb[n]) : 0.0); };
  auto rh = [&](const T* h, int64_t n) { return dot(h, r + n * hidden, hidden) + (rb ? double(rb[n]) : 0.0); };
  const RnnActivation& f = a.activation(dir, 0);

  std::vector<T> h(static_cast<size_t>(hidden), T(0)), c(h), next_h(h), next_c(h), reset_h(h);
  const int64_t state = at.state_row(dir, b) * hidden;
  if (in.h0) std::copy(in.h0 + state, in.h0 + state + hidden, h.begin());
  if (in.c0) std::copy(in.c0 + state, in.c0 + state + hidden, c.begin());
  const int64_t len = in.lens ? in.lens[b] : d.seq;
  for (int64_t s = 0; s < len; ++s) {
    const int64_t t = a.runs_reversed(dir) ? len - 1 - s : s;
    const T* x = in.x + at.x_row(t, b) * input;
    switch (a.cell) {
      case RnnCell::kRnn:
        // Ht = f(Xt Wi^T + Ht-1 Ri^T + Wbi + Rbi)
        for (int64_t j = 0; j < hidden; ++j) next_h[j] = T(f.apply(clip(wx(x, j) + rh(h.data(), j))));
        break;
      case RnnCell::kGru: {
        // Gate rows: z, r, h.
        const RnnActivation& g = a.activation(dir, 1);
        std::vector<double> z(static_cast<size_t>(hidden)), rg(z);
        for (int64_t j = 0; j < hidden; ++j) {
          z[j] = f.apply(clip(wx(x, j) + rh(h.data(), j)));
          rg[j] = f.apply(clip(wx(x, hidden + j) + rh(h.data(), hidden + j)));
          reset_h[j] = T(rg[j] * double(h[j]));
        }
        for (int64_t j = 0; j < hidden; ++j) {
          const int64_t n = 2 * hidden + j;
          // linear_before_reset: ht = g(Xt Wh^T + rt (.) (Ht-1 Rh^T + Rbh) + Wbh)
          // otherwise:           ht = g(Xt Wh^T + (rt (.) Ht-1) Rh^T + Rbh + Wbh)
          const double pre = a.linear_before_reset ? wx(x, n) + rg[j] * rh(h.data(), n) : wx(x, n) + rh(reset_h.data(), n);
          const double hh = g.apply(clip(pre));
          // Ht = (1 - zt) (.) ht + zt (.) Ht-1
          next_h[j] = T((1.0 - z[j]) * hh + z[j] * double(h[j]));
        }
        break;
      }
      case RnnCell::kLstm: {
        // Gate rows: i, o, f, c; peepholes P: i, o, f.
        const RnnActivation& g = a.activation(dir, 1);
        const RnnActivation& hf = a.activation(dir, 2);
        for (int64_t j = 0; j < hidden; ++j) {
          const double cp = double(c[j]);
          const double pi = p ? double(p[j]) : 0.0, po = p ? double(p[hidden + j]) : 0.0,
                       pf = p ? double(p[2 * hidden + j]) : 0.0;
          // it = f(Xt Wi^T + Ht-1 Ri^T + Pi (.) Ct-1 + Wbi + Rbi)
          const double i = f.apply(clip(wx(x, j) + rh(h.data(), j) + pi * cp));
          // ft = f(Xt Wf^T + Ht-1 Rf^T + Pf (.) Ct-1 + Wbf + Rbf), or 1 - it with input_forget
          const double fg = a.input_forget ? 1.0 - i
                                           : f.apply(clip(wx(x, 2 * hidden + j) + rh(h.data(), 2 * hidden + j) + pf * cp));
          // ct = g(Xt Wc^T + Ht-1 Rc^T + Wbc + Rbc); Ct = ft (.) Ct-1 + it (.) ct
          const double cc = g.apply(clip(wx(x, 3 * hidden + j) + rh(h.data(), 3 * hidden + j)));
          next_c[j] = T(fg * cp + i * cc);
          // ot = f(Xt Wo^T + Ht-1 Ro^T + Po (.) Ct + Wbo + Rbo); Ht = ot (.) h(Ct)
          const double o = f.apply(clip(wx(x, hidden + j) + rh(h.data(), hidden + j) + po * double(next_c[j])));
          next_h[j] = T(o * hf.apply(double(next_c[j])));
        }
        c.swap(next_c);
        break;
      }
    }
    h.swap(next_h);
    if (y) std::copy(h.begin(), h.end(), y + at.y_row(t, dir, b) * hidden);
  }
  // Past its length an entry's Y stays zero (outputs start zero-filled); a zero-length entry's
  // final state is zero, not its initial state.
  if (len == 0) {
    std::fill(h.begin(), h.end(), T(0));
    std::fill(c.begin(), c.end(), T(0));
  }
  if (y_h) std::copy(h.begin(), h.end(), y_h + state);
  if (y_c) std::copy(c.begin(), c.end(), y_c + state);
}

template <typename T>
Status reference_of_type(const RnnAttrs& a, const RnnDims& d,
                         std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  auto data = [&](size_t i) -> const T* { return i < in.size() && in[i] ? in[i]->data<T>() : nullptr; };
  RnnOperands<T> ops;
  ops.x = data(kRnnX);
  ops.w = data(kRnnW);
  ops.r = data(kRnnR);
  ops.bias = data(kRnnB);
  ops.lens = kRnnSequenceLens < in.size() && in[kRnnSequenceLens] ? in[kRnnSequenceLens]->data<int32_t>() : nullptr;
  ops.h0 = data(kRnnInitialH);
  if (a.cell == RnnCell::kLstm) {
    ops.c0 = data(kRnnInitialC);
    ops.p = data(kRnnP);
  }
  auto target = [&](size_t i) -> T* { return i < out.size() && out[i] ? out[i]->data<T>() : nullptr; };
  T* y = target(0);
  T* y_h = target(1);
  T* y_c = a.cell == RnnCell::kLstm ? target(2) : nullptr;
  for (int64_t dir = 0; dir < d.directions; ++dir) {
    for (int64_t b = 0; b < d.batch; ++b) reference_sequence(a, d, ops, dir, b, y, y_h, y_c);
  }
  return Status::ok();
}

Status rnn_reference_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  OPFUSE_ASSIGN_OR_RETURN(RnnAttrs a, read_rnn_attrs(node));
  std::vector<const Tensor*> in(ctx.num_inputs());
  for (size_t i = 0; i < in.size(); ++i) in[i] = ctx.input_or_null(i);
  OPFUSE_ASSIGN_OR_RETURN(RnnDims d, check_rnn_tensors(node, a, in));
  const DType t = in[kRnnX]->dtype();
  const std::vector<int64_t> y_dims = a.batch_major ? std::vector<int64_t>{d.batch, d.seq, d.directions, d.hidden}
                                                    : std::vector<int64_t>{d.seq, d.directions, d.batch, d.hidden};
  const std::vector<int64_t> state_dims = a.batch_major ? std::vector<int64_t>{d.batch, d.directions, d.hidden}
                                                        : std::vector<int64_t>{d.directions, d.batch, d.hidden};
  std::vector<Tensor*> out(ctx.num_outputs());
  for (size_t i = 0; i < out.size(); ++i) {
    OPFUSE_ASSIGN_OR_RETURN(out[i], ctx.allocate_output(i, t, i == 0 ? y_dims : state_dims));
  }
  if (t == DType::kF64) return reference_of_type<double>(a, d, in, out);
  if (t == DType::kF32) return reference_of_type<float>(a, d, in, out);
  // f16: computed in f32 on converted copies, each output rounded back once.
  std::vector<Tensor> widened(in.size());
  std::vector<const Tensor*> in32(in.size(), nullptr);
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == nullptr) continue;
    if (in[i]->dtype() == DType::kF16) {
      OPFUSE_ASSIGN_OR_RETURN(widened[i], in[i]->cast(DType::kF32));
      in32[i] = &widened[i];
    } else {
      in32[i] = in[i];
    }
  }
  std::vector<Tensor> out32(out.size());
  std::vector<Tensor*> out32_ptrs(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    OPFUSE_ASSIGN_OR_RETURN(out32[i], Tensor::zeros(DType::kF32, out[i]->dims()));
    out32_ptrs[i] = &out32[i];
  }
  OPFUSE_TRY(reference_of_type<float>(a, d, in32, out32_ptrs));
  for (size_t i = 0; i < out.size(); ++i) {
    OPFUSE_ASSIGN_OR_RETURN(Tensor narrow, out32[i].cast(DType::kF16));
    std::copy_n(static_cast<const char*>(narrow.raw_data()), narrow.nbytes(), static_cast<char*>(out[i]->raw_data()));
  }
  return Status::ok();
}

// 2 * (input + hidden) multiply-adds per gate row, per step, entry and direction.
int64_t rnn_flops(const Node& node) {
  const Value* x = node.input(kRnnX);
  const Value* r = node.input(kRnnR);
  if (x == nullptr || r == nullptr || !x->shape || !r->shape) return -1;
  const auto xd = static_dims(*x->shape);
  const auto rd = static_dims(*r->shape);
  if (!xd || !rd || xd->size() != 3 || rd->size() != 3) return -1;
  const int64_t rows = (*rd)[0] * (*rd)[1];  // directions * gates * hidden
  return 2 * (*xd)[0] * (*xd)[1] * rows * ((*xd)[2] + (*rd)[2]);
}

OpDef rnn_record(std::string name, RnnCell cell) {
  OpDef d;
  d.name = std::move(name);
  d.min_opset = 11;  // opsets 7-10 are read as 11 (frontend/onnx/opsets.cc), 18-21 as 17
  d.max_opset = 17;
  d.min_inputs = 3;
  d.max_inputs = cell == RnnCell::kLstm ? 8 : 6;
  d.min_outputs = 1;
  d.max_outputs = cell == RnnCell::kLstm ? 3 : 2;
  d.attrs = {
      {"activation_alpha", AttrType::kFloats, std::nullopt, false},
      {"activation_beta", AttrType::kFloats, std::nullopt, false},
      {"activations", AttrType::kStrings, std::nullopt, false},
      {"clip", AttrType::kFloat, std::nullopt, false},
      {"direction", AttrType::kString, AttrValue(std::string("forward")), false},
      {"hidden_size", AttrType::kInt, std::nullopt, false},
      {"layout", AttrType::kInt, AttrValue(int64_t{0}), false},
  };
  if (cell == RnnCell::kLstm) d.attrs.push_back({"input_forget", AttrType::kInt, AttrValue(int64_t{0}), false});
  if (cell == RnnCell::kGru) d.attrs.push_back({"linear_before_reset", AttrType::kInt, AttrValue(int64_t{0}), false});
  d.kind = FusionKind::kOpaque;
  d.infer = infer_rnn;
  d.reference = rnn_reference_kernel;
  d.flops = rnn_flops;
  return d;
}

}  // namespace

std::vector<OpDef> rnn_ops() {
  std::vector<OpDef> ops;
  OpDef lstm = rnn_record("LSTM", RnnCell::kLstm);
  lstm.summary = "one LSTM layer over a sequence (gates i, o, f, c; peepholes, clip, any direction)";
  ops.push_back(std::move(lstm));
  OpDef gru = rnn_record("GRU", RnnCell::kGru);
  gru.summary = "one GRU layer over a sequence (gates z, r, h; linear_before_reset, clip, any direction)";
  ops.push_back(std::move(gru));
  OpDef rnn = rnn_record("RNN", RnnCell::kRnn);
  rnn.summary = "one simple RNN layer over a sequence: Ht = f(Xt W^T + Ht-1 R^T + Wb + Rb)";
  ops.push_back(std::move(rnn));
  return ops;
}

}  // namespace opfuse
