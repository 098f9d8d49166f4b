#include "ops/eager.h"

#include <algorithm>
#include <unordered_map>

#include "core/run_limits.h"
#include "ops/op_def.h"
#include "ops/reference.h"

namespace opfuse {

Result<TensorMap> run_eager(const Graph& graph, const TensorMap& inputs, EagerStats* stats) {
  EagerStats local;
  int64_t live_bytes = 0;
  std::unordered_map<const Value*, Tensor> live;
  std::unordered_map<const Value*, size_t> remaining_uses;
  for (Value* v : graph.values()) remaining_uses[v] = v->uses().size();
  for (Value* in : graph.inputs()) {
    auto it = inputs.find(in->name());
    if (it == inputs.end()) {
      return Status::user_error(str_cat("missing input '", in->name(), "'"));
    }
    live[in] = it->second;
  }
  auto lookup = [&](const Value* v) -> const Tensor* {
    if (v == nullptr) return nullptr;
    if (const Tensor* c = v->constant()) return c;
    auto it = live.find(v);
    return it == live.end() ? nullptr : &it->second;
  };
  const RunLimits& limits = current_run_limits();
  const Node* last = nullptr;
  for (const Node* node : graph.nodes()) {
    if (last != nullptr && limits.stop_requested()) {
      return limits.stopped(str_cat("after ", local.kernels, " of ", graph.num_nodes(), " nodes (the last: ",
                                    last->name(), ")"));
    }
    last = node;
    std::vector<const Tensor*> args;
    for (const Value* in : node->inputs()) {
      const Tensor* t = lookup(in);
      if (in != nullptr && t == nullptr) {
        return Status::internal_error(
            str_cat(node->describe(), ": input '", in->name(), "' has not been computed"));
      }
      args.push_back(t);
    }
    OPFUSE_ASSIGN_OR_RETURN(std::vector<Tensor> outs, run_reference(*node, std::move(args)));
    ++local.kernels;
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      const int64_t bytes = static_cast<int64_t>(outs[i].nbytes());
      local.allocated_bytes += bytes;
      live_bytes += bytes;
      live[node->output(i)] = std::move(outs[i]);
    }
    local.peak_live_bytes = std::max(local.peak_live_bytes, live_bytes);
    // Free intermediates after their last use, as a real eager runtime would.
    for (const Value* in : node->inputs()) {
      if (in && !in->is_graph_output() && --remaining_uses[in] == 0) {
        auto it = live.find(in);
        if (it != live.end()) {
          live_bytes -= static_cast<int64_t>(it->second.nbytes());
          live.erase(it);
        }
      }
    }
  }
  if (stats) *stats = local;
  TensorMap outputs;
  for (Value* out : graph.outputs()) {
    const Tensor* t = lookup(out);
    if (t == nullptr) {
      return Status::internal_error(str_cat("graph output '", out->name(), "' was not computed"));
    }
    outputs[out->name()] = *t;
  }
  return outputs;
}

}  // namespace opfuse
