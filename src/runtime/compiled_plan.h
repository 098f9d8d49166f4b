// Graph mode's executable: a graph (already optimised, with static shapes) compiled into a list
// of steps, each a Kernel created once (weights pre-packed), reading and writing buffers at
// fixed offsets of one arena. A run binds the inputs, allocates the outputs it returns, and
// executes the steps: no per-node lookup and no allocation of intermediates. View ops
// (Reshape, Squeeze ...) run no kernel: their output aliases their input's buffer. Neither does
// a Concat whose inputs are contiguous slabs of its output (batch 1 on the channel axis, plain
// or blocked): its producers write straight into their slab of the Concat's buffer.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/run_limits.h"
#include "kernels/kernel.h"
#include "kernels/subgraph_compiler.h"
#include "passes/pass.h"
#include "ops/eager.h"
#include "runtime/memory_plan.h"

namespace opfuse {

struct CompileOptions {
  int threads = 0;  // OpenMP threads per run; 0 keeps the process default
  // Run with denormals flushed to zero (runtime/flush_denormals.h).
  bool flush_denormals = false;
  // The plan will only be run on inputs whose floats are all finite (runtime/non_finite.h):
  // kernels of nodes that cannot then see NaN or Inf need not keep their semantics.
  bool inputs_finite = false;
  // Node name -> kernel name, from a tuning record (passes/tuning_record.h); null: the table's.
  const std::map<std::string, std::string>* kernels = nullptr;
  // Node name -> "library" / "own_pass": where its epilogue runs (KernelCompileContext::epilogue).
  const std::map<std::string, std::string>* epilogues = nullptr;
  // Keep, per step, every kernel that supports its node (step_alternatives), for the tuner.
  bool list_alternatives = false;
  // Compiles the bodies of control-flow nodes (the Session's); null: they run eagerly.
  const SubgraphCompiler* subgraphs = nullptr;
};

// When one step of a timed run started (microseconds from the run's start) and how long it took.
struct StepTiming {
  double start_us = 0;
  double duration_us = 0;
};

class CompiledPlan {
 public:
  // Fails with the value named when a shape is not static, or when a kernel cannot be created.
  // The plan keeps the graph, less the data of constants only kernels that packed them read
  // (Kernel::reads_input): a weight is held once, packed, not also as the graph's copy.
  static Result<std::unique_ptr<CompiledPlan>> compile(Graph graph, const CompileOptions& options);
  ~CompiledPlan();

  // Inputs must already match the graph's static signature (Session checks). Safe to call from
  // several threads at once: each concurrent run takes its own arena from a pool.
  Result<TensorMap> run(const TensorMap& inputs, const RunLimits& limits = {}) const;
  // The same run, also timing every step (the profiler: report/profiler.h). `timings` gets one
  // entry per step, in execution order.
  Result<TensorMap> run_timed(const TensorMap& inputs, std::vector<StepTiming>& timings) const;
  const Node& step_node(size_t step) const { return *steps_[step].node; }
  std::string_view step_kernel_name(size_t step) const { return steps_[step].kernel->name(); }
  // The kernel and, when a library chose it, the library's implementation: "onednn.conv [jit:avx2]".
  std::string step_kernel(size_t step) const;
  // The same, marked " (tuning record)" when a tuning record chose the kernel or its epilogue.
  std::string step_kernel_label(size_t step) const;
  // Kernels that support the step's node (CompileOptions::list_alternatives; else empty).
  const std::vector<std::string_view>& step_alternatives(size_t step) const { return steps_[step].alternatives; }

  const Graph& graph() const { return *graph_; }
  size_t kernels_per_run() const { return steps_.size(); }
  int64_t arena_bytes() const { return memory_.arena_bytes; }
  // Bytes of all intermediates if each had its own allocation (what eager mode allocates).
  int64_t intermediate_bytes() const { return memory_.total_bytes; }
  // "Conv 'conv1' -> onednn.conv" lines, in execution order; a step writing its output over an
  // input's buffer says so: "... (in place over input 3) -> ...".
  std::vector<std::string> describe_steps() const;
  // Whether compiling under the other assumption about the inputs (CompileOptions::inputs_finite)
  // would make this same plan: no kernel chose by exact_non_finite at a node where the two
  // assumptions differ. The session then runs this plan for finite and non-finite inputs alike.
  bool same_for_any_finiteness() const { return same_for_any_finiteness_; }
  // What the passes that produced this plan's graph decided (folds applied, refusals and why).
  const std::vector<PassDecision>& pass_decisions() const { return decisions_; }
  void set_pass_decisions(std::vector<PassDecision> decisions) { decisions_ = std::move(decisions); }

 private:
  enum class SlotKind { kConstant, kGraphInput, kGraphOutput, kArena };
  struct Slot {
    SlotKind kind;
    int index = -1;       // graph input/output position, or buffer id for kArena
    const Tensor* constant = nullptr;
    DType dtype = DType::kUndefined;
    std::vector<int64_t> dims;
    int64_t byte_offset = 0;  // kArena, kGraphOutput: where in the buffer (non-zero: a slab of a Concat's output)
  };
  struct Step {
    const Node* node;
    std::unique_ptr<Kernel> kernel;
    std::vector<int> inputs;   // slot ids, -1 for omitted optional inputs
    std::vector<int> outputs;  // slot ids
    bool tuned = false;        // the kernel a tuning record chose
    std::vector<std::string_view> alternatives;
  };
  struct Arena;  // one arena and the tensors viewing it; one per concurrent run

  CompiledPlan() = default;
  Status assign_slots(Graph& graph, const CompileOptions& options);  // `graph`: graph_, mutable
  // Returns which steps need no kernel any more: Concats whose inputs now write into the
  // output's buffer, Splits whose outputs are read from the input's.
  std::vector<bool> plan_concat_and_split_in_place();
  // The buffers behind the slots `parts` when each is a whole arena buffer of its own, distinct,
  // not `whole`'s, 64-byte aligned at its place in `whole`, together exactly `whole`'s bytes;
  // else empty.
  std::vector<int> part_buffers(const std::vector<int>& parts, const Slot& whole) const;
  // Makes `buffers` consecutive slabs of `whole`'s storage (extending its lifetime to theirs).
  void make_slabs(const std::vector<int>& buffers, const Slot& whole);
  void plan_in_place(const std::vector<bool>& dropped);
  // Steps get nullptr for the constants no kernel reads when run, and `graph` drops their data.
  void release_packed_constants(Graph& graph);
  int64_t slot_bytes(const Slot& slot) const;
  Result<TensorMap> run_steps(const TensorMap& inputs, std::vector<StepTiming>* timings,
                              const RunLimits& limits) const;
  std::unique_ptr<Arena> acquire_arena() const;
  Status check_arena_size() const;
  void release_arena(std::unique_ptr<Arena> arena) const;

  std::shared_ptr<const Graph> graph_;
  int threads_ = 0;
  bool flush_denormals_ = false;
  bool same_for_any_finiteness_ = true;
  std::vector<Slot> slots_;
  std::vector<Step> steps_;
  std::vector<BufferRequest> buffers_;
  std::vector<int> output_slots_;  // per graph output
  MemoryPlan memory_;
  std::vector<PassDecision> decisions_;
  mutable std::mutex pool_mutex_;
  mutable std::vector<std::unique_ptr<Arena>> pool_;
};

}  // namespace opfuse
