// The entry points of the passes (one file each under src/passes/), listed in pass_list.cc.
#pragma once

#include "passes/pass.h"

namespace opfuse {

Result<bool> run_infer_shapes_pass(Graph& graph, PassContext& context);       // frontend_passes.cc
Result<bool> run_expand_composites_pass(Graph& graph, PassContext& context);  // frontend_passes.cc
Result<bool> run_dce_pass(Graph& graph, PassContext& context);            // dce.cc
Result<bool> run_constant_fold_pass(Graph& graph, PassContext& context);  // constant_fold.cc
Result<bool> run_cse_pass(Graph& graph, PassContext& context);            // cse.cc
Result<bool> run_simplify_pass(Graph& graph, PassContext& context);       // simplify.cc
Result<bool> run_inline_constant_if_pass(Graph& graph, PassContext& context);  // inline_constant_if.cc
Result<bool> run_fp16_in_fp32_pass(Graph& graph, PassContext& context);     // fp16_in_fp32.cc
Result<bool> run_integer_products_in_fp32_pass(Graph& graph, PassContext& context);  // integer_products_in_fp32.cc
Result<bool> run_quantize_pairs_in_fp32_pass(Graph& graph, PassContext& context);  // quantize_pairs_in_fp32.cc
Result<bool> run_fold_batchnorm_pass(Graph& graph, PassContext& context); // fold_batchnorm.cc
Result<bool> run_flush_denormal_weights_pass(Graph& graph, PassContext& context);  // flush_denormal_weights.cc
Result<bool> run_fuse_patterns_pass(Graph& graph, PassContext& context);  // patterns/driver.cc
Result<bool> run_expand_to_primitives_pass(Graph& graph, PassContext& context);  // expand_to_primitives.cc
Result<bool> run_region_fusion_pass(Graph& graph, PassContext& context);      // region_fusion.cc
Result<bool> run_layout_pass(Graph& graph, PassContext& context);         // layout.cc
Result<bool> run_prune_conv_taps_pass(Graph& graph, PassContext& context); // prune_conv_taps.cc
Result<bool> run_depthwise_into_pointwise_pass(Graph& graph, PassContext& context);  // depthwise_into_pointwise.cc
Result<bool> run_channel_gather_pass(Graph& graph, PassContext& context);  // channel_gather.cc
Result<bool> run_merge_rnn_steps_pass(Graph& graph, PassContext& context);  // merge_rnn_steps.cc

}  // namespace opfuse
