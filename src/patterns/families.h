// The fusion families: one file each under src/patterns/, gathered by pattern_list.cc.
#pragma once

#include <vector>

#include "patterns/pattern.h"

namespace opfuse::patterns {

std::vector<Pattern> gelu_patterns();      // gelu.cc: decomposed GELU (erf, tanh) -> Gelu
std::vector<Pattern> epilogue_patterns();  // epilogue.cc: anchor + elementwise post-ops
std::vector<Pattern> anchor_affine_patterns();  // anchor_affine.cc: bias, per-channel scale/shift
std::vector<Pattern> focus_patterns();      // focus.cc: YOLO Focus (space-to-depth) into the Conv
std::vector<Pattern> attention_patterns();  // attention.cc: MatMul-scale-mask-Softmax-MatMul -> FusedAttention
std::vector<Pattern> input_scale_patterns();  // input_scale.cc: per-channel Mul (SE) into the next conv
std::vector<Pattern> layer_norm_patterns();  // layer_norm.cc: decomposed LayerNorm -> LayerNormalization
std::vector<Pattern> skip_layer_norm_patterns();  // skip_layer_norm.cc: Add + LayerNormalization
std::vector<Pattern> lstm_cell_patterns();  // lstm_cell.cc: an unrolled LSTM step -> LSTM

}  // namespace opfuse::patterns
