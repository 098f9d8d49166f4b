// Differential fuzzing of region fusion and the generated kernels: random DAGs of elementwise,
// broadcast, injective (Reshape, Transpose, Slice, Concat, Pad, Gather) and reduction ops (and
// Softmax/LayerNormalization, expanded) over random shapes with size-1 and odd dims, compiled at
// O2 and compared with eager mode (the reference kernels): max |got - want| / max(max |want|, 1)
// <= 1e-4 (inputs are uniform in [-1.5, 1.5]).
//
// Seeds are fixed (case i uses seed i). CI runs OPFUSE_FUZZ_CASES (default 300, a few seconds);
// a deeper run: OPFUSE_FUZZ_CASES=5000 ./build/tests/opfuse_tests --gtest_filter='RegionFuzz*';
// one seed: OPFUSE_FUZZ_FIRST=1759 OPFUSE_FUZZ_CASES=1. A failure prints the graph before and after.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "core/random.h"
#include "ir/text_format.h"
#include "ops/infer_shapes.h"
#include "pipelines/pipeline.h"
#include "runtime/compare.h"
#include "runtime/compiled_plan.h"
#include "runtime/session.h"

namespace opfuse {
namespace {

using Ints = std::vector<int64_t>;

class DagBuilder {
 public:
  explicit DagBuilder(uint64_t seed) : rng_(seed) { g_.opset_imports[""] = 17; }

  Graph build() {
    static const int64_t kDims[] = {1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 33};
    const int rank = pick(1, 4);
    Ints dims;
    for (int k = 0; k < rank; ++k) dims.push_back(kDims[pick(0, 10)]);
    while (numel_of(dims) > 6000) dims[pick(0, rank - 1)] = 1;
    pool_.push_back(input(dims));
    const int steps = pick(2, 9);
    for (int s = 0; s < steps; ++s) step();
    g_.add_output(pool_.back());
    if (pool_.size() > 3 && pick(0, 2) == 0) {
      Value* extra = pool_[pick(1, static_cast<int>(pool_.size()) - 2)];
      if (extra->producer() != nullptr && !extra->is_graph_output()) g_.add_output(extra);
    }
    return std::move(g_);
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  Ints dims_of(const Value* v) { return *static_dims(*v->shape); }

  Value* input(const Ints& dims) {
    return g_.add_input(str_cat("in", inputs_++), DType::kF32, make_shape(dims));
  }
  Value* ints(const Ints& v) {
    return g_.add_constant(str_cat("c", consts_++), Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v));
  }
  Value* scalar(float v) { return g_.add_constant(str_cat("c", consts_++), Tensor::scalar<float>(v)); }
  Value* node(const std::string& op, std::vector<Value*> ins, Attributes attrs = {}) {
    auto n = g_.add_node(op, std::move(ins), {""}, std::move(attrs));
    EXPECT_TRUE(n.is_ok()) << n.status().message();
    Status st = infer_shapes(g_);
    EXPECT_TRUE(st.is_ok()) << op << ": " << st.message();
    return (*n)->output(0);
  }
  Value* operand() {
    // Recent values more often: long chains; older ones: fan-out (a DAG, not a list).
    const int n = static_cast<int>(pool_.size());
    return pool_[pick(0, 2) ? n - 1 : pick(0, n - 1)];
  }
  // A shape broadcasting against dims: some dims 1, maybe fewer leading dims.
  Ints broadcast_partner(const Ints& dims) {
    Ints d = dims;
    for (int64_t& x : d) {
      if (pick(0, 2) == 0) x = 1;
    }
    const int drop = pick(0, static_cast<int>(d.size()));
    if (pick(0, 1)) d.erase(d.begin(), d.begin() + drop);
    return d;
  }

  void step() {
    Value* a = operand();
    const Ints d = dims_of(a);
    const int rank = static_cast<int>(d.size());
    Value* out = nullptr;
    switch (pick(0, 13)) {
      case 0: case 1: {
        static const char* kUnary[] = {"Tanh", "Sigmoid", "Erf", "Abs", "Neg", "Relu", "Sin", "Softsign", "HardSwish"};
        out = node(kUnary[pick(0, 8)], {a});
        if (pick(0, 3) == 0) out = node("Exp", {node("Tanh", {out})});
        break;
      }
      case 2: case 3: case 4: {
        static const char* kBinary[] = {"Add", "Sub", "Mul", "Max", "Min"};
        Value* b = nullptr;
        for (Value* v : pool_) {
          if (v != a && dims_of(v) == d && pick(0, 1)) b = v;
        }
        if (b == nullptr) b = input(broadcast_partner(d));
        out = pick(0, 1) ? node(kBinary[pick(0, 4)], {a, b}) : node(kBinary[pick(0, 4)], {b, a});
        if (pick(0, 4) == 0) out = node("Div", {out, node("Add", {node("Abs", {b}), scalar(1.0f)})});
        break;
      }
      case 5: case 6: {
        static const char* kReduce[] = {"ReduceSum", "ReduceMean", "ReduceMax"};
        const std::string op = kReduce[pick(0, 2)];
        const int64_t keep = rank == 1 ? 1 : pick(0, 1);
        Attributes attrs = {{"keepdims", keep}};
        if (op == "ReduceSum") {
          out = node(op, {a, ints({-1})}, attrs);
        } else {
          attrs["axes"] = Ints{rank - 1};
          out = node(op, {a}, attrs);
        }
        // Row-wise consumer: broadcast the row value back against the rows.
        if (keep && pick(0, 1)) out = node("Sub", {a, out});
        break;
      }
      case 7:
        out = pick(0, 1) ? node("Softmax", {a}, {{"axis", int64_t{-1}}})
                         : node("LayerNormalization", {a, input({d.back()}), input({d.back()})}, {{"epsilon", 1e-3f}});
        break;
      case 8: {
        Ints perm(rank);
        for (int k = 0; k < rank; ++k) perm[k] = k;
        std::shuffle(perm.begin(), perm.end(), rng_);
        out = node("Transpose", {a}, {{"perm", perm}});
        break;
      }
      case 9: {
        Ints shape = d;
        if (rank >= 2 && pick(0, 1)) {
          shape[rank - 2] *= shape[rank - 1];
          shape.pop_back();
        } else if (d.back() % 2 == 0) {
          shape.back() /= 2;
          shape.push_back(2);
        } else {
          shape.insert(shape.begin(), 1);
        }
        out = node("Reshape", {a, ints(shape)});
        break;
      }
      case 10: {
        const int axis = pick(0, rank - 1);
        if (d[axis] < 2) return;
        const int64_t start = pick(0, static_cast<int>(d[axis]) - 2);
        out = node("Slice", {a, ints({start}), ints({d[axis]}), ints({axis}), ints({pick(1, 2)})});
        break;
      }
      case 11: {
        const int axis = pick(0, rank - 1);
        Ints od = d;
        od[axis] = pick(1, 3);
        out = node("Concat", {a, input(od)}, {{"axis", int64_t{axis}}});
        break;
      }
      case 12: {
        Ints pads(2 * rank, 0);
        pads[pick(0, rank - 1)] = pick(0, 2);
        pads[rank + pick(0, rank - 1)] = pick(1, 2);
        out = node("Pad", {a, ints(pads), scalar(0.5f)});
        break;
      }
      case 13: {
        const int axis = pick(0, rank - 1);
        Ints idx;
        const int count = pick(1, 4);
        for (int i = 0; i < count; ++i) idx.push_back(pick(-static_cast<int>(d[axis]), static_cast<int>(d[axis]) - 1));
        out = node("Gather", {a, ints(idx)}, {{"axis", int64_t{axis}}});
        break;
      }
    }
    if (out != nullptr) pool_.push_back(out);
  }

  std::mt19937_64 rng_;
  Graph g_;
  std::vector<Value*> pool_;
  int inputs_ = 0, consts_ = 0;
};

int fuzz_cases() {
  const char* env = std::getenv("OPFUSE_FUZZ_CASES");
  return env ? std::max(1, std::atoi(env)) : 300;
}

TEST(RegionFuzzTest, RandomDagsMatchEager) {
  const int cases = fuzz_cases();
  int regions = 0, fused_cases = 0;
  const char* first_env = std::getenv("OPFUSE_FUZZ_FIRST");  // reproduce one seed: FIRST=s CASES=1
  const int first = first_env ? std::atoi(first_env) : 0;
  for (int seed = first; seed < first + cases; ++seed) {
    Graph g = DagBuilder(static_cast<uint64_t>(seed)).build();
    const std::string text = print_graph(g);
    TensorMap inputs;
    for (const Value* v : g.inputs()) {
      Tensor t = Tensor::zeros(DType::kF32, *static_dims(*v->shape)).value();
      Random rng(static_cast<uint64_t>(seed) * 131 + inputs.size());
      fill_uniform(t, rng, -1.5f, 1.5f);
      inputs[v->name()] = t;
    }
    SessionOptions eager_options;
    eager_options.mode = ExecutionMode::kEager;
    auto eager = Session::create(g.clone(), eager_options);
    ASSERT_TRUE(eager.is_ok()) << "seed " << seed << ": " << eager.status().message();
    auto want = eager->run(inputs);
    ASSERT_TRUE(want.is_ok()) << "seed " << seed << ": " << want.status().message();
    SessionOptions options;
    options.level = OptLevel::kO2;
    options.threads = 1 + seed % 2;
    auto session = Session::create(std::move(g), options);
    ASSERT_TRUE(session.is_ok()) << "seed " << seed << ": " << session.status().message();
    auto got = session->run(inputs);
    ASSERT_TRUE(got.is_ok()) << "seed " << seed << ": " << got.status().message();
    // Relative to max(|want|, 1): inputs are O(1), and a result that is a cancellation (the sum
    // of centred values) is rounding noise on both sides, to be judged at the inputs' scale.
    double diff = 0;
    for (const auto& [name, w] : *want) {
      const Tensor& o = got->at(name);
      double scale = 1.0, err = 0;
      for (int64_t i = 0; i < w.numel(); ++i) {
        scale = std::max(scale, std::abs(static_cast<double>(w.data<float>()[i])));
        const double d = std::abs(static_cast<double>(o.data<float>()[i]) - w.data<float>()[i]);
        err = std::isnan(d) ? 1e9 : std::max(err, d);
      }
      diff = std::max(diff, err / scale);
    }
    auto plan = session->plan_for(inputs);
    EXPECT_LE(diff, 1e-4) << "seed " << seed << "\n" << text << "\nfused:\n" << print_graph((*plan)->graph());
    int here = 0;
    for (const Node* n : (*plan)->graph().nodes()) here += n->op_type() == "FusedRegion";
    regions += here;
    fused_cases += here > 0;
  }
  // The fuzzer must exercise the fuser, not only the unfused path.
  EXPECT_GE(fused_cases, cases / 3) << regions << " regions";
  std::printf("region fuzz: %d cases, %d with regions, %d regions\n", cases, fused_cases, regions);
}

}  // namespace
}  // namespace opfuse
