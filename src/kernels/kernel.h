// Compiled kernels: what graph mode runs. A kernel is created once per node at compile time
// (when shapes are static and constant inputs such as weights are known, so it can pre-pack
// them) and then run many times on buffers the memory plan assigned. Selection is a table
// lookup (kernel_list.cc), never a switch over op names; a node with no optimised kernel runs
// its reference kernel through ReferenceKernel.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/target.h"
#include "ir/graph.h"

namespace opfuse {

class Kernel {
 public:
  virtual ~Kernel() = default;
  // `inputs`: one per node input (nullptr for omitted optional inputs; constants included).
  // `outputs`: preallocated with their final dtype and dims; the kernel writes into them.
  // Must be safe to call from several threads at once with different buffers.
  virtual Status run(std::span<const Tensor* const> inputs, std::span<Tensor* const> outputs) const = 0;
  // The implementation's name, for profiles ("onednn.conv", "reference").
  virtual std::string_view name() const = 0;
  // The library code it runs, when that is chosen by the library: oneDNN's implementation
  // ("jit_1x1:avx2", "brgconv:avx512_core"). Empty for our own code.
  virtual std::string implementation() const { return ""; }
  // The input whose buffer output 0 may share (the memory plan reuses it when that input dies
  // here and has output 0's size), or -1. Only kernels that read each element of that input
  // before writing the same element of the output may name one.
  virtual int in_place_input() const { return -1; }
  // False for a constant input the kernel copied when it was created (weights it packed) and
  // never reads when run: the plan then passes nullptr for it and lets the graph's copy go, so
  // the weights are not held twice.
  virtual bool reads_input(size_t /*input*/) const { return true; }
};

// Everything known at compile time about the node a kernel is created for.
struct KernelCompileContext {
  const Node& node;
  // The constant data of each input (weights), or nullptr when the input is computed at run time.
  std::vector<const Tensor*> constants;
  int threads = 1;
  // The kernel must give NaN and Inf exactly as the reference does. False when no input of the
  // node can hold one (runtime/non_finite.h), so a post-op that maps NaN to a number (oneDNN's
  // relu, clip) may run inside the library kernel. Kernels read it through by_finiteness only.
  bool exact_non_finite = true;
  // Set by `by_finiteness` when the kernel made for this context differs with exact_non_finite:
  // the plan for finite inputs and the NaN-exact one then differ at this node (a session runs one
  // plan for both when none does, CompiledPlan::same_for_any_finiteness). Mutable: kernels see
  // the context as const, and this only records what they chose.
  mutable bool chose_by_finiteness = false;
  // The kernel to use (a KernelImpl name, or "reference"), as a tuning record chose it; empty:
  // the table's order. A name that does not support the node falls back to the table.
  std::string_view kernel = {};
  // Where an anchor's epilogue runs, as a tuning record chose it: inside the library kernel as far
  // as it keeps NaN (kLibrary), all in our own pass after it (kOwnPass), or the kernel's default.
  enum class Epilogue { kDefault, kLibrary, kOwnPass };
  Epilogue epilogue = Epilogue::kDefault;
  // Compiles the bodies of If, Loop and Scan (kernels/subgraph_compiler.h); null: they run
  // through their reference kernels, body by body in eager mode.
  const class SubgraphCompiler* subgraphs = nullptr;

  // `exact` where the kernel must keep NaN and Inf, else `finite`: every choice a kernel makes by
  // exact_non_finite goes through here, so that the plan knows whether it made one.
  template <typename T>
  T by_finiteness(T exact, T finite) const {
    if (exact != finite) chose_by_finiteness = true;
    return exact_non_finite ? exact : finite;
  }

  // Input i's constant data when it is f32 of exactly these dims (weights a kernel packs), else null.
  const Tensor* f32_constant(size_t i, const std::vector<int64_t>& dims) const {
    const Tensor* t = i < constants.size() ? constants[i] : nullptr;
    return t && t->dtype() == DType::kF32 && t->dims() == dims ? t : nullptr;
  }
};

// One optimised implementation of one op type.
struct KernelImpl {
  std::string_view name;     // "onednn.conv"
  std::string_view op_type;  // "Conv"
  // Whether this implementation handles this node (dtypes, attributes, constant weights ...).
  bool (*supports)(const KernelCompileContext& ctx);
  Result<std::unique_ptr<Kernel>> (*create)(const KernelCompileContext& ctx);
  // Whether the table picks it for this node on this target (null: always). A kernel that
  // supports a node but loses to a later entry on some targets or shapes says so here; a tuning
  // record may still choose it.
  bool (*preferred)(const Target& target, const KernelCompileContext& ctx) = nullptr;
};

// Every optimised kernel (kernels/kernel_list.cc). Earlier entries win for the same op.
const std::vector<KernelImpl>& all_kernels();

// The first optimised implementation supporting the node, else the reference kernel.
Result<std::unique_ptr<Kernel>> create_kernel(const KernelCompileContext& ctx);

// Every kernel name that supports the node, in the table's order (what a tuner may choose
// from; the reference kernel is always possible too). Empty for plugin ops.
std::vector<std::string_view> kernel_alternatives(const KernelCompileContext& ctx);

// Runs a node's reference kernel (ops/reference.h) writing into the preallocated outputs.
std::unique_ptr<Kernel> make_reference_kernel(const Node& node);

}  // namespace opfuse
