// Google Benchmark: a fused elementwise chain on a 64 MB tensor (one generated kernel: read x and
// b, write y) against a STREAM triad (a = b + s * c) measured by the same binary, both as bytes
// moved per second. Target: the fused chain reaches >= 80% of the triad's bandwidth.
// Built only on request (EXCLUDE_FROM_ALL):
//   ninja -C build opfuse_fused_bench && OMP_WAIT_POLICY=passive OMP_NUM_THREADS=2 \
//       ./build/tests/opfuse_fused_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>
#include <omp.h>

#include <memory>

#include "core/random.h"
#include "ir/text_format.h"
#include "kernels/kernel.h"
#include "passes/pass.h"
#include "pipelines/pipeline.h"

namespace opfuse {
namespace {

constexpr int64_t kElems = int64_t{16} << 20;  // 64 MB of f32

// y = tanh(x * 0.5 + b) * x - b: 2 reads and 1 write of 64 MB; every op in cache.
const char* kChain = R"(graph @main opset 13 (%x: f32[4096,4096], %b: f32[4096,4096]) {
  %h: f32[] = const [0.5]
  %m: f32[4096,4096] = Mul(%x, %h)
  %a: f32[4096,4096] = Add(%m, %b)
  %t: f32[4096,4096] = Tanh(%a)
  %p: f32[4096,4096] = Mul(%t, %x)
  %y: f32[4096,4096] = Sub(%p, %b)
  return %y
})";

// The same without the transcendental: y = (x * 0.5 + b) * x - b.
const char* kArithChain = R"(graph @main opset 13 (%x: f32[4096,4096], %b: f32[4096,4096]) {
  %h: f32[] = const [0.5]
  %m: f32[4096,4096] = Mul(%x, %h)
  %a: f32[4096,4096] = Add(%m, %b)
  %p: f32[4096,4096] = Mul(%a, %x)
  %y: f32[4096,4096] = Sub(%p, %b)
  return %y
})";

void BM_StreamTriad(benchmark::State& state) {
  std::vector<float> a(kElems), b(kElems, 1.0f), c(kElems, 2.0f);
  const float s = 3.0f;
  for (auto _ : state) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < kElems; ++i) a[i] = b[i] + s * c[i];
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kElems * 3 * 4);
}
BENCHMARK(BM_StreamTriad)->Unit(benchmark::kMillisecond)->UseRealTime();
// The arithmetic chain as one loop written by hand (compiler-fused): the ceiling for a generated
// kernel of the same chain.
void BM_HandChain(benchmark::State& state) {
  std::vector<float> a(kElems), b(kElems, 1.0f), c(kElems, 2.0f);
  for (auto _ : state) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < kElems; ++i) a[i] = (b[i] * 0.5f + c[i]) * b[i] - c[i];
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kElems * 3 * 4);
}
BENCHMARK(BM_HandChain)->Unit(benchmark::kMillisecond)->UseRealTime();

// Arg: rows of 4096. 4096 rows = 64 MB per tensor (memory bound); 16 rows = 256 KB per tensor
// (stays in L2: the executor's compute cost per element).
void BM_FusedChain(benchmark::State& state, const char* text0) {
  std::string text = text0;
  const int64_t rows = state.range(0);
  for (size_t p = 0; (p = text.find("4096,4096", p)) != std::string::npos; p += 5) text.replace(p, 9, std::to_string(rows) + ",4096");
  auto g = parse_graph(text);
  if (!g.is_ok()) return state.SkipWithError(g.status().message().c_str());
  PassContext ctx;
  PipelineOptions options;
  options.passes = std::vector<std::string>{"infer_shapes", "region_fusion"};
  if (!run_pipeline(*g, OptLevel::kO2, options, ctx).is_ok()) return state.SkipWithError("pipeline");
  const Node* region = g->nodes().back();
  if (region->op_type() != "FusedRegion") return state.SkipWithError("the chain did not fuse");
  KernelCompileContext kc{*region, std::vector<const Tensor*>(region->inputs().size(), nullptr), 2};
  auto kernel = create_kernel(kc);
  if (!kernel.is_ok()) return state.SkipWithError(kernel.status().message().c_str());
  Tensor x = Tensor::zeros(DType::kF32, {rows, 4096}).value();
  Tensor b = Tensor::zeros(DType::kF32, {rows, 4096}).value();
  Tensor y = Tensor::zeros(DType::kF32, {rows, 4096}).value();
  Random rng(1);
  fill_uniform(x, rng, -1, 1);
  fill_uniform(b, rng, -1, 1);
  std::vector<const Tensor*> in = {&x, &b};
  std::vector<Tensor*> out = {&y};
  for (auto _ : state) {
    if (!(*kernel)->run(in, out).is_ok()) return state.SkipWithError("run");
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * rows * 4096 * 3 * 4);
  state.SetLabel(std::string((*kernel)->name()));
}
BENCHMARK_CAPTURE(BM_FusedChain, tanh_chain, kChain)->Arg(4096)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_FusedChain, arith_chain, kArithChain)->Arg(4096)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace opfuse

BENCHMARK_MAIN();
