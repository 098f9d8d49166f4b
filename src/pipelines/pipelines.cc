// The pipeline of each optimisation level: a table of stages, each with why it is there. Each
// stage is defined once below; a level lists the stages it runs, in order.
#include "pipelines/pipeline.h"

namespace opfuse {
namespace {

// Memory is planned from static shapes, so even O0 evaluates shape sub-graphs (Shape -> Gather
// -> Concat -> Reshape) once; it rewrites nothing else.
const PipelineStage kShapesOnly = {{"infer_shapes"}, false,
                                   "O0 compiles the graph as given, apart from what planning needs:"};
// An If on a condition that folds may pick a branch of other shapes: taking it is part of
// making shapes static.
const PipelineStage kStaticShapes = {{"constant_fold", "inline_constant_if", "dce", "infer_shapes"}, true,
                                     "evaluate shape arithmetic (and Ifs on it) so every shape is static"};

// First, so every later pass (and the fuser) sees a composite's primitives.
const PipelineStage kExpandComposites = {{"expand_composites"}, false,
                                         "inline composite ops into the primitives they are made of"};
const PipelineStage kShapes = {{"infer_shapes"}, false, "canonicalisation needs shapes and dtypes"};
// Before canonicalisation, whose Cast rules then drop the Casts between float32 values, and
// before every fusion, so a float16 model fuses onto the float32 kernels like a float32 one.
const PipelineStage kFp16InFp32 = {{"fp16_in_fp32", "infer_shapes"}, false,
                                   "compute float16 models in float32 (the CPU has no float16 arithmetic)"};
// Before canonicalisation too, whose Cast rules drop the Casts to float it leaves reading floats,
// and before every fusion, so the products fuse like float32 MatMuls.
const PipelineStage kIntegerProductsInFp32 = {
    {"integer_products_in_fp32", "quantize_pairs_in_fp32", "infer_shapes"}, false,
    "compute quantized products (MatMulInteger, ConvInteger read as float, QLinear ops) and QDQ pairs as float32 ops"};
// Folding exposes simplifications (a Reshape whose shape became constant), simplifying exposes
// duplicates and dead nodes, and merging exposes more folds: loop until stable.
const PipelineStage kCanonicalise = {
    {"constant_fold", "inline_constant_if", "simplify", "cse", "dce"}, true,
    "canonicalise: fold constants and shape arithmetic, take constant Ifs, local rules, merge duplicates, drop dead code"};
// After canonicalisation, so BN parameters computed from constants are constants by now.
const PipelineStage kFoldBatchNorm = {{"fold_batchnorm", "dce"}, false,
                                      "fold inference BatchNormalization into its Conv/Gemm/MatMul"};
// After BN folding, whose products of scales and weights can be denormal too. At every level:
// an output moves by at most (flushed weights) * 1.2e-38 * max |x| (passes/flush_denormal_weights.cc).
const PipelineStage kFlushDenormalWeights = {{"flush_denormal_weights", "dce"}, false,
                                             "set denormal weights to zero (slow on Intel cores)"};
// After BN folding, so every Conv+BN+Relu is a Conv+Relu by now. One greedy driver runs every
// pattern: composites (GELU) become one op, which anchors then absorb with the rest of their
// elementwise chain (bias, scale, activations, residual Add).
const PipelineStage kFusePatterns = {{"fuse_patterns", "dce"}, false,
                                     "pattern and epilogue fusion: one kernel per anchor and its elementwise chain"};
// Exact, and could run at O1; at O3 only so that O1/O2 stay as measured. Before layout, which
// needs the final kernel shapes.
const PipelineStage kPruneConvTaps = {
    {"prune_conv_taps", "dce"}, false,
    "drop conv taps that read only padding (dilations larger than the feature map)"};
// After pattern fusion (whose attention pattern reads Reshape/Transpose chains itself) and
// before layout, which runs the gathers blocked, and region fusion, which would otherwise take
// the chains into index-table kernels.
const PipelineStage kChannelGather = {{"channel_gather", "dce"}, false,
                                      "copy channel shuffles as one gather of whole channels"};
// After pattern fusion (whose lstm_cell pattern makes the one-step LSTMs) and channel_gather
// (which drops the Squeeze/Unsqueeze round trips between the steps' states).
const PipelineStage kMergeRnnSteps = {{"merge_rnn_steps", "dce"}, false,
                                      "merge an unrolled loop's one-step recurrences into one over the sequence"};
// After the anchors took their epilogues: it rewrites FusedConvs into blocked ones.
const PipelineStage kLayout = {
    {"layout", "dce"}, false,
    "keep activations in oneDNN's blocked nChw16c layout between convs; reorder at boundaries"};
// After layout, which makes the blocked convs it merges, and before region fusion, which leaves
// anchors alone either way.
const PipelineStage kDepthwiseIntoPointwise = {
    {"depthwise_into_pointwise", "dce"}, false,
    "run a pointwise conv and the depthwise conv after it as one kernel where their tensor leaves L2"};
// After the anchors took their epilogues: what is left between anchors is elementwise,
// injective and row-reduction work, generated as one kernel per region. At O3 after the layout
// stage, so regions work on the blocked tensors (their ops are ordinary ops on the 5-d physical
// dims) and regions between convs need no reorders.
const PipelineStage kRegionFusion = {
    {"expand_to_primitives", "region_fusion", "dce"}, false,
    "expand LogSoftmax into primitives and fuse regions into generated kernels"};
const PipelineStage kRefreshShapes = {{"infer_shapes"}, false, "refresh shapes for planning after the rewrites"};

}  // namespace

const std::vector<PipelineStage>& pipeline_for(OptLevel level) {
  static const std::vector<PipelineStage> o0 = {kShapesOnly, kStaticShapes};
  static const std::vector<PipelineStage> o1 = {kExpandComposites, kShapes,        kFp16InFp32, kIntegerProductsInFp32,
                                                kCanonicalise,     kFoldBatchNorm, kFlushDenormalWeights,
                                                kRefreshShapes};
  static const std::vector<PipelineStage> o2 = {kExpandComposites, kShapes,       kFp16InFp32,   kIntegerProductsInFp32,
                                                kCanonicalise,     kFoldBatchNorm, kFlushDenormalWeights, kFusePatterns,
                                                kChannelGather,    kMergeRnnSteps, kRegionFusion, kRefreshShapes};
  static const std::vector<PipelineStage> o3 = {kExpandComposites, kShapes,        kFp16InFp32, kIntegerProductsInFp32,
                                                kCanonicalise,     kFoldBatchNorm, kFlushDenormalWeights, kFusePatterns,
                                                kChannelGather,    kMergeRnnSteps, kPruneConvTaps, kLayout, kDepthwiseIntoPointwise, kRegionFusion,
                                                kRefreshShapes};
  switch (level) {
    case OptLevel::kO0: return o0;
    case OptLevel::kO1: return o1;
    case OptLevel::kO2: return o2;
    case OptLevel::kO3: return o3;
  }
  return o0;
}

}  // namespace opfuse
