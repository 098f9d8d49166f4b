#include "runtime/compiled_plan.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "kernels/omp_threads.h"
#include "ops/op_def.h"
#include "runtime/flush_denormals.h"
#include "runtime/non_finite.h"

namespace opfuse {

// The tensors one run works on: the arena's bytes and a Tensor per slot viewing them, built
// once when the arena is created so a run only rebinds graph inputs and outputs.
struct CompiledPlan::Arena {
  Tensor memory;
  // The graph outputs of this arena's last run. The next run writes into those its caller has
  // released instead of allocating: a large buffer comes from the OS afresh on each allocation,
  // and writing IS-Net's 64 MiB output into new pages cost 57-100 ms of a 750 ms run on a Zen 5.
  std::vector<Tensor> outputs;
  std::vector<Tensor> slot_tensors;
  std::vector<std::vector<const Tensor*>> step_inputs;
  std::vector<std::vector<Tensor*>> step_outputs;
};

CompiledPlan::~CompiledPlan() = default;

Result<std::unique_ptr<CompiledPlan>> CompiledPlan::compile(Graph graph, const CompileOptions& options) {
  // Kernels are created under the run's thread count (omp_threads.h).
  ScopedOmpThreads threads(options.threads);
  std::unique_ptr<CompiledPlan> plan(new CompiledPlan());
  auto own_graph = std::make_shared<Graph>(std::move(graph));
  plan->graph_ = own_graph;
  plan->threads_ = options.threads;
  plan->flush_denormals_ = options.flush_denormals;
  OPFUSE_TRY(plan->assign_slots(*own_graph, options));
  const std::vector<bool> dropped = plan->plan_concat_and_split_in_place();
  plan->plan_in_place(dropped);
  // Steps are numbered in buffers_' lifetimes as they were before any was dropped: the plan
  // only compares those numbers, so the gaps do not matter.
  std::vector<Step> kept;
  for (size_t s = 0; s < plan->steps_.size(); ++s) {
    if (!dropped[s]) kept.push_back(std::move(plan->steps_[s]));
  }
  plan->steps_ = std::move(kept);
  plan->release_packed_constants(*own_graph);
  plan->memory_ = plan_memory(plan->buffers_);
  if (!memory_plan_is_valid(plan->buffers_, plan->memory_)) {
    return Status::internal_error("memory plan assigned overlapping buffers");
  }
  OPFUSE_TRY(plan->check_arena_size());
  return plan;
}

Status CompiledPlan::assign_slots(Graph& graph, const CompileOptions& options) {
  std::unordered_map<const Value*, int> slot_of;
  // A constant whose last reader's kernel is created, none of them reading it when run, has its
  // data dropped there and then, so that the weights are not all held twice at the end of a
  // compile (release_packed_constants then drops the rest). One a view aliases is kept.
  std::unordered_map<const Value*, int> uses_left;
  std::unordered_set<const Value*> kept;
  auto static_dims_of = [](const Value* v) -> Result<std::vector<int64_t>> {
    if (v->shape) {
      if (auto dims = static_dims(*v->shape)) return *dims;
    }
    return Status::user_error(str_cat("graph mode needs static shapes, but value '", v->name(),
                                      "' is ", v->type_string()));
  };
  auto add_slot = [&](const Value* v, Slot slot) {
    slots_.push_back(std::move(slot));
    slot_of[v] = static_cast<int>(slots_.size() - 1);
    return static_cast<int>(slots_.size() - 1);
  };
  for (size_t i = 0; i < graph_->inputs().size(); ++i) {
    const Value* v = graph_->inputs()[i];
    OPFUSE_ASSIGN_OR_RETURN(auto dims, static_dims_of(v));
    add_slot(v, Slot{SlotKind::kGraphInput, static_cast<int>(i), nullptr, v->dtype, std::move(dims)});
  }
  std::unordered_map<const Value*, int> output_index;
  for (size_t i = 0; i < graph_->outputs().size(); ++i) output_index[graph_->outputs()[i]] = static_cast<int>(i);

  const auto may_be_non_finite = values_that_may_be_non_finite(*graph_, options.inputs_finite);
  const auto may_be_non_finite_otherwise = values_that_may_be_non_finite(*graph_, !options.inputs_finite);
  auto reads_one_of = [](const Node& node, const std::unordered_set<const Value*>& values) {
    return std::any_of(node.inputs().begin(), node.inputs().end(),
                       [&](const Value* in) { return in != nullptr && values.count(in) > 0; });
  };
  const std::vector<Node*> nodes = graph_->nodes();
  for (const Node* node : nodes) {
    for (const Value* in : node->inputs()) {
      if (in != nullptr && in->is_constant()) ++uses_left[in];
    }
  }
  for (const Node* node : nodes) {
    const int step_index = static_cast<int>(steps_.size());
    std::vector<int> inputs;
    std::vector<const Tensor*> constants;
    for (const Value* in : node->inputs()) {
      if (in == nullptr) {
        inputs.push_back(-1);
        constants.push_back(nullptr);
        continue;
      }
      if (!slot_of.count(in)) {
        if (!in->is_constant()) {
          return Status::internal_error(str_cat(node->describe(), ": input '", in->name(), "' has no producer"));
        }
        add_slot(in, Slot{SlotKind::kConstant, -1, in->constant(), in->dtype, in->constant()->dims()});
      }
      inputs.push_back(slot_of[in]);
      constants.push_back(in->constant());
    }
    // A view whose output is an intermediate runs no kernel: it aliases its input's slot.
    const Value* out0 = node->output(0);
    const bool only_output_used = node->outputs().size() == 1 ||
                                  std::all_of(node->outputs().begin() + 1, node->outputs().end(),
                                              [](const Value* v) { return v->uses().empty() && !v->is_graph_output(); });
    if (node->def().traits.output_is_view && node->has_input(0) && !out0->is_graph_output() &&
        only_output_used) {
      OPFUSE_ASSIGN_OR_RETURN(auto dims, static_dims_of(out0));
      Slot alias = slots_[slot_of[node->input(0)]];
      alias.dims = std::move(dims);
      add_slot(out0, std::move(alias));
      kept.insert(node->input(0));
      continue;
    }
    std::vector<int> outputs;
    for (const Value* out : node->outputs()) {
      OPFUSE_ASSIGN_OR_RETURN(auto dims, static_dims_of(out));
      // Every output, graph outputs included, must fit before a kernel is made for it: kernels
      // plan index arithmetic over these dims at creation (an Expand to [2^40, 2^40, 4] would
      // overflow it).
      OPFUSE_ASSIGN_OR_RETURN(const int64_t numel, checked_numel(dims, str_cat("value '", out->name(), "'")));
      const auto elem = static_cast<int64_t>(dtype_size(out->dtype));
      if (static_cast<uint64_t>(numel) > max_allocation_bytes() / static_cast<uint64_t>(elem)) {
        return Status::user_error(str_cat(node->describe(), ": output '", out->name(), "' (",
                                          out->type_string(), ") needs more than the allocation cap of ",
                                          max_allocation_bytes(), " bytes"));
      }
      if (output_index.count(out)) {
        outputs.push_back(add_slot(out, Slot{SlotKind::kGraphOutput, output_index[out], nullptr, out->dtype, dims}));
      } else {
        const int64_t bytes = numel * elem;
        buffers_.push_back(BufferRequest{bytes, step_index, step_index});
        outputs.push_back(add_slot(out, Slot{SlotKind::kArena, static_cast<int>(buffers_.size() - 1),
                                             nullptr, out->dtype, dims}));
      }
    }
    KernelCompileContext ctx{*node, std::move(constants), options.threads};
    ctx.subgraphs = options.subgraphs;
    ctx.exact_non_finite = reads_one_of(*node, may_be_non_finite);
    if (options.kernels != nullptr) {
      if (auto it = options.kernels->find(node->name()); it != options.kernels->end()) ctx.kernel = it->second;
    }
    if (options.epilogues != nullptr) {
      if (auto it = options.epilogues->find(node->name()); it != options.epilogues->end()) {
        ctx.epilogue = it->second == "library" ? KernelCompileContext::Epilogue::kLibrary
                                               : KernelCompileContext::Epilogue::kOwnPass;
      }
    }
    std::vector<std::string_view> alternatives;
    if (options.list_alternatives) alternatives = kernel_alternatives(ctx);
    OPFUSE_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, create_kernel(ctx));
    if (ctx.chose_by_finiteness && ctx.exact_non_finite != reads_one_of(*node, may_be_non_finite_otherwise)) {
      same_for_any_finiteness_ = false;
    }
    const bool tuned = (!ctx.kernel.empty() && kernel->name() == ctx.kernel) ||
                       ctx.epilogue != KernelCompileContext::Epilogue::kDefault;
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      Value* in = node->input(i);
      if (in == nullptr || !in->is_constant()) continue;
      if (kernel->reads_input(i) || in->is_graph_output()) kept.insert(in);
      if (--uses_left[in] == 0 && kept.count(in) == 0) graph.release_constant_data(in);
    }
    steps_.push_back(Step{node, std::move(kernel), std::move(inputs), std::move(outputs), tuned, std::move(alternatives)});
  }
  // Lifetimes: a buffer lives from the step writing it to the last step reading it (through
  // any view aliasing it).
  for (size_t s = 0; s < steps_.size(); ++s) {
    for (int slot : steps_[s].inputs) {
      if (slot >= 0 && slots_[slot].kind == SlotKind::kArena) {
        BufferRequest& b = buffers_[slots_[slot].index];
        b.last_step = std::max(b.last_step, static_cast<int>(s));
      }
    }
  }
  for (const Value* out : graph_->outputs()) {
    if (!slot_of.count(out)) {
      if (!out->is_constant()) return Status::internal_error(str_cat("graph output '", out->name(), "' is never computed"));
      add_slot(out, Slot{SlotKind::kConstant, -1, out->constant(), out->dtype, out->constant()->dims()});
    }
    output_slots_.push_back(slot_of[out]);
  }
  return Status::ok();
}

void CompiledPlan::release_packed_constants(Graph& graph) {
  std::unordered_set<const Tensor*> slotted, read;
  for (const Step& step : steps_) {
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      const int s = step.inputs[i];
      if (s < 0 || slots_[s].kind != SlotKind::kConstant) continue;
      slotted.insert(slots_[s].constant);
      if (step.kernel->reads_input(i)) read.insert(slots_[s].constant);
    }
  }
  for (int s : output_slots_) {
    if (slots_[s].kind == SlotKind::kConstant) read.insert(slots_[s].constant);
  }
  const auto packed_away = [&](const Tensor* t) { return slotted.count(t) > 0 && read.count(t) == 0; };
  for (Step& step : steps_) {
    for (int& s : step.inputs) {
      if (s >= 0 && slots_[s].kind == SlotKind::kConstant && packed_away(slots_[s].constant)) s = -1;
    }
  }
  for (Value* v : graph.values()) {
    if (v->is_constant() && packed_away(v->constant())) graph.release_constant_data(v);
  }
  for (Slot& slot : slots_) {
    if (slot.kind == SlotKind::kConstant && packed_away(slot.constant)) slot.constant = nullptr;
  }
}

int64_t CompiledPlan::slot_bytes(const Slot& slot) const {
  int64_t n = static_cast<int64_t>(dtype_size(slot.dtype));
  for (int64_t d : slot.dims) n *= d;
  return n;
}

namespace {

// Whether every dim of `whole` before the node's axis is 1: the parts of a Concat or Split along
// that axis are then consecutive byte ranges of the whole.
bool parts_are_byte_ranges(const Node& node, const std::vector<int64_t>& whole) {
  const int64_t rank = static_cast<int64_t>(whole.size());
  int64_t axis = AttrReader(node).get_int("axis");
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  return std::all_of(whole.begin(), whole.begin() + axis, [](int64_t d) { return d == 1; });
}

}  // namespace

std::vector<int> CompiledPlan::part_buffers(const std::vector<int>& parts, const Slot& whole) const {
  std::vector<int> buffers;
  int64_t total = 0;
  for (int p : parts) {
    const Slot* slot = p >= 0 ? &slots_[p] : nullptr;
    const bool whole_buffer = slot != nullptr && slot->kind == SlotKind::kArena && slot->byte_offset == 0 &&
                              (whole.kind != SlotKind::kArena || slot->index != whole.index) &&
                              slot_bytes(*slot) == buffers_[slot->index].bytes &&
                              total % 64 == 0 &&  // every slab starts as aligned as a buffer of its own
                              std::find(buffers.begin(), buffers.end(), slot->index) == buffers.end();
    if (!whole_buffer) return {};
    buffers.push_back(slot->index);
    total += slot_bytes(*slot);
  }
  return total == slot_bytes(whole) ? buffers : std::vector<int>{};
}

void CompiledPlan::make_slabs(const std::vector<int>& buffers, const Slot& whole) {
  const SlotKind kind = whole.kind;
  const int index = whole.index;
  int64_t offset = 0;
  for (int b : buffers) {
    if (kind == SlotKind::kArena) {
      BufferRequest& merged = buffers_[index];
      merged.first_step = std::min(merged.first_step, buffers_[b].first_step);
      merged.last_step = std::max(merged.last_step, buffers_[b].last_step);
    }
    for (Slot& slot : slots_) {
      if (slot.kind == SlotKind::kArena && slot.index == b) {
        slot.kind = kind;
        slot.index = index;
        slot.byte_offset += offset;
      }
    }
    offset += buffers_[b].bytes;
    buffers_[b].bytes = 0;  // lives inside the whole's buffer (or the returned output) now
  }
}

// A Concat whose every dim before the axis is 1 lays its inputs one after the other: input i is
// the byte range [offset_i, offset_i + bytes_i) of the output. When each input is a whole arena
// buffer of its own (not a graph input, constant or output, not already a slab, not repeated),
// those buffers become slabs of the Concat's buffer and the Concat runs no kernel: a copy of
// every byte saved (YOLO's C3 blocks, DeepLabV3's ASPP). The merged buffer lives from the first
// producer to the last reader of any part. Nested Concats fold in turn, outer offsets adding up.
// A Concat that is a graph output folds the same way into the tensor a run returns (YOLO's
// detection head), which lives outside the arena.
//
// A Split whose outputs are such byte ranges of its input folds the other way: when the input is
// a whole arena buffer and each output a whole buffer of its own, the outputs become slabs of the
// input's buffer and the Split runs no kernel (ShuffleNet's channel split in every unit). The
// input's buffer then lives until the last reader of any part. Outputs already taken by an
// in-place Concat, graph outputs and misaligned slabs keep their copies.
std::vector<bool> CompiledPlan::plan_concat_and_split_in_place() {
  std::vector<bool> dropped(steps_.size(), false);
  for (const char* op : {"Concat", "Split"}) {
    const bool concat = op == std::string_view("Concat");
    for (size_t s = 0; s < steps_.size(); ++s) {
      const Step& step = steps_[s];
      const Node& node = *step.node;
      if (dropped[s] || node.op_type() != op || !node.domain().empty() || step.inputs.empty() || step.outputs.empty()) {
        continue;
      }
      if (concat && step.outputs.size() != 1) continue;
      const int whole_id = concat ? step.outputs[0] : step.inputs[0];
      if (whole_id < 0) continue;
      const Slot& whole = slots_[whole_id];
      const bool returned = concat && whole.kind == SlotKind::kGraphOutput;
      if (!returned && (whole.kind != SlotKind::kArena || whole.byte_offset != 0 ||
                        slot_bytes(whole) != buffers_[whole.index].bytes)) {
        continue;
      }
      if (!parts_are_byte_ranges(node, whole.dims)) continue;
      const std::vector<int> buffers = part_buffers(concat ? step.inputs : step.outputs, whole);
      if (buffers.empty()) continue;
      make_slabs(buffers, whole);
      dropped[s] = true;
    }
  }
  return dropped;
}

// A kernel that can run in place writes output 0 over its in-place input (Kernel::in_place_input)
// when that input's buffer is read for the last time by that step, by no other input of it, and
// has the same size: the two buffers become one. Slabs of an in-place Concat never take part
// (their buffer is larger than they are).
void CompiledPlan::plan_in_place(const std::vector<bool>& dropped) {
  // Buffers merged so far, as a union-find: merged_into[b] leads to the buffer b now shares.
  std::vector<int> merged_into(buffers_.size());
  std::iota(merged_into.begin(), merged_into.end(), 0);
  auto buffer_of = [&](const Slot& slot) {
    int b = slot.index;
    while (merged_into[b] != b) b = merged_into[b] = merged_into[merged_into[b]];
    return b;
  };
  for (size_t s = 0; s < steps_.size(); ++s) {
    const Step& step = steps_[s];
    const int k = dropped[s] ? -1 : step.kernel->in_place_input();
    if (k < 0 || static_cast<size_t>(k) >= step.inputs.size() || step.inputs[k] < 0) continue;
    const Slot& in = slots_[step.inputs[k]];
    const Slot& out = slots_[step.outputs[0]];
    if (in.kind != SlotKind::kArena || out.kind != SlotKind::kArena) continue;
    const int to = buffer_of(in), from = buffer_of(out);
    if (to == from) continue;
    bool shared = false;
    for (size_t j = 0; j < step.inputs.size(); ++j) {
      const int other = step.inputs[j];
      shared |= j != static_cast<size_t>(k) && other >= 0 && slots_[other].kind == SlotKind::kArena &&
                buffer_of(slots_[other]) == to;
    }
    if (shared) continue;
    BufferRequest& keep = buffers_[to];
    BufferRequest& merged = buffers_[from];
    if (slot_bytes(in) != keep.bytes || slot_bytes(out) != merged.bytes) continue;
    if (keep.last_step != static_cast<int>(s) || keep.bytes != merged.bytes) continue;
    keep.last_step = std::max(keep.last_step, merged.last_step);
    merged.bytes = 0;  // no longer needs memory of its own
    merged_into[from] = to;
  }
  for (Slot& slot : slots_) {
    if (slot.kind == SlotKind::kArena) slot.index = buffer_of(slot);
  }
}

// Shapes bound at run time (a huge symbolic batch) can make the arena larger than the allocation
// cap: a user error naming the sizes, checked at compile time and again before each run (the cap
// is process-wide and may have been lowered since).
Status CompiledPlan::check_arena_size() const {
  if (static_cast<uint64_t>(memory_.arena_bytes) <= max_allocation_bytes()) return Status::ok();
  std::string inputs;
  for (const Value* v : graph_->inputs()) {
    inputs += str_cat(inputs.empty() ? "" : ", ", v->name(), ": ", v->type_string());
  }
  return Status::user_error(str_cat("the memory plan for inputs ", inputs, " needs an arena of ",
                                    memory_.arena_bytes, " bytes, above the allocation cap of ",
                                    max_allocation_bytes(), " bytes"));
}

std::unique_ptr<CompiledPlan::Arena> CompiledPlan::acquire_arena() const {
  {
    std::lock_guard lock(pool_mutex_);
    if (!pool_.empty()) {
      auto arena = std::move(pool_.back());
      pool_.pop_back();
      return arena;
    }
  }
  auto arena = std::make_unique<Arena>();
  // The size was planned at compile time and is at most the sum of the model's intermediates.
  arena->memory = Tensor::zeros(DType::kU8, {std::max<int64_t>(memory_.arena_bytes, 1)}, "arena").value();
  auto* base = static_cast<uint8_t*>(arena->memory.raw_data());
  arena->slot_tensors.resize(slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& slot = slots_[i];
    if (slot.kind == SlotKind::kArena) {
      arena->slot_tensors[i] =
          Tensor::wrap(slot.dtype, slot.dims, base + memory_.offsets[slot.index] + slot.byte_offset, nullptr);
    } else if (slot.kind == SlotKind::kConstant && slot.constant != nullptr) {
      arena->slot_tensors[i] = slot.constant->dims() == slot.dims
                                   ? *slot.constant
                                   : slot.constant->reshaped(slot.dims).value();
    }
  }
  arena->step_inputs.resize(steps_.size());
  arena->step_outputs.resize(steps_.size());
  for (size_t s = 0; s < steps_.size(); ++s) {
    for (int slot : steps_[s].inputs) {
      arena->step_inputs[s].push_back(slot >= 0 ? &arena->slot_tensors[slot] : nullptr);
    }
    for (int slot : steps_[s].outputs) arena->step_outputs[s].push_back(&arena->slot_tensors[slot]);
  }
  return arena;
}

void CompiledPlan::release_arena(std::unique_ptr<Arena> arena) const {
  std::lock_guard lock(pool_mutex_);
  pool_.push_back(std::move(arena));
}

Result<TensorMap> CompiledPlan::run(const TensorMap& inputs, const RunLimits& limits) const {
  return run_steps(inputs, nullptr, limits);
}

Result<TensorMap> CompiledPlan::run_timed(const TensorMap& inputs, std::vector<StepTiming>& timings) const {
  timings.assign(steps_.size(), StepTiming{});
  return run_steps(inputs, &timings, {});
}

Result<TensorMap> CompiledPlan::run_steps(const TensorMap& inputs, std::vector<StepTiming>* timings,
                                          const RunLimits& limits) const {
  OPFUSE_TRY(check_arena_size());
  std::unique_ptr<Arena> arena = acquire_arena();
  std::vector<Tensor> outputs(graph_->outputs().size());
  // Bind graph inputs and fresh output tensors (and the views aliasing them).
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& slot = slots_[i];
    if (slot.kind == SlotKind::kGraphInput) {
      const Tensor& given = inputs.at(graph_->inputs()[slot.index]->name());
      arena->slot_tensors[i] = Tensor::wrap(slot.dtype, slot.dims, const_cast<void*>(given.raw_data()), nullptr);
    } else if (slot.kind == SlotKind::kGraphOutput) {
      if (!outputs[slot.index].defined()) {
        const Value* v = graph_->outputs()[slot.index];
        const Slot& whole = slots_[output_slots_[slot.index]];  // `slot` may be a slab of it
        // Every element is written by the plan's steps before the run returns.
        if (static_cast<size_t>(slot.index) < arena->outputs.size() && arena->outputs[slot.index].sole_owner()) {
          outputs[slot.index] = arena->outputs[slot.index];
        } else {
          OPFUSE_ASSIGN_OR_RETURN(outputs[slot.index],
                                  Tensor::uninitialized(whole.dtype, whole.dims, str_cat("output '", v->name(), "'")));
        }
      }
      arena->slot_tensors[i] = Tensor::wrap(
          slot.dtype, slot.dims, static_cast<uint8_t*>(outputs[slot.index].raw_data()) + slot.byte_offset, nullptr);
    }
  }
  if (threads_ > 0) omp_set_num_threads(threads_);
  const ScopedFlushDenormals flush(flush_denormals_);
  Status status;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point run_start = Clock::now();
  ScopedRunLimits scoped(limits);  // for kernels that loop (Loop, Scan)
  for (size_t s = 0; s < steps_.size() && status.is_ok(); ++s) {
    if (s > 0 && limits.stop_requested()) {
      status = limits.stopped(str_cat("after ", s, " of ", steps_.size(), " steps (the last: ",
                                      steps_[s - 1].node->name(), ")"));
      break;
    }
    const Clock::time_point start = timings ? Clock::now() : run_start;
    status = steps_[s].kernel->run(arena->step_inputs[s], arena->step_outputs[s]);
    if (timings) {
      const Clock::time_point end = Clock::now();
      (*timings)[s] = {std::chrono::duration<double, std::micro>(start - run_start).count(),
                       std::chrono::duration<double, std::micro>(end - start).count()};
    }
  }
  // Outputs that are graph inputs or constants are returned as copies.
  TensorMap result;
  for (size_t i = 0; i < output_slots_.size() && status.is_ok(); ++i) {
    const Value* v = graph_->outputs()[i];
    const Slot& slot = slots_[output_slots_[i]];
    if (slot.kind == SlotKind::kGraphOutput) {
      result[v->name()] = outputs[slot.index];
    } else {
      result[v->name()] = arena->slot_tensors[output_slots_[i]].clone();
    }
  }
  arena->outputs = std::move(outputs);
  release_arena(std::move(arena));
  OPFUSE_TRY(status);
  return result;
}

std::vector<std::string> CompiledPlan::describe_steps() const {
  std::vector<std::string> lines;
  for (const Step& step : steps_) {
    std::string in_place;
    const Slot& out = slots_[step.outputs[0]];
    for (size_t j = 0; j < step.inputs.size() && in_place.empty(); ++j) {
      if (step.inputs[j] < 0) continue;
      const Slot& in = slots_[step.inputs[j]];
      if (in.kind == SlotKind::kArena && out.kind == SlotKind::kArena && in.index == out.index &&
          in.byte_offset == out.byte_offset) {
        in_place = str_cat(" (in place over input ", j, ")");
      }
    }
    lines.push_back(str_cat(step.node->describe(), in_place, " -> ", step_kernel_label(&step - steps_.data())));
  }
  return lines;
}

std::string CompiledPlan::step_kernel(size_t step) const {
  const Kernel& kernel = *steps_[step].kernel;
  const std::string impl = kernel.implementation();
  return impl.empty() ? std::string(kernel.name()) : str_cat(kernel.name(), " [", impl, "]");
}

std::string CompiledPlan::step_kernel_label(size_t step) const {
  return steps_[step].tuned ? step_kernel(step) + " (tuning record)" : step_kernel(step);
}

}  // namespace opfuse
