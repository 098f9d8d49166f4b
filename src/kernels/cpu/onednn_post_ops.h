// An epilogue (ops/fused.h) as oneDNN post-ops: shared by every anchor kernel with epilogues
// (onednn_conv.cc's FusedConv, onednn_fused_matmul.cc's FusedMatMul / FusedGemm).
#pragma once

#include <optional>
#include <span>

#include "kernels/cpu/onednn_common.h"
#include "ops/fused.h"

namespace opfuse::onednn {

// `ops` as oneDNN post-ops; nullopt when one has no oneDNN counterpart. The residual add (if in
// `ops`) becomes a binary add post-op of `y_md`; `residual_index` gets its position, or -1.
std::optional<dnnl::post_ops> make_post_ops(std::span<const PostOp> ops, const dnnl::memory::desc& y_md,
                                            int& residual_index);

}  // namespace opfuse::onednn
