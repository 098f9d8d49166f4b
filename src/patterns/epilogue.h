// What the epilogue family shares with other anchor families (anchor_affine.cc, focus.cc).
#pragma once

#include <string>

#include "patterns/pattern.h"

namespace opfuse::patterns {

// Any anchor (Conv, MatMul, Gemm) or its fused form, captured as "anchor".
PatternNode anchor_tree();

// Replaces the match by the anchor's fused form with `post_op` appended to its epilogue (and
// `residual`, when given, as input 3); named like the anchor, output named like the root's.
Result<Node*> absorb_into_anchor(Graph& graph, const Match& m, const std::string& post_op, Value* residual);

}  // namespace opfuse::patterns
