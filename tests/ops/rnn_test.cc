// LSTM, GRU and RNN (ops/rnn.cc, kernels/cpu/rnn_kernel.cc): the reference kernel against a hand
// computation and against an independent, plainly written recurrence (every direction, layout 1,
// sequence_lens, clip, peepholes, input_forget, linear_before_reset, activations with alpha and
// beta); the errors naming the node and input; the "cpu.rnn" kernel against the reference,
// NaN / Inf / denormal inputs included; a model with an LSTM compiled at O0..O3 against eager mode.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <random>

#include "core/random.h"
#include "kernels/cpu/rnn_kernel.h"
#include "kernels/kernel.h"
#include "kernels/onednn_test_util.h"
#include "ops/eager.h"
#include "ops/reference.h"
#include "pipelines/pipeline.h"
#include "runtime/compare.h"
#include "runtime/session.h"
#include "tensor_test_util.h"

namespace opfuse::testing {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// ---------------------------------------------------------------- the cases

struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
};

struct RnnCase {
  std::string op = "LSTM";
  std::string direction = "forward";
  int64_t seq = 4, batch = 3, input = 3, hidden = 5;
  bool batch_major = false;
  bool bias = true;
  std::vector<int32_t> lens;  // empty: no sequence_lens
  bool initial_state = true;
  bool peephole = false;
  bool input_forget = false;
  bool linear_before_reset = false;
  std::optional<float> clip;
  // Empty: the op's defaults. Else the node's activations and, for the independent computation,
  // each one's alpha and beta as they should be resolved from the lists below.
  std::vector<Activation> activations;
  std::vector<float> alphas, betas;  // the node's activation_alpha / activation_beta
  uint64_t seed = 1;
  // W, R and B are uniform in [-weight_scale, weight_scale]. Long sequences use PyTorch's
  // initialisation, 1 / sqrt(hidden): with weights of 1 a large hidden state is chaotic, and the
  // float rounding of any two correct implementations drifts apart exponentially over the steps.
  float weight_scale = 1;

  int64_t dirs() const { return direction == "bidirectional" ? 2 : 1; }
  int64_t gates() const { return op == "LSTM" ? 4 : op == "GRU" ? 3 : 1; }
  std::string label() const {
    return str_cat(op, " ", direction, batch_major ? " layout1" : "", lens.empty() ? "" : " lens",
                   peephole ? " peephole" : "", input_forget ? " input_forget" : "",
                   linear_before_reset ? " lbr" : "", clip ? " clip" : "", activations.empty() ? "" : " acts",
                   " s", seq, " b", batch, " i", input, " h", hidden);
  }
};

Tensor uniform(std::vector<int64_t> dims, uint64_t seed, float lo = -1, float hi = 1) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(dims)).value();
  Random rng(seed);
  fill_uniform(t, rng, lo, hi);
  return t;
}

// The node's inputs (nullopt: omitted), in ONNX order.
struct RnnInputs {
  Tensor x, w, r;
  std::optional<Tensor> b, lens, h0, c0, p;

  std::vector<std::optional<Tensor>> ordered(const std::string& op) const {
    std::vector<std::optional<Tensor>> v = {x, w, r, b, lens, h0};
    if (op == "LSTM") {
      v.push_back(c0);
      v.push_back(p);
    }
    while (!v.empty() && !v.back()) v.pop_back();
    return v;
  }
};

RnnInputs make_inputs(const RnnCase& c) {
  const int64_t dirs = c.dirs(), gh = c.gates() * c.hidden;
  RnnInputs in;
  in.x = uniform(c.batch_major ? std::vector<int64_t>{c.batch, c.seq, c.input}
                               : std::vector<int64_t>{c.seq, c.batch, c.input},
                 c.seed, -2, 2);
  const float s = c.weight_scale;
  in.w = uniform({dirs, gh, c.input}, c.seed + 1, -s, s);
  in.r = uniform({dirs, gh, c.hidden}, c.seed + 2, -s, s);
  if (c.bias) in.b = uniform({dirs, 2 * gh}, c.seed + 3, -s, s);
  if (!c.lens.empty()) in.lens = Tensor::from_vector<int32_t>({c.batch}, c.lens);
  const std::vector<int64_t> state = c.batch_major ? std::vector<int64_t>{c.batch, dirs, c.hidden}
                                                   : std::vector<int64_t>{dirs, c.batch, c.hidden};
  if (c.initial_state) {
    in.h0 = uniform(state, c.seed + 4);
    if (c.op == "LSTM") in.c0 = uniform(state, c.seed + 5);
  }
  if (c.peephole) in.p = uniform({dirs, 3 * c.hidden}, c.seed + 6);
  return in;
}

Attributes attrs_of(const RnnCase& c) {
  Attributes a;
  a["direction"] = c.direction;
  a["hidden_size"] = c.hidden;
  if (c.batch_major) a["layout"] = int64_t{1};
  if (c.input_forget) a["input_forget"] = int64_t{1};
  if (c.linear_before_reset) a["linear_before_reset"] = int64_t{1};
  if (c.clip) a["clip"] = *c.clip;
  if (!c.activations.empty()) {
    std::vector<std::string> names;
    for (const Activation& act : c.activations) names.push_back(act.name);
    a["activations"] = names;
  }
  if (!c.alphas.empty()) a["activation_alpha"] = c.alphas;
  if (!c.betas.empty()) a["activation_beta"] = c.betas;
  return a;
}

// ---------------------------------------------------------------- the independent computation

double apply(const Activation& a, double x) {
  const std::string& n = a.name;
  if (n == "Relu") return std::max(0.0, x);
  if (n == "Tanh") return std::tanh(x);
  if (n == "Sigmoid") return 1.0 / (1.0 + std::exp(-x));
  if (n == "Affine") return a.alpha * x + a.beta;
  if (n == "LeakyRelu") return x >= 0 ? x : a.alpha * x;
  if (n == "ThresholdedRelu") return x > a.alpha ? x : 0.0;
  if (n == "ScaledTanh") return a.alpha * std::tanh(a.beta * x);
  if (n == "HardSigmoid") return std::min(std::max(a.alpha * x + a.beta, 0.0), 1.0);
  if (n == "Elu") return x >= 0 ? x : a.alpha * (std::exp(x) - 1);
  if (n == "Softsign") return x / (1 + std::fabs(x));
  if (n == "Softplus") return std::log(1 + std::exp(x));
  ADD_FAILURE() << "unknown activation " << n;
  return 0;
}

// A [rows, cols] matrix of doubles read from a float tensor at an offset.
using Matrix = std::vector<std::vector<double>>;
Matrix matrix(const Tensor& t, int64_t offset, int64_t rows, int64_t cols) {
  Matrix m(static_cast<size_t>(rows), std::vector<double>(static_cast<size_t>(cols)));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) m[i][j] = t.data<float>()[offset + i * cols + j];
  }
  return m;
}
// m v
std::vector<double> times(const Matrix& m, const std::vector<double>& v) {
  std::vector<double> out(m.size(), 0.0);
  for (size_t i = 0; i < m.size(); ++i) {
    for (size_t j = 0; j < v.size(); ++j) out[i] += m[i][j] * v[j];
  }
  return out;
}
std::vector<double> slice(const std::vector<double>& v, int64_t block, int64_t n) {
  return {v.begin() + block * n, v.begin() + (block + 1) * n};
}

// Outputs Y, Y_h (, Y_c) as the ONNX equations read, computed entry by entry on time-major
// [seq][batch] vectors of doubles, in the layout the case asks for.
std::vector<Tensor> independent(const RnnCase& c, const RnnInputs& in) {
  const int64_t dirs = c.dirs(), h = c.hidden, g = c.gates();
  std::vector<Activation> acts = c.activations;
  const std::map<std::string, std::vector<std::string>> defaults = {
      {"LSTM", {"Sigmoid", "Tanh", "Tanh"}}, {"GRU", {"Sigmoid", "Tanh"}}, {"RNN", {"Tanh"}}};
  if (acts.empty()) {
    for (const std::string& n : defaults.at(c.op)) acts.push_back({n});
  }
  const size_t per_dir = defaults.at(c.op).size();
  if (acts.size() == per_dir && dirs == 2) {
    const std::vector<Activation> first = acts;
    acts.insert(acts.end(), first.begin(), first.end());
  }

  auto x_at = [&](int64_t t, int64_t b) {
    std::vector<double> v(static_cast<size_t>(c.input));
    const int64_t row = c.batch_major ? b * c.seq + t : t * c.batch + b;
    for (int64_t i = 0; i < c.input; ++i) v[i] = in.x.data<float>()[row * c.input + i];
    return v;
  };
  auto state_at = [&](const std::optional<Tensor>& s, int64_t d, int64_t b) {
    std::vector<double> v(static_cast<size_t>(h), 0.0);
    if (!s) return v;
    const int64_t row = c.batch_major ? b * dirs + d : d * c.batch + b;
    for (int64_t j = 0; j < h; ++j) v[j] = s->data<float>()[row * h + j];
    return v;
  };
  auto clip = [&](double v) { return c.clip ? std::min(std::max(v, -double(*c.clip)), double(*c.clip)) : v; };

  std::vector<int64_t> y_dims = c.batch_major ? std::vector<int64_t>{c.batch, c.seq, dirs, h}
                                              : std::vector<int64_t>{c.seq, dirs, c.batch, h};
  std::vector<int64_t> s_dims = c.batch_major ? std::vector<int64_t>{c.batch, dirs, h}
                                              : std::vector<int64_t>{dirs, c.batch, h};
  std::vector<Tensor> out = {Tensor::zeros(DType::kF32, y_dims).value(), Tensor::zeros(DType::kF32, s_dims).value(),
                             Tensor::zeros(DType::kF32, s_dims).value()};
  auto put = [&](Tensor& t, int64_t flat_row, const std::vector<double>& v) {
    for (int64_t j = 0; j < h; ++j) t.data<float>()[flat_row * h + j] = static_cast<float>(v[j]);
  };
  for (int64_t d = 0; d < dirs; ++d) {
    const Matrix W = matrix(in.w, d * g * h * c.input, g * h, c.input);
    const Matrix R = matrix(in.r, d * g * h * h, g * h, h);
    std::vector<double> wb(static_cast<size_t>(g * h), 0.0), rb(wb), p(static_cast<size_t>(3 * h), 0.0);
    for (int64_t n = 0; n < g * h; ++n) {
      if (in.b) {
        wb[n] = in.b->data<float>()[d * 2 * g * h + n];
        rb[n] = in.b->data<float>()[d * 2 * g * h + g * h + n];
      }
    }
    if (in.p) {
      for (int64_t n = 0; n < 3 * h; ++n) p[n] = in.p->data<float>()[d * 3 * h + n];
    }
    const Activation* f = &acts[d * per_dir];
    const bool reversed = c.direction == "reverse" || d == 1;
    for (int64_t b = 0; b < c.batch; ++b) {
      const int64_t len = c.lens.empty() ? c.seq : c.lens[b];
      std::vector<double> H = state_at(in.h0, d, b), C = state_at(in.c0, d, b);
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = reversed ? len - 1 - s : s;
        const std::vector<double> xw = times(W, x_at(t, b)), hr = times(R, H);
        std::vector<double> next(static_cast<size_t>(h));
        if (c.op == "RNN") {
          for (int64_t j = 0; j < h; ++j) next[j] = apply(f[0], clip(xw[j] + hr[j] + wb[j] + rb[j]));
        } else if (c.op == "GRU") {
          std::vector<double> z(static_cast<size_t>(h)), r(z), rh(z);
          for (int64_t j = 0; j < h; ++j) {
            z[j] = apply(f[0], clip(xw[j] + hr[j] + wb[j] + rb[j]));
            r[j] = apply(f[0], clip(xw[h + j] + hr[h + j] + wb[h + j] + rb[h + j]));
            rh[j] = r[j] * H[j];
          }
          const Matrix Rh(R.begin() + 2 * h, R.end());
          const std::vector<double> rh_r = times(Rh, rh);
          for (int64_t j = 0; j < h; ++j) {
            const int64_t n = 2 * h + j;
            const double pre = c.linear_before_reset ? xw[n] + r[j] * (hr[n] + rb[n]) + wb[n]
                                                     : xw[n] + rh_r[j] + rb[n] + wb[n];
            next[j] = (1 - z[j]) * apply(f[1], clip(pre)) + z[j] * H[j];
          }
        } else {
          const auto i_pre = slice(xw, 0, h), o_pre = slice(xw, 1, h), f_pre = slice(xw, 2, h), c_pre = slice(xw, 3, h);
          for (int64_t j = 0; j < h; ++j) {
            const double i = apply(f[0], clip(i_pre[j] + hr[j] + wb[j] + rb[j] + p[j] * C[j]));
            const double fg = c.input_forget ? 1 - i
                                             : apply(f[0], clip(f_pre[j] + hr[2 * h + j] + wb[2 * h + j] +
                                                                rb[2 * h + j] + p[2 * h + j] * C[j]));
            const double cell = apply(f[1], clip(c_pre[j] + hr[3 * h + j] + wb[3 * h + j] + rb[3 * h + j]));
            C[j] = fg * C[j] + i * cell;
            const double o = apply(f[0], clip(o_pre[j] + hr[h + j] + wb[h + j] + rb[h + j] + p[h + j] * C[j]));
            next[j] = o * apply(f[2], C[j]);
          }
        }
        H = next;
        put(out[0], c.batch_major ? (b * c.seq + t) * dirs + d : (t * dirs + d) * c.batch + b, H);
      }
      if (len == 0) {
        std::fill(H.begin(), H.end(), 0.0);
        std::fill(C.begin(), C.end(), 0.0);
      }
      const int64_t srow = c.batch_major ? b * dirs + d : d * c.batch + b;
      put(out[1], srow, H);
      put(out[2], srow, C);
    }
  }
  if (c.op != "LSTM") out.pop_back();
  return out;
}

// ---------------------------------------------------------------- running the node

struct Built {
  std::unique_ptr<onednn_test::OneNode> node;
  size_t outputs = 0;
};

Built build(const RnnCase& c, const RnnInputs& in, bool weights_constant = true) {
  std::vector<onednn_test::Arg> args;
  size_t i = 0;
  for (const std::optional<Tensor>& t : in.ordered(c.op)) {
    const bool weight = i == 1 || i == 2 || i == 3 || i == 7;
    if (!t) {
      args.push_back(onednn_test::Arg{Tensor(), false});
    } else {
      args.push_back(weight && weights_constant ? onednn_test::cst(*t) : onednn_test::in(*t));
    }
    ++i;
  }
  Built b;
  b.outputs = c.op == "LSTM" ? 3 : 2;
  b.node = onednn_test::make_node(c.op, args, attrs_of(c), static_cast<int>(b.outputs));
  return b;
}

std::vector<Tensor> run_kernel(const Built& b, const Kernel& k) {
  std::vector<Tensor> out = b.node->make_outputs();
  // Planned buffers hold whatever the arena held before: the kernel must write every element.
  for (Tensor& t : out) std::fill(t.data<float>(), t.data<float>() + t.numel(), 12345.0f);
  std::vector<Tensor*> ptrs;
  for (Tensor& t : out) ptrs.push_back(&t);
  const Status s = k.run(b.node->args(), ptrs);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return out;
}

std::vector<Tensor> run_ref(const Built& b) { return run_kernel(b, *make_reference_kernel(*b.node->node)); }

// Every output within `tolerance` of the largest magnitude; NaN where and only where `want`
// has NaN, infinities of the same sign at the same places.
void expect_close(const std::vector<Tensor>& got, const std::vector<Tensor>& want, double tolerance,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].dims(), want[o].dims()) << what << " output " << o;
    EXPECT_LE(max_relative_difference(got[o], want[o]), tolerance) << what << " output " << o;
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      const float g = got[o].data<float>()[i], w = want[o].data<float>()[i];
      if (std::isnan(w) || std::isinf(w) || std::isnan(g) || std::isinf(g)) {
        const bool same = (std::isnan(w) && std::isnan(g)) || g == w;
        EXPECT_TRUE(same) << what << " output " << o << " element " << i << ": got " << g << ", want " << w;
        if (!same) return;
      }
    }
  }
}

// ---------------------------------------------------------------- reference kernel

// RNN, hidden 1, input 1, two steps, worked by hand:
// h1 = tanh(0.5 * 1 + (-1) * 0 + 0.1 + 0.2), h2 = tanh(0.5 * 2 + (-1) * h1 + 0.1 + 0.2).
TEST(RnnReference, SimpleRnnByHand) {
  auto r = run_node("RNN", {in(tv<float>({2, 1, 1}, {1, 2})), cst(tv<float>({1, 1, 1}, {0.5f})),
                            cst(tv<float>({1, 1, 1}, {-1})), cst(tv<float>({1, 2}, {0.1f, 0.2f}))},
                    {{"hidden_size", int64_t{1}}}, 2);
  ASSERT_TRUE(r.build.is_ok()) << r.build.message();
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  EXPECT_EQ(r.shape(0), "[2,1,1,1]");
  EXPECT_EQ(r.shape(1), "[1,1,1]");
  const float h1 = std::tanh(0.8f), h2 = std::tanh(1.3f - h1);
  EXPECT_NEAR(r.outputs[0].data<float>()[0], h1, 1e-6);
  EXPECT_NEAR(r.outputs[0].data<float>()[1], h2, 1e-6);
  EXPECT_NEAR(r.outputs[1].data<float>()[0], h2, 1e-6);
}

// LSTM, hidden 1, one step, zero weights but the biases: i = o = f = sigmoid(b), c = tanh(b_c).
TEST(RnnReference, LstmOneStepByHand) {
  // Wb: i 0.5, o -0.25, f 1, c 2; Rb zero. Initial c 3.
  auto r = run_node("LSTM", {in(tv<float>({1, 1, 2}, {7, -7})), cst(Tensor::zeros(DType::kF32, {1, 4, 2}).value()),
                             cst(Tensor::zeros(DType::kF32, {1, 4, 1}).value()),
                             cst(tv<float>({1, 8}, {0.5f, -0.25f, 1, 2, 0, 0, 0, 0})), none(), none(),
                             in(tv<float>({1, 1, 1}, {3}))},
                    {{"hidden_size", int64_t{1}}}, 3);
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  const double c = sig(1) * 3 + sig(0.5) * std::tanh(2.0);
  const double h = sig(-0.25) * std::tanh(c);
  EXPECT_NEAR(r.outputs[2].data<float>()[0], c, 1e-6);
  EXPECT_NEAR(r.outputs[1].data<float>()[0], h, 1e-6);
  EXPECT_NEAR(r.outputs[0].data<float>()[0], h, 1e-6);
}

std::vector<RnnCase> reference_cases() {
  std::vector<RnnCase> cases;
  uint64_t seed = 100;
  for (std::string op : {"LSTM", "GRU", "RNN"}) {
    for (std::string dir : {"forward", "reverse", "bidirectional"}) {
      for (bool layout1 : {false, true}) {
        for (bool lens : {false, true}) {
          RnnCase c;
          c.op = op;
          c.direction = dir;
          c.batch_major = layout1;
          if (lens) c.lens = {4, 2, 0};
          c.seed = seed += 10;
          c.bias = !(layout1 && lens);
          c.initial_state = !(layout1 && !lens);
          c.peephole = op == "LSTM" && lens;
          c.linear_before_reset = op == "GRU" && layout1;
          cases.push_back(c);
        }
      }
    }
  }
  // Clip low enough to bind; input_forget; activations whose alpha/beta lists are consumed in
  // order by the functions that take them (HardSigmoid alpha beta, LeakyRelu alpha, ScaledTanh
  // alpha beta).
  RnnCase clipped;
  clipped.clip = 0.4f;
  clipped.peephole = true;
  cases.push_back(clipped);
  RnnCase forget;
  forget.input_forget = true;
  forget.direction = "bidirectional";
  cases.push_back(forget);
  RnnCase acts;
  acts.activations = {{"HardSigmoid", 0.3, 0.4}, {"LeakyRelu", 0.05, 0}, {"ScaledTanh", 1.5, 0.7}};
  acts.alphas = {0.3f, 0.05f, 1.5f};
  acts.betas = {0.4f, 0.7f};
  cases.push_back(acts);
  RnnCase gru_acts;
  gru_acts.op = "GRU";
  gru_acts.direction = "bidirectional";
  gru_acts.activations = {{"Affine", 0.5, 0.1}, {"Elu", 0.7, 0}, {"Softsign"}, {"Softplus"}};
  gru_acts.alphas = {0.5f, 0.7f};
  gru_acts.betas = {0.1f};
  cases.push_back(gru_acts);
  RnnCase rnn_acts;
  rnn_acts.op = "RNN";
  rnn_acts.direction = "bidirectional";
  rnn_acts.activations = {{"Relu"}, {"ThresholdedRelu", 0.2, 0}};
  rnn_acts.alphas = {0.2f};
  rnn_acts.clip = 1.0f;
  cases.push_back(rnn_acts);
  // Missing alphas take the ONNX operators' defaults (LeakyRelu 0.01, HardSigmoid 0.2 / 0.5).
  RnnCase defaults;
  defaults.op = "GRU";
  defaults.activations = {{"HardSigmoid", 0.2, 0.5}, {"LeakyRelu", 0.01, 0}};
  cases.push_back(defaults);
  return cases;
}

TEST(RnnReference, MatchesAnIndependentComputation) {
  for (const RnnCase& c : reference_cases()) {
    const RnnInputs in = make_inputs(c);
    const Built b = build(c, in);
    ASSERT_NE(b.node, nullptr) << c.label();
    expect_close(run_ref(b), independent(c, in), 1e-5, c.label());
  }
}

TEST(RnnReference, SequenceLensZeroTheTailAndKeepTheLastState) {
  RnnCase c;
  c.op = "GRU";
  c.direction = "bidirectional";
  c.lens = {2, 4, 0};
  const RnnInputs in = make_inputs(c);
  const std::vector<Tensor> out = run_ref(build(c, in));
  const float* y = out[0].data<float>();  // [seq, dirs, batch, hidden]
  const float* y_h = out[1].data<float>();  // [dirs, batch, hidden]
  auto at = [&](int64_t t, int64_t d, int64_t b, int64_t j) { return y[((t * 2 + d) * 3 + b) * 5 + j]; };
  for (int64_t j = 0; j < 5; ++j) {
    for (int64_t t = 2; t < 4; ++t) EXPECT_EQ(at(t, 0, 0, j), 0.0f);
    for (int64_t t = 0; t < 4; ++t) EXPECT_EQ(at(t, 1, 2, j), 0.0f);
    // Forward: the state after step len - 1; reverse: after the step at t = 0, its last.
    EXPECT_EQ(y_h[(0 * 3 + 0) * 5 + j], at(1, 0, 0, j));
    EXPECT_EQ(y_h[(1 * 3 + 0) * 5 + j], at(0, 1, 0, j));
    EXPECT_EQ(y_h[(1 * 3 + 1) * 5 + j], at(0, 1, 1, j));
    // Length 0: zero state, not the initial one.
    EXPECT_EQ(y_h[(0 * 3 + 2) * 5 + j], 0.0f);
  }
}

TEST(RnnReference, Float64AndFloat16FollowFloat32) {
  RnnCase c;
  c.direction = "bidirectional";
  c.peephole = true;
  const RnnInputs inputs = make_inputs(c);
  const std::vector<Tensor> want = run_ref(build(c, inputs));
  for (DType t : {DType::kF64, DType::kF16}) {
    std::vector<Arg> args;
    for (const std::optional<Tensor>& v : inputs.ordered(c.op)) {
      if (!v) {
        args.push_back(none());
      } else {
        args.push_back(in(v->dtype() == DType::kF32 ? v->cast(t).value() : *v));
      }
    }
    auto r = run_node("LSTM", args, attrs_of(c), 3);
    ASSERT_TRUE(r.run.is_ok()) << r.run.message();
    for (size_t o = 0; o < 3; ++o) {
      EXPECT_EQ(r.outputs[o].dtype(), t);
      EXPECT_LE(max_relative_difference(r.outputs[o].cast(DType::kF32).value(), want[o]),
                t == DType::kF16 ? 5e-3 : 1e-6);
    }
  }
}

// ---------------------------------------------------------------- shapes and errors

TEST(RnnShapes, OutputsFollowLayoutAndDirections) {
  Graph g;
  auto outs = infer_node("GRU",
                         {{DType::kF32, Shape{Dim::symbol("seq"), Dim::symbol("batch"), 8}},
                          {DType::kF32, Shape{2, 30, 8}},
                          {DType::kF32, Shape{2, 30, 10}}},
                         {{"direction", std::string("bidirectional")}}, 2, &g);
  ASSERT_TRUE(outs.is_ok()) << outs.status().message();
  EXPECT_EQ(shape_to_string(*(*outs)[0]->shape), "[seq,2,batch,10]");
  EXPECT_EQ(shape_to_string(*(*outs)[1]->shape), "[2,batch,10]");
  Graph g1;
  auto batch_major = infer_node("LSTM",
                                {{DType::kF32, Shape{3, Dim::symbol("seq"), 8}},
                                 {DType::kF32, Shape{1, 40, 8}},
                                 {DType::kF32, Shape{1, 40, 10}}},
                                {{"hidden_size", int64_t{10}}, {"layout", int64_t{1}}}, 3, &g1);
  ASSERT_TRUE(batch_major.is_ok()) << batch_major.status().message();
  EXPECT_EQ(shape_to_string(*(*batch_major)[0]->shape), "[3,seq,1,10]");
  EXPECT_EQ(shape_to_string(*(*batch_major)[2]->shape), "[3,1,10]");
}

// A user error that names the node ("n") and says `needle`.
void expect_user_error(const Status& s, const std::string& op, const std::string& needle) {
  ASSERT_FALSE(s.is_ok()) << op << ": expected an error saying " << needle;
  EXPECT_EQ(s.kind(), ErrorKind::kUser) << s.message();
  EXPECT_NE(s.message().find(op + " node 'n'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
}

TEST(RnnShapes, BadShapesNameTheNodeAndTheInput) {
  const Tensor x = uniform({4, 2, 3}, 1);
  const Tensor w = uniform({1, 20, 3}, 2), r = uniform({1, 20, 5}, 3);
  // W's rows are not 4 * hidden_size.
  auto bad_w = run_node("LSTM", {in(x), cst(uniform({1, 16, 3}, 2)), cst(r)}, {{"hidden_size", int64_t{5}}});
  expect_user_error(bad_w.build, "LSTM", "W (input 1) has shape [1,16,3]; expected [1,20,3]");
  // W's input size is not X's.
  auto bad_input = run_node("LSTM", {in(x), cst(uniform({1, 20, 4}, 2)), cst(r)});
  expect_user_error(bad_input.build, "LSTM", "W (input 1)");
  // Two directions' weights on a forward node.
  auto bad_dirs = run_node("GRU", {in(x), cst(uniform({2, 15, 3}, 2)), cst(uniform({2, 15, 5}, 3))});
  expect_user_error(bad_dirs.build, "GRU", "(num_directions, 3*hidden_size, input_size)");
  // initial_h for another batch size.
  auto bad_h0 = run_node("RNN", {in(x), cst(uniform({1, 5, 3}, 2)), cst(uniform({1, 5, 5}, 3)), none(), none(),
                                 in(uniform({1, 3, 5}, 4))});
  expect_user_error(bad_h0.build, "RNN", "initial_h (input 5)");
  // B of the wrong length; X of rank 2; sequence_lens of another dtype.
  auto bad_b = run_node("LSTM", {in(x), cst(w), cst(r), cst(uniform({1, 20}, 5))});
  expect_user_error(bad_b.build, "LSTM", "B (input 3)");
  auto bad_x = run_node("LSTM", {in(uniform({4, 3}, 1)), cst(w), cst(r)});
  expect_user_error(bad_x.build, "LSTM", "X (input 0)");
  auto bad_lens_type = run_node("LSTM", {in(x), cst(w), cst(r), none(), in(i64s({4, 4}))});
  expect_user_error(bad_lens_type.build, "LSTM", "sequence_lens (input 4) has dtype i64");
  // hidden_size disagreeing with R.
  auto bad_hidden = run_node("LSTM", {in(x), cst(w), cst(r)}, {{"hidden_size", int64_t{4}}});
  expect_user_error(bad_hidden.build, "LSTM", "W (input 1)");
}

TEST(RnnShapes, BadAttributesAndLengthsNameTheNode) {
  const Tensor x = uniform({4, 2, 3}, 1);
  const Tensor w = uniform({1, 5, 3}, 2), r = uniform({1, 5, 5}, 3);
  auto dir = run_node("RNN", {in(x), cst(w), cst(r)}, {{"direction", std::string("sideways")}});
  expect_user_error(dir.build, "RNN", "direction 'sideways'");
  auto act = run_node("RNN", {in(x), cst(w), cst(r)}, {{"activations", std::vector<std::string>{"Swish"}}});
  expect_user_error(act.build, "RNN", "activation 'Swish'");
  auto count = run_node("RNN", {in(x), cst(w), cst(r)},
                        {{"activations", std::vector<std::string>{"Tanh", "Tanh", "Tanh"}}});
  expect_user_error(count.build, "RNN", "activations lists 3 functions");
  auto layout = run_node("RNN", {in(x), cst(w), cst(r)}, {{"layout", int64_t{2}}});
  expect_user_error(layout.build, "RNN", "layout 2");
  // Lengths are values: checked when the node runs.
  auto lens = run_node("RNN", {in(x), cst(w), cst(r), none(), in(Tensor::from_vector<int32_t>({2}, {4, 5}))});
  ASSERT_TRUE(lens.build.is_ok()) << lens.build.message();
  expect_user_error(lens.run, "RNN", "sequence_lens (input 4) holds 5 for batch entry 1");
}

// ---------------------------------------------------------------- cpu.rnn

KernelImpl fast_impl(const std::string& op) {
  if (op == "LSTM") return rnn_lstm_kernel();
  if (op == "GRU") return rnn_gru_kernel();
  return rnn_simple_kernel();
}

// Creates cpu.rnn for the case and compares every output with the reference kernel's.
void check_fast(const RnnCase& c, const RnnInputs& in, double tolerance = 2e-5, int threads = 2) {
  SCOPED_TRACE(c.label());
  const Built b = build(c, in);
  ASSERT_NE(b.node, nullptr);
  const KernelImpl impl = fast_impl(c.op);
  const KernelCompileContext ctx{*b.node->node, b.node->constants, threads};
  ASSERT_TRUE(impl.supports(ctx));
  auto kernel = impl.create(ctx);
  ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();
  EXPECT_EQ((*kernel)->name(), "cpu.rnn");
  const std::vector<Tensor> want = run_ref(b);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  const std::vector<Tensor> got = run_kernel(b, **kernel);
  omp_set_num_threads(saved);
  expect_close(got, want, tolerance, c.label());
}

TEST(RnnKernel, MatchesTheReference) {
  uint64_t seed = 500;
  for (std::string op : {"LSTM", "GRU", "RNN"}) {
    for (std::string dir : {"forward", "reverse", "bidirectional"}) {
      // Hidden sizes below, at and across whole vectors and 4-vector panels; batches of one
      // row, a row pair, and a pair plus one.
      const std::vector<std::pair<int64_t, int64_t>> sizes = {{1, 5}, {2, 16}, {3, 13}, {1, 70}, {5, 32}};
      for (auto [batch, hidden] : sizes) {
        RnnCase c;
        c.op = op;
        c.direction = dir;
        c.batch = batch;
        c.hidden = hidden;
        c.input = hidden % 7 + 2;
        c.seq = 6;
        c.seed = seed += 10;
        c.batch_major = hidden % 2 == 1;
        c.bias = hidden != 16;
        c.initial_state = batch != 2;
        c.peephole = op == "LSTM" && hidden % 5 == 0;
        c.input_forget = op == "LSTM" && hidden == 32;
        c.linear_before_reset = op == "GRU" && hidden % 2 == 0;
        if (batch == 3 || batch == 5) {
          c.lens.clear();
          for (int64_t b = 0; b < batch; ++b) c.lens.push_back(static_cast<int32_t>((b * 5) % 7));
        }
        if (hidden == 13) c.clip = 0.5f;
        if (op == "RNN" && hidden == 32) c.activations = {{"Relu"}};
        if (op == "RNN" && hidden == 32 && dir == "bidirectional") c.activations = {{"Relu"}, {"Tanh"}};
        check_fast(c, make_inputs(c), 2e-5, (batch + hidden) % 2 == 0 ? 1 : 2);
      }
    }
  }
}

// A long sequence and the realistic shape: errors must not grow into the tolerance.
TEST(RnnKernel, LongSequencesStayClose) {
  RnnCase c;
  c.direction = "bidirectional";
  c.seq = 100;
  c.batch = 1;
  c.input = 64;
  c.hidden = 128;
  c.initial_state = false;
  c.weight_scale = 1 / std::sqrt(128.0f);
  check_fast(c, make_inputs(c), 1e-4);
  // Large enough (2^24 multiply-adds per direction and more) for the directions to run on two
  // threads.
  RnnCase wide = c;
  wide.op = "GRU";
  wide.seq = 200;
  wide.batch = 4;
  wide.lens = {200, 150, 1, 199};
  check_fast(wide, make_inputs(wide), 1e-4, 2);
}

TEST(RnnKernel, NonFiniteAndDenormalInputsPropagateAsTheReference) {
  for (std::string op : {"LSTM", "GRU", "RNN"}) {
    RnnCase c;
    c.op = op;
    c.direction = "bidirectional";
    c.batch = 4;
    c.hidden = 11;
    c.seq = 5;
    c.peephole = op == "LSTM";
    RnnInputs in = make_inputs(c);
    float* x = in.x.data<float>();  // [seq, batch, input]
    auto at = [&](int64_t t, int64_t b, int64_t i) -> float& { return x[(t * c.batch + b) * c.input + i]; };
    at(2, 0, 1) = kNaN;     // entry 0 from step 2 (forward) / up to step 2 (reverse)
    at(1, 1, 0) = kInf;     // entry 1: +Inf times weights of both signs: NaN
    at(3, 2, 2) = -kInf;
    for (int64_t i = 0; i < c.input; ++i) at(0, 3, i) = 1e-40f;  // denormals
    at(4, 3, 0) = -3e-39f;
    // An initial state entry with Inf and NaN: entry 2's state.
    in.h0->data<float>()[2 * c.hidden + 3] = kInf;
    if (op != "LSTM") in.h0->data<float>()[(c.batch + 2) * c.hidden] = kNaN;
    if (op == "LSTM") in.c0->data<float>()[c.hidden + 4] = -kInf;
    check_fast(c, in);
    // The reference does produce non-finite outputs here (so the comparison above saw them).
    const std::vector<Tensor> ref = run_ref(build(c, in));
    bool any_nan = false;
    for (float v : ref[0].values<float>()) any_nan = any_nan || std::isnan(v);
    EXPECT_TRUE(any_nan) << op;
  }
}

// Constant-weight f32 nodes with the activations it has; everything else is the reference's.
TEST(RnnKernel, DeclinesWhatItDoesNotCover) {
  RnnCase c;
  const RnnInputs in = make_inputs(c);
  const Built computed_weights = build(c, in, /*weights_constant=*/false);
  EXPECT_FALSE(rnn_lstm_kernel().supports({*computed_weights.node->node, computed_weights.node->constants, 1}));
  RnnCase elu = c;
  elu.activations = {{"Sigmoid"}, {"Elu", 1, 0}, {"Tanh"}};
  const Built other_activation = build(elu, make_inputs(elu));
  EXPECT_FALSE(rnn_lstm_kernel().supports({*other_activation.node->node, other_activation.node->constants, 1}));
  const Built plain = build(c, in);
  EXPECT_TRUE(rnn_lstm_kernel().supports({*plain.node->node, plain.node->constants, 1}));
}

// ---------------------------------------------------------------- graph mode

// x -> LSTM (bidirectional, constant weights) -> Y -> Relu, and Y_h as a second output: every
// level's compiled plan (cpu.rnn for the LSTM) gives eager mode's outputs.
// A bidirectional LSTM with peepholes, small enough for every level's tests.
RnnCase small_bidirectional_lstm() {
  RnnCase c;
  c.direction = "bidirectional";
  c.seq = 7;
  c.batch = 2;
  c.input = 6;
  c.hidden = 12;
  c.peephole = true;
  return c;
}

TEST(RnnGraph, LstmModelMatchesEagerAtEveryLevel) {
  const RnnCase c = small_bidirectional_lstm();
  const RnnInputs w = make_inputs(c);
  auto make_graph = [&]() {
    Graph g;
    Value* x = g.add_input("x", DType::kF32, w.x.shape());
    Value* h0 = g.add_input("h0", DType::kF32, w.h0->shape());
    std::vector<Value*> inputs = {x, g.add_constant("W", w.w), g.add_constant("R", w.r), g.add_constant("B", *w.b),
                                  nullptr, h0, g.add_constant("c0", *w.c0), g.add_constant("P", *w.p)};
    Node* lstm = g.add_node("LSTM", inputs, {"y", "y_h", "y_c"}, attrs_of(c), "lstm").value();
    Node* relu = g.add_node("Relu", {lstm->output(0)}, {"act"}, {}, "relu").value();
    g.add_output(relu->output(0));
    g.add_output(lstm->output(1));
    return g;
  };
  TensorMap inputs;
  inputs["x"] = w.x;
  inputs["h0"] = *w.h0;
  Graph eager_graph = make_graph();
  ASSERT_TRUE(infer_shapes(eager_graph).is_ok());
  auto want = run_eager(eager_graph, inputs);
  ASSERT_TRUE(want.is_ok()) << want.status().message();
  for (OptLevel level : {OptLevel::kO0, OptLevel::kO1, OptLevel::kO2, OptLevel::kO3}) {
    SessionOptions options;
    options.level = level;
    auto session = Session::create(make_graph(), options);
    ASSERT_TRUE(session.is_ok()) << session.status().message();
    auto plan = session->plan_for(inputs);
    ASSERT_TRUE(plan.is_ok()) << plan.status().message();
    bool fast = false;
    for (const std::string& step : (*plan)->describe_steps()) fast = fast || step.find("cpu.rnn") != std::string::npos;
    EXPECT_TRUE(fast) << opt_level_name(level);
    for (int run = 0; run < 2; ++run) {
      auto got = session->run(inputs);
      ASSERT_TRUE(got.is_ok()) << got.status().message();
      EXPECT_LE(max_relative_difference(*got, *want), 2e-5) << opt_level_name(level);
    }
  }
}

// A session compiles a plan per sequence length; cpu.rnn's packings of W, R, B and P are made
// by the first plan and found by the second (kernels/packed_weight_cache.h), the plans' graphs
// let the weights go, and each plan gives eager mode's outputs. `packings`: what one plan packs.
void expect_sequence_lengths_share_the_weights(RnnCase c, int packings) {
  SCOPED_TRACE(c.label());
  const RnnInputs w = make_inputs(c);
  Graph g;
  Shape x_shape = w.x.shape();
  x_shape[0] = Dim::symbol("seq");
  Value* x = g.add_input("x", DType::kF32, x_shape);
  std::vector<Value*> inputs = {x, g.add_constant("W", w.w), g.add_constant("R", w.r), g.add_constant("B", *w.b)};
  if (c.peephole) {
    inputs.insert(inputs.end(), {nullptr, nullptr, nullptr, g.add_constant("P", *w.p)});
  }
  Node* rnn = g.add_node(c.op, inputs, {"y", "y_h"}, attrs_of(c), "rnn").value();
  g.add_output(rnn->output(0));
  g.add_output(rnn->output(1));
  ASSERT_TRUE(infer_shapes(g).is_ok());
  for (OptLevel level : {OptLevel::kO1, OptLevel::kO3}) {
    SCOPED_TRACE(opt_level_name(level));
    SessionOptions options;
    options.level = level;
    auto session = Session::create(g.clone(), options);
    ASSERT_TRUE(session.is_ok()) << session.status().message();
    for (int64_t seq : {c.seq, c.seq - 3}) {
      RnnCase shorter = c;
      shorter.seq = seq;
      const TensorMap feed = {{"x", make_inputs(shorter).x}};
      auto want = run_eager(g, feed);
      auto got = session->run(feed);
      ASSERT_TRUE(want.is_ok() && got.is_ok()) << (got.is_ok() ? want.status().message() : got.status().message());
      EXPECT_LE(max_relative_difference(*got, *want), 2e-5) << "seq " << seq;
      auto plan = session->plan_for(feed);
      ASSERT_TRUE(plan.is_ok());
      const std::vector<std::string> steps = (*plan)->describe_steps();
      ASSERT_TRUE(std::any_of(steps.begin(), steps.end(),
                              [](const std::string& step) { return step.find("cpu.rnn") != std::string::npos; }));
      for (const char* weight : {"W", "R", "B"}) {
        const Value* v = (*plan)->graph().find_value(weight);
        ASSERT_NE(v, nullptr) << weight;
        EXPECT_EQ(v->constant()->raw_data(), nullptr) << "the plan's graph still holds " << weight;
      }
    }
    EXPECT_EQ(session->compile_count(), 2);
    EXPECT_EQ(session->packed_weights_reused(), packings) << "the second plan packed the weights again";
  }
}

TEST(RnnGraph, PlansForOtherSequenceLengthsShareThePackedWeights) {
  RnnCase lstm = small_bidirectional_lstm();
  lstm.initial_state = false;
  expect_sequence_lengths_share_the_weights(lstm, 5);  // W, B, P and R per direction
  RnnCase gru = lstm;
  gru.op = "GRU";
  gru.direction = "forward";
  gru.peephole = false;
  gru.linear_before_reset = true;
  expect_sequence_lengths_share_the_weights(gru, 5);  // W, B, Rb_h and R's two blocks
}

}  // namespace
}  // namespace opfuse::testing
