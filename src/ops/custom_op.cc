#include "ops/custom_op.h"

#include "ops/fused.h"
#include "ops/registry.h"

namespace opfuse {

Status register_custom_op(OpDef def) {
  const std::string who = str_cat("custom op ", def.name, " (domain ", display_domain(def.domain), ")");
  if (def.name.empty()) return Status::user_error("custom op: the op has no name");
  if (def.domain == kFusedDomain) {
    return Status::user_error(str_cat(who, ": domain '", kFusedDomain, "' is reserved for opfuse's fused ops"));
  }
  if (def.domain == "ai.onnx") def.domain.clear();
  if (def.min_opset > def.max_opset) {
    return Status::user_error(str_cat(who, ": opset range ", def.min_opset, "-", def.max_opset, " is empty"));
  }
  if (def.infer == nullptr) return Status::user_error(who + ": no shape/dtype inference function");
  switch (def.kind) {
    case FusionKind::kElementwise:
    case FusionKind::kBroadcast:
      if (def.scalar == nullptr) {
        return Status::user_error(str_cat(who, ": fusion kind ", fusion_kind_name(def.kind),
                                          " needs a scalar expression (what the fuser composes); "
                                          "declare it opaque otherwise"));
      }
      if (def.min_outputs != 1 || def.max_outputs != 1) {
        return Status::user_error(who + ": an elementwise op has exactly one output");
      }
      break;
    case FusionKind::kOpaque:
      if (def.reference == nullptr && def.scalar == nullptr) {
        return Status::user_error(who + ": an opaque op needs a reference kernel");
      }
      break;
    default:
      // Injective, reduction and anchor ops need index maps, reduce specs or epilogue kernels
      // that a custom op cannot give yet.
      return Status::user_error(str_cat(who, ": fusion kind ", fusion_kind_name(def.kind),
                                        " is not available to custom ops (use elementwise, "
                                        "broadcast or opaque)"));
  }
  if (OpRegistry::global().find(def.domain, def.name) != nullptr) {
    return Status::user_error(who + " is already registered (op names must be unique per domain)");
  }
  return OpRegistry::global().add(std::move(def));
}

Status infer_same_as_input0(InferContext& ctx) {
  for (size_t i = 0; i < ctx.num_outputs(); ++i) ctx.set_output(i, ctx.input_dtype(0), ctx.input_shape(0));
  return Status::ok();
}

Status infer_broadcast(InferContext& ctx) {
  std::vector<Shape> shapes;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (!ctx.input_shape(i)) {
      ctx.set_output(0, ctx.input_dtype(0), std::nullopt);
      return Status::ok();
    }
    shapes.push_back(*ctx.input_shape(i));
  }
  Result<Shape> out = broadcast_shapes(shapes, ctx.node().describe());
  if (!out.is_ok()) return ctx.error(out.status().message());
  ctx.set_output(0, ctx.input_dtype(0), *out);
  return Status::ok();
}

}  // namespace opfuse
