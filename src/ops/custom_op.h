// Custom operators registered from C++ (or from a plugin, plugin/plugin_loader.h): an OpDef
// like every built-in op, checked for what the rest of opfuse relies on.
//
//   OpDef def;
//   def.name = "Swish"; def.domain = "com.example"; def.min_opset = 1;
//   def.kind = FusionKind::kElementwise;            // fuses like a built-in ...
//   def.infer = same_type_as_input0;
//   def.scalar = [](const ScalarExprContext&) {      // ... because it says what it computes
//     ScalarBuilder b; auto x = b.arg(0); return b.finish(x * sigmoid(x)); };
//   OPFUSE_TRY(register_custom_op(std::move(def)));
//
// A custom op is either elementwise/broadcast with a scalar expression (the region fuser and
// the vectorised elementwise kernel compose it), or opaque (a fusion barrier running its
// reference kernel or an optimised kernel added with kernels/kernel_registry.h).
#pragma once

#include "ops/op_def.h"

namespace opfuse {

// Validates and adds the op to OpRegistry::global(). Errors name the op: duplicate name,
// missing inference or kernel, a fusion kind the op cannot honour.
Status register_custom_op(OpDef def);

// A ready-made inference function: output 0 has input 0's dtype and shape.
Status infer_same_as_input0(InferContext& ctx);
// Output 0 has input 0's dtype and the broadcast shape of all present inputs.
Status infer_broadcast(InferContext& ctx);

}  // namespace opfuse
