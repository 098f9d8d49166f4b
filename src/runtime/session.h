// The public way to run a model: load it, create a Session, run it with named inputs.
//
//   auto graph = load_onnx_file("model.onnx");          // frontend/onnx/importer.h
//   auto session = Session::create(std::move(*graph));
//   auto outputs = session->run({{"input", tensor}});    // TensorMap by output name
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pass.h"
#include "runtime/compiled_plan.h"
#include "ops/eager.h"
#include "pipelines/pipeline.h"

namespace opfuse {

enum class ExecutionMode {
  kEager,  // node by node with the reference kernels: the oracle and the baseline
  kGraph,  // compiled once per input shape (passes of `level`, kernels, memory plan), run many times
};
std::string_view execution_mode_name(ExecutionMode mode);
Result<ExecutionMode> parse_execution_mode(std::string_view name);

struct SessionOptions {
  ExecutionMode mode = ExecutionMode::kGraph;
  OptLevel level = kDefaultOptLevel;
  int threads = 0;  // 0: OpenMP's default (all cores)
  // Graph mode: run with the CPU's denormals-as-zero modes (runtime/flush_denormals.h). Off:
  // exact IEEE arithmetic, as eager mode always is.
  bool flush_denormals = false;
  PipelineOptions pipeline;  // --print-after-all, --passes
  // The CPU tier to compile for ("native", "avx2", ...; core/target.h). Process-wide, since
  // oneDNN's ISA cap is: empty takes the active target, a tier differs from an earlier choice is
  // refused by create().
  std::string target;
  // Keep every kernel that supports each step's node in the plans (CompiledPlan::
  // step_alternatives): what the tuner chooses from. A tuning record goes in
  // pipeline.fusion.tuning; create() refuses one made for another model or target.
  bool list_kernel_alternatives = false;
  // Graph mode compiles a plan per input shape (and per finiteness of the inputs). At most this
  // many are kept, the least recently used evicted first; 0 keeps every one. A server taking
  // shapes from its clients sets it, so new shapes cannot grow its memory without bound.
  size_t max_plans = 0;
  // A model loaded from a file gives its weights to the compile and reads them back for the
  // next one (Session::graph). When its inputs have symbolic dims (a compile per new shape) and
  // those weights total at most this many bytes, the session keeps them instead: the read-back
  // costs more time than the memory is worth. 0: always give them away.
  size_t keep_weights_bytes = size_t{32} << 20;
};

// The name, dtype and (possibly symbolic) shape of a model input or output.
struct TensorSignature {
  std::string name;
  DType dtype;
  std::optional<Shape> shape;
  std::string to_string() const;  // "input: f32[batch,3,224,224]"
};

class Session {
 public:
  // Takes ownership of the graph; verifies and sorts it. Errors name the node at fault.
  static Result<Session> create(Graph graph, SessionOptions options = {});

  const std::vector<TensorSignature>& inputs() const { return inputs_; }
  const std::vector<TensorSignature>& outputs() const { return outputs_; }
  // The model. When it was loaded from a file, graph mode hands its weights to the compile: the
  // graph keeps those a plan's kernels read when run (shared with the plan) and drops the data
  // of the others (Graph::release_constant_data), which are packed or folded in the plans, so
  // a weight is held once. Another compile reads them again from the file. Weights the caller
  // holds too (in a clone of the graph) are kept, and so are the weights of a model compiled
  // per input shape when they are small (SessionOptions::keep_weights_bytes).
  const Graph& graph() const { return *graph_; }
  // A copy of the model with all its weights, those released read again from the file: a user
  // error when that fails or the file no longer holds them.
  Result<Graph> model() const;

  // Checks every input against the signature (names, dtypes, ranks, known dims, and symbolic
  // dims bound consistently across inputs) and runs the model. Safe to call concurrently.
  // `limits` (graph mode) stop a run between steps at a deadline or when a flag is set.
  Result<TensorMap> run(const TensorMap& inputs, const RunLimits& limits = {}) const;
  // Eager mode only: also reports what the run allocated.
  Result<TensorMap> run_eager_with_stats(const TensorMap& inputs, EagerStats& stats) const;

  // Graph mode: the compiled plan for these inputs' shapes (compiled on first use, then cached).
  // Inputs holding NaN or Inf get a plan that keeps their semantics in every kernel; inputs all
  // finite a plan that may clamp inside library kernels where NaN cannot arise
  // (runtime/non_finite.h); one plan serves both when no kernel would differ
  // (CompiledPlan::same_for_any_finiteness).
  Result<std::shared_ptr<const CompiledPlan>> plan_for(const TensorMap& inputs) const;
  const SessionOptions& options() const { return options_; }
  // Plans compiled so far (evicted ones included), and plans held now.
  int64_t compile_count() const;
  size_t cached_plan_count() const;
  // Packed weights a compile took from an earlier one's instead of packing them again.
  int packed_weights_reused() const;

 private:
  struct PlanCache;
  Status check_inputs(const TensorMap& inputs) const;
  // `values`: the inputs whose values the plan binds (specialized_), by name.
  Result<std::shared_ptr<const CompiledPlan>> compile_for(const std::vector<Shape>& input_shapes,
                                                          bool inputs_finite, const TensorMap& values = {}) const;

  struct Weights;
  // Reads the released weights into `graph` (graph_ or a clone of it), checking each against
  // its digest: each from its own bytes in the file where it can (ConstantSource::
  // read_constants), the model parsed again for the others. Under weights_->mutex.
  Status read_released_weights(Graph& graph) const;
  // The bound graph a compile starts from, the released weights read again first.
  Result<Graph> graph_for_compile(const std::vector<Shape>& input_shapes) const;
  // Takes back the weights a new plan's graph still holds unchanged (read by its kernels when
  // run), sharing them; the others stay released.
  void keep_weights_the_plan_holds(const Graph& plan_graph) const;

  std::shared_ptr<Graph> graph_;
  std::shared_ptr<Weights> weights_;
  SessionOptions options_;
  std::vector<TensorSignature> inputs_;
  std::vector<TensorSignature> outputs_;
  std::shared_ptr<PlanCache> plans_;
  // Inputs whose values graph mode compiles into the plan (one plan per value met): scalar
  // integer or bool inputs an If depends on, such as a sample rate choosing the branch for its
  // rate. The If then folds away and its branch is optimised with the rest of the graph.
  std::vector<size_t> specialized_;
};

}  // namespace opfuse
