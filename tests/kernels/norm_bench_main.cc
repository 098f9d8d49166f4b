// Google Benchmark: the dedicated row kernels (hwy.softmax, hwy.layer_norm in
// kernels/cpu/hwy_softmax.cc) against the generated kernel for the same op after
// expand_to_primitives + region_fusion (one FusedRegion run by the Highway backend), on BERT-base
// shapes ([1,12,128,128] attention softmax, [128,768] LayerNorm), a large [4096,4096] and a
// small [8,1000]. expand_to_primitives keeps the dedicated kernel where it wins (see
// docs/benchmarks.md). Built only on request (EXCLUDE_FROM_ALL):
//   ninja -C build opfuse_norm_bench && OMP_WAIT_POLICY=passive OMP_NUM_THREADS=2 \
//       ./build/tests/opfuse_norm_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include <memory>

#include "core/random.h"
#include "ir/text_format.h"
#include "kernels/kernel.h"
#include "passes/pass.h"
#include "passes/pass_util.h"
#include "pipelines/pipeline.h"
#include "runtime/session.h"

namespace opfuse {
namespace {

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s;
  for (int64_t d : dims) s += (s.empty() ? "" : ",") + std::to_string(d);
  return s;
}

// The op alone, its output consumed by an Identity (a view: no kernel) so that it is not a graph
// output. "generated" is the op decomposed into primitives as exporters write it (BERT's
// LayerNorm: ReduceMean, Sub, Pow, ReduceMean, Add eps, Sqrt, Div, Mul, Add), which region
// fusion turns into one FusedRegion; expand_to_primitives would keep the composite op for its
// dedicated kernel.
std::string graph_text(bool layer_norm, bool decomposed, const std::vector<int64_t>& dims) {
  const std::string t = "f32[" + dims_text(dims) + "]";
  const std::string c = "f32[" + std::to_string(dims.back()) + "]";
  std::vector<int64_t> row_dims = dims;
  row_dims.back() = 1;
  const std::string r = "f32[" + dims_text(row_dims) + "]";
  if (layer_norm && decomposed) {
    return "graph @main opset 13 (%x: " + t + ", %g: " + c + ", %b: " + c + ") {\n" +
           "  %two: f32[] = const [2]\n  %eps: f32[] = const [1e-5]\n" +
           "  %m: " + r + " = ReduceMean(%x) {axes = [-1]}\n  %d: " + t + " = Sub(%x, %m)\n" +
           "  %p: " + t + " = Pow(%d, %two)\n  %v: " + r + " = ReduceMean(%p) {axes = [-1]}\n" +
           "  %ve: " + r + " = Add(%v, %eps)\n  %s: " + r + " = Sqrt(%ve)\n  %n: " + t + " = Div(%d, %s)\n" +
           "  %y0: " + t + " = Mul(%n, %g)\n  %y: " + t + " = Add(%y0, %b)\n  %z: " + t +
           " = Identity(%y)\n  return %z\n}";
  }
  if (decomposed) {
    return "graph @main opset 13 (%x: " + t + ") {\n  %axes: i64[1] = const [-1]\n" +
           "  %m: " + r + " = ReduceMax(%x) {axes = [-1]}\n  %d: " + t + " = Sub(%x, %m)\n" +
           "  %e: " + t + " = Exp(%d)\n  %s: " + r + " = ReduceSum(%e, %axes)\n  %y: " + t +
           " = Div(%e, %s)\n  %z: " + t + " = Identity(%y)\n  return %z\n}";
  }
  if (layer_norm) {
    return "graph @main opset 17 (%x: " + t + ", %g: " + c + ", %b: " + c + ") {\n  %y: " + t +
           " = LayerNormalization(%x, %g, %b) {epsilon = 1e-5}\n  %z: " + t + " = Identity(%y)\n  return %z\n}";
  }
  return "graph @main opset 13 (%x: " + t + ") {\n  %y: " + t + " = Softmax(%x) {axis = -1}\n  %z: " + t +
         " = Identity(%y)\n  return %z\n}";
}

void BM_Norm(benchmark::State& state, bool layer_norm, bool generated, std::vector<int64_t> dims) {
  auto g = parse_graph(graph_text(layer_norm, generated, dims));
  if (!g.is_ok()) return state.SkipWithError(g.status().message().c_str());
  if (generated) {
    PassContext ctx;
    PipelineOptions options;
    options.passes = std::vector<std::string>{"infer_shapes", "region_fusion", "dce"};
    if (!run_pipeline(*g, OptLevel::kO2, options, ctx).is_ok()) return state.SkipWithError("pipeline");
  }
  const Node* node = nullptr;
  for (const Node* n : g->nodes()) {
    if (n->op_type() == (generated ? "FusedRegion" : layer_norm ? "LayerNormalization" : "Softmax")) node = n;
  }
  if (node == nullptr) return state.SkipWithError("no node to run (region fusion refused?)");
  KernelCompileContext kc{*node, std::vector<const Tensor*>(node->inputs().size(), nullptr), 2};
  auto kernel = create_kernel(kc);
  if (!kernel.is_ok()) return state.SkipWithError(kernel.status().message().c_str());
  Random rng(1);
  std::vector<Tensor> ins;
  for (const Value* v : node->inputs()) {
    ins.push_back(Tensor::zeros(DType::kF32, *known_dims(v)).value());
    fill_uniform(ins.back(), rng, -3, 3);
  }
  Tensor y = Tensor::zeros(DType::kF32, dims).value();
  std::vector<const Tensor*> in;
  for (const Tensor& t : ins) in.push_back(&t);
  std::vector<Tensor*> out = {&y};
  for (auto _ : state) {
    if (!(*kernel)->run(in, out).is_ok()) return state.SkipWithError("run");
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * y.numel() * 4);
  state.SetLabel(std::string((*kernel)->name()));
}

// In context: the op with the neighbours BERT gives it (attention: scale and mask before the
// softmax; LayerNorm: the residual Add before it), the whole graph compiled at O2 (session run,
// so this includes the session's per-run overhead). "dedicated" has the composite op (the
// neighbours form their own region, then the dedicated kernel); "generated" is the op decomposed
// as exporters write it (bert_base.onnx's LayerNorm), so the neighbours and the op are one
// generated kernel.
const char* kAttention = R"(graph @main opset 13 (%s: f32[1,12,128,128], %mask: f32[1,1,1,128]) {
  %scale: f32[] = const [8]
  %d: f32[1,12,128,128] = Div(%s, %scale)
  %a: f32[1,12,128,128] = Add(%d, %mask)
  %p: f32[1,12,128,128] = Softmax(%a) {axis = -1}
  %z: f32[1,12,128,128] = Identity(%p)
  return %z
})";
const char* kAttentionDecomposed = R"(graph @main opset 13 (%s: f32[1,12,128,128], %mask: f32[1,1,1,128]) {
  %scale: f32[] = const [8]
  %axes: i64[1] = const [-1]
  %d: f32[1,12,128,128] = Div(%s, %scale)
  %a: f32[1,12,128,128] = Add(%d, %mask)
  %m: f32[1,12,128,1] = ReduceMax(%a) {axes = [-1]}
  %c: f32[1,12,128,128] = Sub(%a, %m)
  %e: f32[1,12,128,128] = Exp(%c)
  %sum: f32[1,12,128,1] = ReduceSum(%e, %axes)
  %p: f32[1,12,128,128] = Div(%e, %sum)
  %z: f32[1,12,128,128] = Identity(%p)
  return %z
})";
const char* kResidualLayerNorm = R"(graph @main opset 17 (%x: f32[128,768], %r: f32[128,768], %g: f32[768], %b: f32[768]) {
  %h: f32[128,768] = Add(%x, %r)
  %y: f32[128,768] = LayerNormalization(%h, %g, %b) {epsilon = 1e-5}
  %z: f32[128,768] = Identity(%y)
  return %z
})";
const char* kResidualLayerNormDecomposed = R"(graph @main opset 13 (%x: f32[128,768], %r: f32[128,768], %g: f32[768], %b: f32[768]) {
  %two: f32[] = const [2]
  %eps: f32[] = const [1e-5]
  %h: f32[128,768] = Add(%x, %r)
  %m: f32[128,1] = ReduceMean(%h) {axes = [-1]}
  %d: f32[128,768] = Sub(%h, %m)
  %p: f32[128,768] = Pow(%d, %two)
  %v: f32[128,1] = ReduceMean(%p) {axes = [-1]}
  %ve: f32[128,1] = Add(%v, %eps)
  %s: f32[128,1] = Sqrt(%ve)
  %n: f32[128,768] = Div(%d, %s)
  %y0: f32[128,768] = Mul(%n, %g)
  %y: f32[128,768] = Add(%y0, %b)
  %z: f32[128,768] = Identity(%y)
  return %z
})";

void BM_InContext(benchmark::State& state, const char* text, bool generated) {
  auto g = parse_graph(text);
  if (!g.is_ok()) return state.SkipWithError(g.status().message().c_str());
  TensorMap inputs;
  Random rng(1);
  int64_t bytes = 0;
  for (const Value* v : g->inputs()) {
    Tensor t = Tensor::zeros(DType::kF32, *known_dims(v)).value();
    fill_uniform(t, rng, -3, 3);
    bytes += 2 * t.numel() * 4;  // read, and the output of the same size (the big inputs)
    inputs.emplace(v->name(), std::move(t));
  }
  SessionOptions options;
  options.level = OptLevel::kO2;
  options.threads = 2;
  auto session = Session::create(std::move(*g), options);
  if (!session.is_ok()) return state.SkipWithError(session.status().message().c_str());
  for (auto _ : state) {
    auto out = session->run(inputs);
    if (!out.is_ok()) return state.SkipWithError(out.status().message().c_str());
    benchmark::DoNotOptimize(out);
  }
  state.SetLabel(generated ? "one generated kernel" : "generated neighbours + dedicated kernel");
}

void register_all() {
  for (bool generated : {false, true}) {
    const std::string v = generated ? "generated" : "dedicated";
    benchmark::RegisterBenchmark(("InContext/bert_attention_scale_mask_softmax/" + v).c_str(), BM_InContext,
                                 generated ? kAttentionDecomposed : kAttention, generated)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("InContext/bert_residual_layer_norm/" + v).c_str(), BM_InContext,
                                 generated ? kResidualLayerNormDecomposed : kResidualLayerNorm, generated)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  }
  const std::vector<std::pair<std::string, std::vector<int64_t>>> softmax = {
      {"bert_attention", {1, 12, 128, 128}}, {"large", {4096, 4096}}, {"small", {8, 1000}}};
  const std::vector<std::pair<std::string, std::vector<int64_t>>> layer_norm = {
      {"bert_hidden", {128, 768}}, {"large", {4096, 4096}}, {"small", {8, 1000}}};
  for (bool ln : {false, true}) {
    for (const auto& [name, dims] : ln ? layer_norm : softmax) {
      for (bool generated : {false, true}) {
        const std::string id = std::string(ln ? "LayerNorm/" : "Softmax/") + name + "[" + dims_text(dims) + "]/" +
                               (generated ? "generated" : "dedicated");
        benchmark::RegisterBenchmark(id.c_str(), BM_Norm, ln, generated, dims)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    }
  }
}

}  // namespace
}  // namespace opfuse

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  opfuse::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
