// An LSTM cell written out in primitives (PyTorch's nn.LSTMCell in a Python loop, which exports
// every step unrolled) becomes an ONNX LSTM over one step, which runs on cpu.rnn: weights packed
// once, both products and the gates in one kernel instead of two GEMMs, a Split and two
// generated regions per step.
//
//   before (one step)                              after
//     gates = x·Wᵀ + h·Rᵀ + b   (Gemm/MatMul/Add,     LSTM(Unsqueeze(x), W', R', B', "",
//             or a FusedGemm with a residual add)         Unsqueeze(h), Unsqueeze(c)) {hidden_size}
//     i, f, g, o = Split(gates, 4, axis 1)            h' = Squeeze(Y_h),  c' = Squeeze(Y_c)
//     c' = σ(f)·c + σ(i)·tanh(g)
//     h' = σ(o)·tanh(c')
//
// Algebra: ONNX's LSTM step (default activations, no peepholes, forward) computes exactly these
// gates with its W, R rows in the order i, o, f, c; which chunk of the Split is which gate is read
// from the structure (the chunk under the Sigmoid that multiplies c is f, and so on), and W', R'
// and the summed biases are those rows of the exporter's weights in ONNX's order. Conditions: f32
// [B, 4H] gates from exactly two products with constant weights (x: [B, I], h: [B, H]) plus
// constant biases of 4H, each intermediate read once; the four chunks are the four outputs of one
// Split into equal parts along the last axis; every node of the cell is private to it except c',
// which the next step reads (its readers move to the new Squeeze).
#include <algorithm>
#include <functional>

#include "ops/fused.h"
#include "passes/pass_util.h"
#include "patterns/families.h"

namespace opfuse::patterns {
namespace {

// One product x·Wᵀ of the gates: `weight` is W as [4H, K] (transposed from the exporter's form
// when it was [K, 4H]).
struct Product {
  Value* input = nullptr;
  Tensor weight;
  std::string source;  // the weight constant's name
};
struct Gates {
  std::vector<Product> products;
  std::vector<float> bias;          // 4H, the sum of every constant term
  std::vector<std::string> biases;  // their names
  int64_t batch = 0;
};

// W as [rows, cols] from a constant stored [rows, cols] (transposed = false) or [cols, rows].
std::optional<Tensor> as_rows(const Tensor& w, bool transposed) {
  if (w.dtype() != DType::kF32 || w.rank() != 2) return std::nullopt;
  if (!transposed) return w;
  const int64_t r = w.dim(1), c = w.dim(0);
  std::vector<float> out(static_cast<size_t>(r * c));
  const float* src = w.data<float>();
  for (int64_t i = 0; i < r; ++i) {
    for (int64_t j = 0; j < c; ++j) out[i * c + j] = src[j * r + i];
  }
  return Tensor::from_vector<float>({r, c}, out);
}

// A constant term: 4H values, or [B, 4H] with every row the same (h0 · R + b folded for a zero
// initial state h0: the bias broadcast over the batch).
bool add_bias(const Value* v, const Tensor& t, Gates& g) {
  const int64_t n = static_cast<int64_t>(g.bias.size());
  if (t.dtype() != DType::kF32 || (t.numel() != n && t.numel() != g.batch * n)) return false;
  const float* data = t.data<float>();
  for (int64_t i = n; i < t.numel(); ++i) {
    if (data[i] != data[i % n]) return false;
  }
  g.biases.push_back(v->name());
  for (int64_t i = 0; i < n; ++i) g.bias[static_cast<size_t>(i)] += data[i];
  return true;
}

// Splits `v` (the gates, or a term of them) into products and constant terms; false when some
// part is anything else or an intermediate is read elsewhere too.
bool collect_terms(const Value* v, Gates& g, bool top) {
  if (const Tensor* c = constant_data(v)) return add_bias(v, *c, g);
  const Node* n = v->producer();
  if (n == nullptr || (!top && (v->uses().size() != 1 || v->is_graph_output()))) return false;
  const AttrReader attrs(*n);
  if (n->domain().empty() && n->op_type() == "Add") {
    return collect_terms(n->input(0), g, false) && collect_terms(n->input(1), g, false);
  }
  const bool gemm = n->op_type() == "Gemm" && n->domain().empty();
  const bool matmul = n->op_type() == "MatMul" && n->domain().empty();
  const bool fused = n->domain() == kFusedDomain && (n->op_type() == "FusedGemm" || n->op_type() == "FusedMatMul");
  if (!gemm && !matmul && !fused) return false;
  const bool is_gemm = gemm || n->op_type() == "FusedGemm";
  if (is_gemm && (attrs.get_float("alpha") != 1.0f || attrs.get_float("beta") != 1.0f || attrs.get_int("transA") != 0)) {
    return false;
  }
  if (fused) {
    // An epilogue of nothing or of the residual add (another term of the sum) only.
    auto epilogue = read_epilogue(*n);
    if (!epilogue.is_ok() || epilogue->size() > 1) return false;
    if (epilogue->size() == 1 && (!(*epilogue)[0].spec->reads_residual || !n->has_input(3) ||
                                  !collect_terms(n->input(3), g, false))) {
      return false;
    }
  }
  const Tensor* w = constant_data(n->input(1));
  const bool stored_transposed = !is_gemm || attrs.get_int("transB") == 0;
  auto rows = w != nullptr ? as_rows(*w, stored_transposed) : std::nullopt;
  if (!rows || known_dims(n->input(0)).value_or(std::vector<int64_t>{}).size() != 2) return false;
  g.products.push_back({n->input(0), std::move(*rows), n->input(1)->name()});
  return !n->has_input(2) || collect_terms(n->input(2), g, false);
}

// The gates value and the chunk index of each of i, f, g, o, when they are the four outputs of
// one Split into equal parts along the last axis of a [B, 4H] value.
struct Chunks {
  Value* gates = nullptr;
  int index[4] = {};  // i, f, g, o
};
std::optional<Chunks> chunks_of(const Match& m) {
  const char* names[4] = {"i", "f", "g", "o"};
  Chunks c;
  const Node* split = nullptr;
  for (int k = 0; k < 4; ++k) {
    const Value* v = m.value(names[k]);
    const Node* p = v->producer();
    if (p == nullptr || p->op_type() != "Split" || !p->domain().empty() || (split != nullptr && p != split)) {
      return std::nullopt;
    }
    split = p;
    c.index[k] = v->producer_output();
    if (v->uses().size() != 1 || v->is_graph_output()) return std::nullopt;
  }
  for (int a = 0; a < 4; ++a) {
    for (int b = a + 1; b < 4; ++b) {
      if (c.index[a] == c.index[b]) return std::nullopt;
    }
  }
  const auto in = known_dims(split->input(0));
  if (split->outputs().size() != 4 || !in || in->size() != 2 || (*in)[1] % 4 != 0) return std::nullopt;
  const int64_t axis = AttrReader(*split).get_int("axis");
  if (axis != 1 && axis != -1) return std::nullopt;
  for (const Value* out : split->outputs()) {
    if (known_dims(out) != std::vector<int64_t>{(*in)[0], (*in)[1] / 4}) return std::nullopt;
  }
  c.gates = split->input(0);
  return c;
}

// The cell's parts, checked: gates, chunks, and which product reads x and which h.
struct Cell {
  Chunks chunks;
  Gates gates;
  int64_t batch = 0, hidden = 0;
  int x_index = -1, h_index = -1;  // into gates.products; h -1: h0 is zero (folded into the biases)
  const Product* x() const { return x_index < 0 ? nullptr : &gates.products[static_cast<size_t>(x_index)]; }
  const Product* h() const { return h_index < 0 ? nullptr : &gates.products[static_cast<size_t>(h_index)]; }
};

// The recurrent weights of the step after the cell (a product reading h' through [4H, H]), for a
// cell whose h0 is zero: sharing them lets merge_rnn_steps join the first step to the rest.
std::optional<Product> read_next_r(const Value* h_next, int64_t hidden) {
  for (const Use& u : h_next->uses()) {
    const Node& n = *u.node;
    if (u.input_index != 0 || !n.has_input(1)) continue;
    const bool gemm = n.op_type() == "Gemm" || n.op_type() == "FusedGemm";
    if (!gemm && n.op_type() != "MatMul" && n.op_type() != "FusedMatMul") continue;
    const Tensor* w = constant_data(n.input(1));
    auto rows = w != nullptr ? as_rows(*w, !gemm || AttrReader(n).get_int("transB") == 0) : std::nullopt;
    if (rows && rows->dim(0) == 4 * hidden && rows->dim(1) == hidden) {
      return Product{nullptr, std::move(*rows), n.input(1)->name()};
    }
  }
  return std::nullopt;
}
std::optional<Cell> read_cell(const Match& m) {
  Cell cell;
  auto chunks = chunks_of(m);
  if (!chunks) return std::nullopt;
  cell.chunks = *chunks;
  const auto gd = known_dims(chunks->gates);
  if (!gd || chunks->gates->dtype != DType::kF32) return std::nullopt;
  cell.batch = (*gd)[0];
  cell.hidden = (*gd)[1] / 4;
  cell.gates.bias.assign(static_cast<size_t>(4 * cell.hidden), 0.0f);
  cell.gates.batch = cell.batch;
  if (chunks->gates->uses().size() != 1 || !collect_terms(chunks->gates, cell.gates, true)) return std::nullopt;
  const size_t products = cell.gates.products.size();
  if (products != 1 && products != 2) return std::nullopt;
  // The recurrent product reads [B, H] through [4H, H]; with I = H either order is the same step.
  // One product: the initial state h0 is zero and h0 · R folded into a constant (an exporter's
  // zeros-initialised loop); then any R is exact, and the next step's is taken (read_next_r).
  for (size_t first = 0; first < products; ++first) {
    const Product& a = cell.gates.products[first];
    const Product* b = products == 2 ? &cell.gates.products[1 - first] : nullptr;
    const auto ad = known_dims(a.input);
    if (!ad || ad->size() != 2 || a.input->dtype != DType::kF32) return std::nullopt;
    bool fits = a.weight.dim(0) == 4 * cell.hidden && (*ad)[0] == cell.batch && (*ad)[1] == a.weight.dim(1);
    if (b != nullptr) {
      const auto bd = known_dims(b->input);
      fits = fits && bd && b->input->dtype == DType::kF32 && b->weight.dim(0) == 4 * cell.hidden &&
             b->weight.dim(1) == cell.hidden && *bd == std::vector<int64_t>{cell.batch, cell.hidden};
    }
    if (fits) {
      cell.x_index = static_cast<int>(first);
      cell.h_index = b != nullptr ? static_cast<int>(1 - first) : -1;
      break;
    }
  }
  if (cell.x_index < 0) return std::nullopt;
  const auto cd = known_dims(m.value("c"));
  if (!cd || *cd != std::vector<int64_t>{cell.batch, cell.hidden} || m.value("c")->dtype != DType::kF32) {
    return std::nullopt;
  }
  return cell;
}

bool fits(const Match& m) { return read_cell(m).has_value(); }

// Every node of the cell but c' is read only inside it.
Reason check_cell(const Match& m, const PassContext&) {
  for (const Node* n : m.nodes) {
    if (n == m.root || n == m.node("c_next")) continue;
    if (Reason why = private_to_match(n->output(0), m); !why.empty()) return why;
  }
  return {};
}

// ONNX's gate order i, o, f, c from the chunks' order (i, f, g, o as matched).
Tensor onnx_rows(const Tensor& w, const Chunks& c, int64_t hidden) {
  const int order[4] = {c.index[0], c.index[3], c.index[1], c.index[2]};
  const int64_t cols = w.dim(1);
  std::vector<float> out;
  out.reserve(static_cast<size_t>(w.numel()));
  for (int gate : order) {
    const float* from = w.data<float>() + gate * hidden * cols;
    out.insert(out.end(), from, from + hidden * cols);
  }
  return Tensor::from_vector<float>({1, 4 * hidden, cols}, out);
}

Result<Node*> rewrite_cell(Graph& graph, const Match& m) {
  const std::optional<Cell> cell = read_cell(m);
  if (!cell) return Status::internal_error("lstm_cell: the match no longer reads as a cell");
  const int64_t hidden = cell->hidden;
  const std::string name = m.root->name();
  // Every step of an unrolled sequence reads the same weights: its re-laid-out constants are
  // made once, named after their sources and the gate order, and shared.
  const Chunks& chunks = cell->chunks;
  const std::string order = str_cat("_lstm_", chunks.index[0], chunks.index[3], chunks.index[1], chunks.index[2]);
  auto shared = [&](const std::string& key, const std::function<Tensor()>& make) {
    Value* v = graph.find_value(key);
    return v != nullptr && v->is_constant() ? v : graph.add_constant(key, make());
  };
  Value* w = shared(cell->x()->source + order + "_W", [&] { return onnx_rows(cell->x()->weight, chunks, hidden); });
  Value* r = nullptr;
  std::optional<Product> next_r = cell->h() == nullptr ? read_next_r(m.root->output(0), hidden) : std::nullopt;
  if (const Product* rp = cell->h() != nullptr ? cell->h() : next_r ? &*next_r : nullptr) {
    r = shared(rp->source + order + "_R", [&] { return onnx_rows(rp->weight, chunks, hidden); });
  } else {
    r = graph.add_constant(name + "_lstm_R", Tensor::zeros(DType::kF32, {1, 4 * hidden, hidden}).value());
  }
  std::string bias_key;
  for (const std::string& b : cell->gates.biases) bias_key += (bias_key.empty() ? "" : "+") + b;
  Value* bv = shared(bias_key + order + "_B", [&] {
    Tensor wb = onnx_rows(Tensor::from_vector<float>({4 * hidden, 1}, cell->gates.bias), chunks, hidden);
    std::vector<float> b(wb.data<float>(), wb.data<float>() + 4 * hidden);
    b.resize(static_cast<size_t>(8 * hidden), 0.0f);  // R's bias: the exporter's biases summed in W's
    return Tensor::from_vector<float>({1, 8 * hidden}, b);
  });
  Value* axis0 = shared("lstm_step_axis", [] { return Tensor::from_vector<int64_t>({1}, {0}); });
  auto unsqueeze = [&](Value* v, const std::string& what) -> Result<Value*> {
    OPFUSE_ASSIGN_OR_RETURN(Node * n, graph.add_node("Unsqueeze", {v, axis0}, {name + "_" + what}, {}, name + "_" + what));
    Value* out = n->output(0);
    out->dtype = DType::kF32;
    std::vector<int64_t> d = *known_dims(v);
    d.insert(d.begin(), 1);
    out->shape = make_shape(d);
    return out;
  };
  OPFUSE_ASSIGN_OR_RETURN(Value * x3, unsqueeze(cell->x()->input, "x"));
  Value* h3 = nullptr;
  if (cell->h() != nullptr) {
    OPFUSE_ASSIGN_OR_RETURN(h3, unsqueeze(cell->h()->input, "h"));
  } else {
    h3 = shared(str_cat("lstm_zero_state_", cell->batch, "x", hidden),
                [&] { return Tensor::zeros(DType::kF32, {1, cell->batch, hidden}).value(); });
  }
  OPFUSE_ASSIGN_OR_RETURN(Value * c3, unsqueeze(m.value("c"), "c"));
  Attributes attrs;
  attrs["hidden_size"] = AttrValue(hidden);
  OPFUSE_ASSIGN_OR_RETURN(Node * lstm, graph.add_node("LSTM", {x3, w, r, bv, nullptr, h3, c3},
                                                      {name + "_Y", name + "_Y_h", name + "_Y_c"}, attrs, name + "_lstm"));
  const std::vector<int64_t> state = {1, cell->batch, hidden};
  lstm->output(0)->dtype = DType::kF32;
  lstm->output(0)->shape = make_shape({1, 1, cell->batch, hidden});
  for (size_t i : {1, 2}) {
    lstm->output(i)->dtype = DType::kF32;
    lstm->output(i)->shape = make_shape(state);
  }
  // c' moves to a Squeeze of Y_c under its own name, for the next step.
  Value* c_next = m.node("c_next")->output(0);
  const std::string c_name = c_next->name();
  OPFUSE_ASSIGN_OR_RETURN(Node * c_squeeze, graph.add_node("Squeeze", {lstm->output(2), axis0}, {""}, {}, name + "_c_next"));
  Value* c_out = c_squeeze->output(0);
  c_out->dtype = DType::kF32;
  c_out->shape = c_next->shape;
  graph.replace_all_uses(c_next, c_out);
  OPFUSE_ASSIGN_OR_RETURN(Node * h_squeeze, replace_match(graph, m, "Squeeze", "", {lstm->output(1), axis0}, {}, name));
  graph.remove_dead_values();
  OPFUSE_TRY(graph.rename_value(c_out, c_name));
  return h_squeeze;
}

}  // namespace

std::vector<Pattern> lstm_cell_patterns() {
  const PatternNode c_next =
      op("Add", {op("Mul", {op("Sigmoid", {any("f")}), any("c")}).as("fc"),
                 op("Mul", {op("Sigmoid", {any("i")}), op("Tanh", {any("g")})}).as("ig")})
          .as("c_next");
  Pattern p;
  p.name = "lstm_cell";
  p.family = "lstm_cell";
  p.tree = op("Mul", {op("Sigmoid", {any("o")}), op("Tanh", {c_next})});
  p.condition = fits;
  p.check = check_cell;
  p.rewrite = rewrite_cell;
  p.interior_must_be_private = false;  // c' is the next step's; check_cell guards the rest
  p.describe = [](const Match& m) { return str_cat("LSTM cell ending in '", m.root->name(), "' as one LSTM step"); };
  return {std::move(p)};
}

}  // namespace opfuse::patterns
