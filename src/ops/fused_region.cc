// The opfuse::FusedRegion record (see fused_region.h). Inference reads the output types declared
// in the body; the reference kernel is eager mode over the body.
#include "ops/fused_region.h"

#include <cstring>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "ir/text_format.h"
#include "ops/fused.h"
#include "ops/op_list.h"
#include "ops/eager.h"

namespace opfuse {
namespace {

// Bodies are parsed once per text: inference and the reference kernel run per call.
constexpr size_t kMaxCachedBodies = 4096;

Result<std::shared_ptr<const Graph>> parse_body(const std::string& text) {
  static std::mutex mutex;
  static std::unordered_map<std::string, std::shared_ptr<const Graph>> cache;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache.find(text); it != cache.end()) return it->second;
  }
  OPFUSE_ASSIGN_OR_RETURN(Graph g, parse_graph(text));
  OPFUSE_TRY(g.topological_sort());
  auto shared = std::make_shared<const Graph>(std::move(g));
  std::lock_guard<std::mutex> lock(mutex);
  if (cache.size() >= kMaxCachedBodies) cache.clear();
  cache.emplace(text, shared);
  return shared;
}

Status check_signature(const Node& node, const Graph& body) {
  if (body.inputs().size() != node.inputs().size() || body.outputs().size() != node.outputs().size()) {
    return Status::user_error(str_cat(node.describe(), ": body has ", body.inputs().size(), " inputs and ",
                                      body.outputs().size(), " outputs, the node ", node.inputs().size(),
                                      " and ", node.outputs().size()));
  }
  return Status::ok();
}

Status infer_fused_region(InferContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(auto body, fused_region_body(ctx.node()));
  OPFUSE_TRY(check_signature(ctx.node(), *body));
  for (size_t i = 0; i < body->inputs().size(); ++i) {
    if (ctx.has_input(i) && ctx.input_dtype(i) != DType::kUndefined && ctx.input_dtype(i) != body->inputs()[i]->dtype) {
      return ctx.error(str_cat("input ", i, " is ", dtype_name(ctx.input_dtype(i)), " but the body expects ",
                               dtype_name(body->inputs()[i]->dtype)));
    }
  }
  for (size_t i = 0; i < body->outputs().size(); ++i) {
    const Value* o = body->outputs()[i];
    ctx.set_output(i, o->dtype, o->shape);
  }
  return Status::ok();
}

Status fused_region_kernel(KernelContext& ctx) {
  OPFUSE_ASSIGN_OR_RETURN(auto body, fused_region_body(ctx.node()));
  OPFUSE_TRY(check_signature(ctx.node(), *body));
  TensorMap inputs;
  for (size_t i = 0; i < body->inputs().size(); ++i) {
    if (!ctx.has_input(i)) return ctx.error(str_cat("input ", i, " is missing"));
    inputs[body->inputs()[i]->name()] = ctx.input(i);
  }
  OPFUSE_ASSIGN_OR_RETURN(TensorMap outs, run_eager(*body, inputs));
  for (size_t i = 0; i < body->outputs().size(); ++i) {
    const Tensor& t = outs.at(body->outputs()[i]->name());
    OPFUSE_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(i, t.dtype(), t.dims()));
    if (t.nbytes() > 0) std::memcpy(out->raw_data(), t.raw_data(), t.nbytes());
  }
  return Status::ok();
}

}  // namespace

Result<std::shared_ptr<const Graph>> fused_region_body(const Node& node) {
  const std::string text = AttrReader(node).get_string("body");
  auto body = parse_body(text);
  if (!body.is_ok()) {
    return Status::user_error(str_cat(node.describe(), ": bad body: ", body.status().message()));
  }
  return body;
}

std::string print_region_body(const Graph& body) {
  PrintOptions options;
  options.max_constant_elements = std::numeric_limits<int64_t>::max();
  return print_graph(body, options);
}

std::vector<OpDef> fused_region_ops() {
  OpDef d;
  d.name = std::string(kFusedRegionOp);
  d.domain = std::string(kFusedDomain);
  d.min_opset = 1;
  d.max_opset = 1;
  d.min_inputs = 0;
  d.max_inputs = std::numeric_limits<int>::max();
  d.min_outputs = 1;
  d.max_outputs = std::numeric_limits<int>::max();
  d.attrs = {{"body", AttrType::kString, std::nullopt, /*required=*/true},
             // The original nodes' names, for reports (the body keeps their names too).
             {"members", AttrType::kStrings, AttrValue(std::vector<std::string>{}), false}};
  // Already fused: no further fusion takes it in.
  d.kind = FusionKind::kOpaque;
  d.infer = infer_fused_region;
  d.reference = fused_region_kernel;
  d.summary = "a fused region: its `body` subgraph (text IR) run as one kernel";
  return {std::move(d)};
}

}  // namespace opfuse
