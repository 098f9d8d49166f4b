// Shared plumbing of the oneDNN kernels (kernels/cpu/onednn_*.cc): the CPU engine, memory
// descriptors for our row-major tensors, weight packing, and OneDnnKernel, the one Kernel class
// every oneDNN op uses. An op's create() only describes a primitive and how its arguments bind
// to the node's inputs; running, argument checking and per-thread scratch live here.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu/hwy_channel_scale.h"
#include "kernels/kernel.h"

namespace opfuse::onednn {

using Dims = std::vector<int64_t>;

// The process-wide CPU engine (created on first use; thread-safe).
const dnnl::engine& cpu_engine();

// The static dims of a node value when it is f32 with a fully known shape, else nullopt.
std::optional<Dims> static_f32_dims(const Value* value);

// f32 memory descriptors: row-major over `dims`, or with explicit element strides.
dnnl::memory::desc plain_desc(const Dims& dims);
dnnl::memory::desc strided_desc(const Dims& dims, const Dims& strides);
dnnl::memory::desc any_desc(const Dims& dims);
// Row-major strides of `dims`.
Dims row_major_strides(const Dims& dims);

// Copies constant data laid out as `from` into a new buffer laid out as `to` (a primitive's
// preferred weights layout). Done once at kernel creation; the result is shared read-only.
dnnl::memory pack(const dnnl::memory::desc& from, const void* data, const dnnl::memory::desc& to);

// Attributes every primitive of ours is created with: a user-provided scratchpad (so that one
// primitive can run from several threads at once) and the given post-ops (empty today; fused
// epilogues will add to it).
dnnl::primitive_attr make_attr(const dnnl::post_ops& ops = dnnl::post_ops());

// Runs `make` and turns a dnnl::error into nullopt: primitive creation fails for shapes or
// attributes oneDNN has no implementation for, which means "not supported", not a bug.
template <typename T>
std::optional<T> try_dnnl(const std::function<T()>& make) {
  try {
    return make();
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

// Where one primitive argument comes from at run time.
struct Binding {
  int arg = 0;                // DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, ...
  int input = -1;             // the node input holding the data, or -1 for `constant`
  Dims dims;                  // the tensor's dims (checked at run time)
  dnnl::memory::desc md;      // how the primitive sees that buffer (may reshape/transpose it)
  dnnl::memory constant;      // pre-packed data when input < 0
};

// A reorder done inside the kernel around the primitive: activations kept in plain layout by
// the graph but fed to the primitive in its preferred (blocked) layout.
struct InternalReorder {
  dnnl::reorder prim;
  dnnl::memory::desc md;          // the primitive-side layout (a per-thread temporary)
  dnnl::memory::desc scratchpad;  // the reorder's own scratchpad (usually empty)
};

// Constant weights scaled per input channel at run time, before the primitive reads them:
// FusedConv's input scale S (ops/fused.h), Conv(X * S, W) = Conv(X, W * S). The packed weights
// are cut into segments of one or of consecutive input channels (hwy_channel_scale.h), so
// scaling is a vector multiply by a broadcast scalar or by a slice of S.
struct WeightScale {
  int input = -1;  // the node input holding S
  Dims dims;       // S's dims (checked at run time); its first `channels` floats are used
  int64_t channels = 0;
  std::vector<ChannelSegment> segments;  // covering the packed weights in order
  std::vector<int64_t> starts;           // segment i's first float; one more entry: the total
};

// The WeightScale for weights given as `user_md` (ONNX layout [M, C/group, k...], described
// as oneDNN sees it) and packed as `packed_md`: each element's input channel, found by packing
// a tensor of channel numbers the same way.
WeightScale make_weight_scale(const dnnl::memory::desc& user_md, const dnnl::memory::desc& packed_md,
                              const Dims& onnx_w_dims, int64_t group, int input, Dims s_dims);

struct PrimitivePlan {
  dnnl::primitive prim;
  dnnl::memory::desc scratchpad;
  std::vector<Binding> bindings;  // every argument except DNNL_ARG_DST
  Dims dst_dims;                  // output 0's dims
  dnnl::memory::desc dst_md;      // how the primitive sees output 0
  // Set when the primitive wants src (input 0) / dst in another layout than the plain one.
  std::optional<InternalReorder> src_reorder, dst_reorder;
  // Set when the DNNL_ARG_WEIGHTS binding is scaled per input channel each run.
  std::optional<WeightScale> weight_scale;
  // The node input a sum post-op accumulates (a residual laid out as dst_md), or -1. It must be
  // in output 0 when the primitive starts: the kernel copies it there unless the memory plan
  // gave both one buffer (Kernel::in_place_input). Never set together with dst_reorder.
  int accumulate_input = -1;
};

// The Kernel of every oneDNN op. Shared state (primitive, packed weights) is read-only after
// creation; each run wraps its buffers in fresh dnnl::memory objects and uses a per-thread
// stream and scratch buffer, so concurrent runs on different buffers are safe.
class OneDnnKernel final : public Kernel {
 public:
  // threads: the OpenMP threads the primitive was created for and runs with (0: the caller's).
  OneDnnKernel(std::string_view name, const Node& node, PrimitivePlan plan, int threads)
      : name_(name), node_(node), plan_(std::move(plan)), impl_(impl_info()), threads_(threads) {}
  Status run(std::span<const Tensor* const> inputs,
             std::span<Tensor* const> outputs) const override;
  std::string_view name() const override { return name_; }
  int in_place_input() const override { return plan_.accumulate_input; }
  // Only the inputs bound at run time; constant bindings hold oneDNN's own packed copy.
  bool reads_input(size_t input) const override;
  std::string implementation() const override { return impl_; }
  // The primitive's implementation ("brgconv:avx512_core"), for tests and profiles.
  std::string impl_info() const;

 private:
  std::string_view name_;
  const Node& node_;
  PrimitivePlan plan_;
  std::string impl_;  // impl_info(), read once
  int threads_;
};

// Whether oneDNN chose its reference loops (100-1500x slower than its jit kernels) for `pd`.
bool is_reference_impl(const dnnl::primitive_desc_base& pd);

// Fills the plan's scratchpad descriptor and primitive from a primitive descriptor. A reference
// implementation is refused (a dnnl::error, so the kernel reports "not supported" and the
// dispatch table moves on to another implementation): it is never run silently.
template <typename Primitive>
void set_primitive(PrimitivePlan& plan, const typename Primitive::primitive_desc& pd) {
  if (is_reference_impl(pd)) {
    throw dnnl::error(dnnl_unimplemented, "oneDNN has only reference loops for this primitive");
  }
  plan.scratchpad = pd.scratchpad_desc();
  plan.prim = Primitive(pd);
}

// Given the pd chosen for the primitive, adds reorders so input 0 / output 0 stay plain even
// when the pd's src/dst layout differs from `plain_src` / `plain_dst`.
void add_layout_reorders(PrimitivePlan& plan, const dnnl::memory::desc& plain_src,
                         const dnnl::memory::desc& pd_src, const dnnl::memory::desc& plain_dst,
                         const dnnl::memory::desc& pd_dst);

// The OpenMP threads a primitive for `node` should be created and run with: 1 when its work is
// too small to pay for waking another thread, else 0 (the caller's count).
int threads_for_work(const Node& node);

// Wraps a finished plan into a kernel; catches dnnl errors raised while building it. The plan
// is built, and the kernel runs, with threads_for_work(node) threads.
Result<std::unique_ptr<Kernel>> make_kernel(std::string_view name, const Node& node,
                                            const std::function<PrimitivePlan()>& build);

}  // namespace opfuse::onednn
