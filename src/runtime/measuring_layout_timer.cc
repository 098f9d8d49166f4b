#include "runtime/measuring_layout_timer.h"

#include <omp.h>

#include <algorithm>
#include <chrono>

#include "kernels/kernel.h"
#include "ops/fused.h"
#include "passes/pass_util.h"
#include "passes/tuning_record.h"

namespace opfuse {
namespace {

// Per kernel and layout: one warm-up run, then runs until this budget is spent (at least
// kMinRuns, at most kMaxRuns), median. A conv of ResNet-50 takes 0.2-1.5 ms.
constexpr double kBudgetMs = 3.0;
constexpr int kMinRuns = 3;
constexpr int kMaxRuns = 7;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::vector<int64_t> blocked_dims(const std::vector<int64_t>& d, int64_t block) {
  const int64_t l = block == 0 ? d[1] : block;
  return {d[0], ceil_div(d[1], l), d[2], d[3], l};
}

// Creates the kernel graph mode would pick for `graph`'s only node and times it on zero-filled
// inputs; negative when the kernel is the reference fallback, is not `want` (when given), or fails.
double time_node(const Graph& graph, const Node& node, std::string_view want = {}) {
  std::vector<const Tensor*> constants;
  for (size_t i = 0; i < node.inputs().size(); ++i) {
    constants.push_back(node.has_input(i) ? constant_data(node.input(i)) : nullptr);
  }
  KernelCompileContext ctx{node, constants, omp_get_max_threads()};
  auto kernel = create_kernel(ctx);
  if (!kernel.is_ok() || (*kernel)->name() == "reference" || (!want.empty() && (*kernel)->name() != want)) return -1;
  std::vector<Tensor> storage;
  storage.reserve(node.inputs().size() + 1);
  std::vector<const Tensor*> inputs;
  for (size_t i = 0; i < node.inputs().size(); ++i) {
    if (!node.has_input(i)) {
      inputs.push_back(nullptr);
    } else if (constants[i] != nullptr) {
      inputs.push_back(constants[i]);
    } else {
      auto t = Tensor::zeros(DType::kF32, *known_dims(node.input(i)));
      if (!t.is_ok()) return -1;
      storage.push_back(std::move(*t));
      inputs.push_back(&storage.back());
    }
  }
  auto y = Tensor::zeros(DType::kF32, *known_dims(node.output(0)));
  if (!y.is_ok()) return -1;
  Tensor* outputs[] = {&*y};
  using Clock = std::chrono::steady_clock;
  std::vector<double> runs;
  double spent = 0;
  // Run 0 warms caches and pages; a kernel slower than the whole budget is timed once more.
  int min_runs = kMinRuns;
  for (int i = 0; i <= kMaxRuns && (i <= min_runs || spent < kBudgetMs); ++i) {
    const auto start = Clock::now();
    if (!(*kernel)->run(inputs, outputs).is_ok()) return -1;
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (i == 0 && ms > kBudgetMs) min_runs = 1;
    if (i > 0) {
      runs.push_back(ms);
      spent += ms;
    }
  }
  std::nth_element(runs.begin(), runs.begin() + runs.size() / 2, runs.end());
  return runs[runs.size() / 2];
}

}  // namespace

double MeasuringLayoutTimer::conv_ms(const Node& conv, int64_t block, bool x_plain) {
  const auto x = known_dims(conv.input(0));
  const auto y = known_dims(conv.output(0));
  const Tensor* w = constant_data(conv.input(1));
  const Tensor* b = conv.has_input(2) ? constant_data(conv.input(2)) : nullptr;
  const auto key = conv_timing_key(conv, block, x_plain);
  if (!key || w == nullptr || (conv.has_input(2) && b == nullptr)) return -1;
  if (auto it = cache_.find(*key); it != cache_.end()) return it->second;
  Graph g;
  std::vector<Value*> inputs = {g.add_input("x", DType::kF32, make_shape(x_plain ? *x : blocked_dims(*x, block))),
                                g.add_constant("w", *w), b != nullptr ? g.add_constant("b", *b) : nullptr};
  if (conv.has_input(3)) inputs.push_back(g.add_input("r", DType::kF32, make_shape(blocked_dims(*y, block))));
  Attributes attrs = conv.attrs;
  attrs["block"] = AttrValue(block);
  double ms = -1;
  auto node = g.add_node("BlockedConv", inputs, {"y"}, attrs, "probe", std::string(kFusedDomain));
  if (node.is_ok()) {
    (*node)->output(0)->dtype = DType::kF32;
    (*node)->output(0)->shape = make_shape(blocked_dims(*y, block));
    // Whichever kernel graph mode would run it (oneDNN's, or our own direct kernels on the
    // vector's block: cpu.conv, cpu.dwconv).
    ms = time_node(g, **node);
  }
  cache_[*key] = ms;
  return ms;
}

double MeasuringLayoutTimer::reorder_ms(const std::vector<int64_t>& dims, int64_t block) {
  const std::string key = reorder_timing_key(dims, block);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  Graph g;
  Attributes attrs;
  attrs["channels"] = AttrValue(dims[1]);
  attrs["block"] = AttrValue(int64_t{0});
  double ms = -1;
  auto node = g.add_node("Reblock", {g.add_input("x", DType::kF32, make_shape(blocked_dims(dims, block)))}, {"y"},
                         attrs, "probe", std::string(kFusedDomain));
  if (node.is_ok()) {
    (*node)->output(0)->dtype = DType::kF32;
    (*node)->output(0)->shape = make_shape(blocked_dims(dims, 0));
    ms = time_node(g, **node, "onednn.reorder");
  }
  cache_[key] = ms;
  return ms;
}

void supply_layout_timer(PipelineOptions& options) {
  const auto& tuning = options.fusion.tuning;
  const bool recorded = tuning != nullptr && tuning->use_layouts;  // a record's timings replay instead
  if (options.fusion.measure_layouts && options.layout_timer == nullptr && !recorded) {
    options.layout_timer = std::make_shared<MeasuringLayoutTimer>();
  }
}

}  // namespace opfuse
