// Timing of the Highway kernels against the reference kernels on BERT-base shapes. Not a test
// and not built by CMake; build by hand against the library, e.g.
//   g++ -std=c++20 -O2 -fopenmp -Isrc tests/kernels/hwy_bench_main.cc build/libopfuse.a \
//       -ldnnl -lhwy -lprotobuf ... -o /tmp/hwy_bench
//   OMP_WAIT_POLICY=passive /tmp/hwy_bench
// Prints the median of 50 runs for 1 and 2 threads.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "core/random.h"
#include "kernels/kernel.h"
#include "ops/infer_shapes.h"

using namespace opfuse;

struct Bench {
  const char* label;
  std::string op;
  std::vector<std::vector<int64_t>> dims;  // runtime inputs
  std::vector<Tensor> constants;           // appended after them
  Attributes attrs;
};

double median_us(const Kernel& k, const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) {
  std::vector<double> t;
  for (int i = 0; i < 5; ++i) (void)k.run(in, out);  // warm up
  for (int i = 0; i < 50; ++i) {
    auto a = std::chrono::steady_clock::now();
    (void)k.run(in, out);
    auto b = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main() {
  const float kSqrt2 = std::sqrt(2.0f);
  std::vector<Bench> benches = {
      {"Add [1,128,768]", "Add", {{1, 128, 768}, {1, 128, 768}}, {}, {}},
      {"Mul [1,128,768]", "Mul", {{1, 128, 768}, {1, 128, 768}}, {}, {}},
      {"Div [1,128,768]", "Div", {{1, 128, 768}, {1, 128, 768}}, {}, {}},
      {"Add bias [1,128,768]+[768]", "Add", {{1, 128, 768}, {768}}, {}, {}},
      {"GELU: Div x/sqrt2 [1,128,3072]", "Div", {{1, 128, 3072}}, {Tensor::scalar(kSqrt2)}, {}},
      {"GELU: Erf [1,128,3072]", "Erf", {{1, 128, 3072}}, {}, {}},
      {"GELU: Add 1 [1,128,3072]", "Add", {{1, 128, 3072}}, {Tensor::scalar(1.0f)}, {}},
      {"GELU: Mul x*y [1,128,3072]", "Mul", {{1, 128, 3072}, {1, 128, 3072}}, {}, {}},
      {"GELU: Mul 0.5 [1,128,3072]", "Mul", {{1, 128, 3072}}, {Tensor::scalar(0.5f)}, {}},
      {"Gelu (one op) [1,128,3072]", "Gelu", {{1, 128, 3072}}, {}, {}},
      {"Softmax [1,12,128,128]", "Softmax", {{1, 12, 128, 128}}, {}, {}},
      {"Transpose [1,128,12,64]->[1,12,128,64]", "Transpose", {{1, 128, 12, 64}}, {},
       {{"perm", AttrValue(std::vector<int64_t>{0, 2, 1, 3})}}},
      {"Transpose [1,12,128,64]->[1,12,64,128]", "Transpose", {{1, 12, 128, 64}}, {},
       {{"perm", AttrValue(std::vector<int64_t>{0, 1, 3, 2})}}},
      {"ReduceMean [1,128,768] axis -1", "ReduceMean", {{1, 128, 768}}, {},
       {{"axes", AttrValue(std::vector<int64_t>{-1})}}},
      {"LayerNorm [1,128,768]", "LayerNormalization", {{1, 128, 768}, {768}, {768}}, {}, {}},
  };
  std::printf("%-42s %8s %10s %10s %8s\n", "case", "threads", "ref us", "hwy us", "speedup");
  for (const Bench& b : benches) {
    Graph g;
    g.opset_imports[""] = 17;
    Random rng(7);
    std::vector<Value*> vals;
    std::vector<Tensor> data;
    for (size_t i = 0; i < b.dims.size(); ++i) {
      vals.push_back(g.add_input("x" + std::to_string(i), DType::kF32, make_shape(b.dims[i])));
      Tensor t = Tensor::zeros(DType::kF32, b.dims[i]).value();
      fill_uniform(t, rng, -3, 3);
      data.push_back(t);
    }
    for (size_t i = 0; i < b.constants.size(); ++i) {
      vals.push_back(g.add_constant("c" + std::to_string(i), b.constants[i]));
      data.push_back(b.constants[i]);
    }
    Node* node = g.add_node(b.op, vals, {"y"}, b.attrs).value();
    g.add_output(node->output(0));
    if (!infer_shapes(g).is_ok()) return 1;
    KernelCompileContext ctx{*node, {}, 1};
    for (const Value* v : node->inputs()) ctx.constants.push_back(v->constant());
    auto hwy = create_kernel(ctx).value();
    auto ref = make_reference_kernel(*node);
    std::vector<const Tensor*> in;
    for (const Tensor& t : data) in.push_back(&t);
    Tensor out = Tensor::zeros(DType::kF32, *static_dims(*node->output(0)->shape)).value();
    std::vector<Tensor*> outs = {&out};
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      const double r = median_us(*ref, in, outs), h = median_us(*hwy, in, outs);
      std::printf("%-42s %8d %10.1f %10.1f %7.1fx  (%s)\n", b.label, threads, r, h, r / h,
                  std::string(hwy->name()).c_str());
    }
  }
  return 0;
}
