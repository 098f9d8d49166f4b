// If nodes whose condition is a constant in the file (an initializer or a Constant node's
// value): the importer replaces each by the branch it takes, before building the graph, so the
// branch's nodes fuse with their neighbours. Exporters write them for configuration flags
// (a wake-word head's "use this branch", nested ones around voice-activity LSTMs).
#pragma once

#include <onnx/onnx_pb.h>

#include "core/status.h"

namespace opfuse::onnx_import {

// Inlines every If of the main graph whose condition is a constant: the taken branch's nodes
// and initializers join the graph under names prefixed with the If's ("<if>/<name>"), its
// outputs become the If's outputs (through Identity), and references to outer-scope values
// stay as they are. Repeats while inlining exposes more (nested Ifs on constants). An If whose
// condition is computed at run time is left for the importer (which refuses it). Errors name
// the If node: a condition that is not one bool, a branch whose outputs do not match.
Status inline_constant_ifs(onnx::ModelProto& model);

}  // namespace opfuse::onnx_import
