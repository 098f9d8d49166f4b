// Every pass of opfuse, named once. Pipelines (pipelines/pipelines.cc) refer to them by name.
#include "passes/pass.h"
#include "passes/passes.h"

namespace opfuse {

const std::vector<PassDef>& all_passes() {
  static const std::vector<PassDef> passes = {
      {"infer_shapes", "shape and dtype inference over the whole graph", run_infer_shapes_pass},
      {"dce", "removes unused side-effect-free nodes and unused constants", run_dce_pass},
      {"constant_fold", "evaluates nodes of constants (and Shape/Size of static shapes) at compile time",
       run_constant_fold_pass},
      {"inline_constant_if", "replaces an If whose condition became a constant by the nodes of the branch it takes",
       run_inline_constant_if_pass},
      {"cse", "merges identical nodes on identical inputs, and equal small constants", run_cse_pass},
      {"simplify", "local algebraic rules: identities, neutral elements, chains of Transpose/Reshape/Cast",
       run_simplify_pass},
      {"fp16_in_fp32", "computes a float16 model in float32: weights widened once, float16 Casts dropped, Casts only at float16 graph inputs/outputs",
       run_fp16_in_fp32_pass},
      {"integer_products_in_fp32", "takes integer products off the reference loops: MatMulInteger (with ONNX Runtime's dequantization and bias: opfuse::FusedMatMulInteger) and QLinearMatMul onto an exact 16-bit integer GEMM, ConvInteger with its DynamicQuantizeLinear onto an exact 16-bit integer conv (opfuse::QuantizedConv, from AVX2), QLinearConv and (below VNNI) other ConvIntegers as float32 Convs",
       run_integer_products_in_fp32_pass},
      {"quantize_pairs_in_fp32", "computes QuantizeLinear -> DequantizeLinear pairs of one constant scale and zero point (QDQ models' activations) as elementwise float ops, exactly",
       run_quantize_pairs_in_fp32_pass},
      {"fold_batchnorm", "folds inference BatchNormalization into a preceding Conv/ConvTranspose/Gemm/MatMul",
       run_fold_batchnorm_pass},
      {"flush_denormal_weights", "sets the denormal float32 weights of Conv/MatMul/Gemm/RNNs (below 1.2e-38) to zero: each costs a microcode assist per multiply on Intel cores",
       run_flush_denormal_weights_pass},
      {"expand_composites", "inlines composite ops (user-defined subgraph ops) so their bodies fuse with their neighbours",
       run_expand_composites_pass},
      {"fuse_patterns", "every fusion pattern (src/patterns): composites (GELU ...), anchor epilogues (Conv/MatMul/Gemm + bias, activations, residual Add), Focus",
       run_fuse_patterns_pass},
      {"expand_to_primitives", "rewrites LogSoftmax (last axis) into primitives for region fusion; Softmax and LayerNormalization keep their faster dedicated kernels",
       run_expand_to_primitives_pass},
      {"region_fusion", "fuses clusters of elementwise/broadcast/injective/row-reduction ops into opfuse::FusedRegion kernels",
       run_region_fusion_pass},
      {"layout", "keeps CNN activations blocked (nChw16c) between convs, pools and elementwise ops; reorders at boundaries",
       run_layout_pass},
      {"depthwise_into_pointwise", "runs a pointwise conv and the 3x3 depthwise conv reading its output as one oneDNN kernel (opfuse::BlockedConvDepthwise) where the expanded tensor between them would not stay in L2",
       run_depthwise_into_pointwise_pass},
      {"prune_conv_taps", "drops conv kernel rows/columns that only ever read zero padding (dilated ASPP convs)",
       run_prune_conv_taps_pass},
      {"channel_gather", "turns chains of movement ops that only reorder whole channels (ShuffleNet's channel shuffle) into one opfuse::ChannelGather copy",
       run_channel_gather_pass},
      {"merge_rnn_steps", "turns chains of one-step LSTM/GRU/RNN nodes (an unrolled loop over time) into one node over the whole sequence",
       run_merge_rnn_steps_pass},
  };
  return passes;
}

}  // namespace opfuse
