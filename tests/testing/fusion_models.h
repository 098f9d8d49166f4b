// Small graphs for the fusion tooling tests (reports, pictures, validation, export), in text IR.
#pragma once

#include <string>

namespace opfuse::testing_models {

// A Conv + BatchNormalization + Relu block and a Conv + Relu head, x: f32[1,2,4,4].
// Every activation is 32 floats = 128 bytes; W is 16 bytes, each BN parameter 8.
// At O2: the block becomes one FusedConv (BN folded, Relu absorbed), the head another.
inline const char* kBlockAndHead = R"(graph @main opset 13 (%x: f32[1,2,4,4]) {
  %w: f32[2,2,1,1] = const [1, 0.5, -0.5, 1]
  %scale: f32[2] = const [1, 2]
  %shift: f32[2] = const [0, 1]
  %mean: f32[2] = const [0.5, 0]
  %var: f32[2] = const [1, 4]
  %c: f32[1,2,4,4] = Conv(%x, %w) {kernel_shape = [1, 1]} #"/block/conv/Conv"
  %b: f32[1,2,4,4] = BatchNormalization(%c, %scale, %shift, %mean, %var) #"/block/bn/BatchNormalization"
  %r: f32[1,2,4,4] = Relu(%b) #"/block/relu/Relu"
  %c2: f32[1,2,4,4] = Conv(%r, %w) {kernel_shape = [1, 1]} #"/head/conv/Conv"
  %y: f32[1,2,4,4] = Relu(%c2) #"/head/relu/Relu"
  return %y
}
)";

}  // namespace opfuse::testing_models
