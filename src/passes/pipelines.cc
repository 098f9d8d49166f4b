// The pipeline of each optimisation level: a table of stages, each with why it is there.
#include "passes/pass.h"

namespace opfuse {

const std::vector<PipelineStage>& pipeline_for(OptLevel level) {
  static const std::vector<PipelineStage> o0 = {
      {{"infer_shapes"}, false, "O0 compiles the graph as given, apart from what planning needs:"},
      // Memory is planned from static shapes, so shape sub-graphs (Shape -> Gather -> Concat ->
      // Reshape) must be evaluated once; nothing else is rewritten.
      {{"constant_fold", "dce", "infer_shapes"}, true, "evaluate shape arithmetic so every shape is static"},
  };
  static const std::vector<PipelineStage> o1 = {
      // First, so every later pass (and the fuser) sees a composite's primitives.
      {{"expand_composites"}, false, "inline composite ops into the primitives they are made of"},
      {{"infer_shapes"}, false, "canonicalisation needs shapes and dtypes"},
      // Folding exposes simplifications (a Reshape whose shape became constant), simplifying
      // exposes duplicates and dead nodes, and merging exposes more folds: loop until stable.
      {{"constant_fold", "simplify", "cse", "dce"}, true,
       "canonicalise: fold constants and shape arithmetic, local rules, merge duplicates, drop dead code"},
      // After canonicalisation, so BN parameters computed from constants are constants by now.
      {{"fold_batchnorm", "dce"}, false, "fold inference BatchNormalization into its Conv/Gemm/MatMul"},
      {{"infer_shapes"}, false, "refresh shapes for planning after the rewrites"},
  };
  static const std::vector<PipelineStage> o2 = [] {
    std::vector<PipelineStage> stages(o1.begin(), o1.end() - 1);
    // After BN folding, so every Conv+BN+Relu is a Conv+Relu by now. One greedy driver runs
    // every pattern: composites (GELU) become one op, which anchors then absorb with the rest
    // of their elementwise chain (bias, scale, activations, residual Add).
    stages.push_back({{"fuse_patterns", "dce"}, false,
                      "pattern and epilogue fusion: one kernel per anchor and its elementwise chain"});
    // After the anchors took their epilogues: what is left between anchors is elementwise,
    // injective and row-reduction work, generated as one kernel per region.
    stages.push_back({{"expand_to_primitives", "region_fusion", "dce"}, false,
                      "expand LogSoftmax into primitives and fuse regions into generated kernels"});
    stages.push_back(o1.back());
    return stages;
  }();
  static const std::vector<PipelineStage> o3 = [] {
    // O2's stages up to and including pattern fusion, then the layout stages, then region fusion
    // and the final shape refresh: region fusion then works on the blocked tensors (its ops are
    // ordinary ops on the 5-d physical dims), so regions between convs need no reorders.
    std::vector<PipelineStage> stages(o2.begin(), o2.end() - 2);
    // Exact, and could run at O1; here so that O1/O2 stay as measured. Before layout, which
    // needs the final kernel shapes.
    stages.push_back({{"prune_conv_taps", "dce"}, false,
                      "drop conv taps that read only padding (dilations larger than the feature map)"});
    // After the anchors took their epilogues: it rewrites FusedConvs into blocked ones.
    stages.push_back({{"layout", "dce"}, false,
                      "keep activations in oneDNN's blocked nChw16c layout between convs; reorder at boundaries"});
    stages.push_back(o2[o2.size() - 2]);
    stages.push_back(o2.back());
    return stages;
  }();
  switch (level) {
    case OptLevel::kO0: return o0;
    case OptLevel::kO1: return o1;
    case OptLevel::kO2: return o2;
    case OptLevel::kO3: return o3;
  }
  return o0;
}

}  // namespace opfuse
