// Fuzz target: compile-from-bytes. Loads the bytes as an ONNX model, compiles it in graph mode at
// O3 (every pass, fusion, kernel selection, memory plan) and runs it on small seeded random
// inputs, then runs it eagerly too. Symbolic and unknown dims are bound to 1; a model whose
// inputs would be large is only compiled. Every stage must end in success or a user error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/random.h"
#include "frontend/onnx/importer.h"
#include "fuzz/fuzz_common.h"
#include "pipelines/pipeline.h"
#include "runtime/session.h"

namespace {

constexpr int64_t kMaxInputElements = int64_t{1} << 16;

// Small inputs matching the session's signature, or nullopt when one is too big or unknown.
std::optional<opfuse::TensorMap> small_inputs(const opfuse::Session& session) {
  opfuse::TensorMap inputs;
  opfuse::Random rng(1);
  for (const opfuse::TensorSignature& sig : session.inputs()) {
    if (!sig.shape) return std::nullopt;
    std::vector<int64_t> dims;
    int64_t total = 1;
    for (const opfuse::Dim& d : *sig.shape) {
      const int64_t n = d.is_known() ? d.value() : 1;
      if (n > kMaxInputElements || total * std::max<int64_t>(n, 1) > kMaxInputElements) {
        return std::nullopt;
      }
      total *= std::max<int64_t>(n, 1);
      dims.push_back(n);
    }
    auto t = opfuse::Tensor::zeros(sig.dtype, dims, sig.name);
    if (!t.is_ok()) return std::nullopt;
    const bool fp = opfuse::is_float(sig.dtype);
    opfuse::fill_uniform(*t, rng, fp ? -2.0 : 0.0, fp ? 2.0 : 3.0);
    inputs[sig.name] = std::move(*t);
  }
  return inputs;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  opfuse::fuzz::init_limits();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using opfuse::fuzz::check;
  opfuse::OnnxLoadOptions load;
  load.max_weight_bytes = opfuse::fuzz::kMaxWeightBytes;
  opfuse::Result<opfuse::Graph> graph = opfuse::load_onnx_bytes(
      std::string_view(reinterpret_cast<const char*>(data), size), "", load, "fuzz");
  if (!check(graph.status(), "load")) return 0;
  opfuse::Graph eager_graph = graph->clone();

  opfuse::SessionOptions options;
  options.mode = opfuse::ExecutionMode::kGraph;
  options.level = opfuse::OptLevel::kO3;
  options.threads = 1;
  opfuse::Result<opfuse::Session> session = opfuse::Session::create(std::move(*graph), options);
  if (!check(session.status(), "Session::create(graph, O3)")) return 0;
  std::optional<opfuse::TensorMap> inputs = small_inputs(*session);
  if (!inputs) return 0;
  check(session->run(*inputs).status(), "run (graph, O3)");

  options.mode = opfuse::ExecutionMode::kEager;
  opfuse::Result<opfuse::Session> eager = opfuse::Session::create(std::move(eager_graph), options);
  if (!check(eager.status(), "Session::create(eager)")) return 0;
  check(eager->run(*inputs).status(), "run (eager)");
  return 0;
}
