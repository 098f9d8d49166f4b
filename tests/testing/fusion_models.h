// Small graphs for the fusion tooling tests (reports, pictures, validation, export), in text IR.
#pragma once

#include <string>

#include "core/target.h"

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

// `opfuse report --level O2 --exclude '/head/*'` on kBlockAndHead, worked out by hand: the golden
// text both the report library test and the CLI test compare against.
inline constexpr const char* kReportExcludedHead =
    "fusion report at O2\n"
    "config: excluded nodes: /head/*\n"
    "\n"
    "rules                          matched  applied  refused\n"
    "  epilogue_relu                      2        1        1\n"
    "  fold_batchnorm                     1        1        0\n"
    "  region_fusion                      1        0        1\n"
    "\n"
    "fused kernels (1)\n"
    "  /block/conv/Conv  opfuse::FusedConv  [epilogue_relu, fold_batchnorm]  saves ~512 B\n"
    "      Conv '/block/conv/Conv'\n"
    "      BatchNormalization '/block/bn/BatchNormalization'\n"
    "      Relu '/block/relu/Relu'\n"
    "\n"
    "refused candidates (2)\n"
    "  epilogue_relu: Relu '/head/relu/Relu' into Conv '/head/conv/Conv' as relu: node excluded by glob '/head/*'\n"
    "  region_fusion: Relu '/head/relu/Relu': node excluded by glob '/head/*'\n"
    "\n"
    "excluded from fusion by the config (2)\n"
    "  /head/conv/Conv: node excluded by glob '/head/*'\n"
    "  /head/relu/Relu: node excluded by glob '/head/*'\n"
    "\n"
    "totals                 before       after\n"
    "  nodes                     5           3\n"
    "  kernels                   5           3\n"
    "  memory traffic       1.3 KB       808 B  (-39.9%, estimated)\n";

// A golden report with the target line the report prints second (the host's, so not in the text).
inline std::string with_target_line(const std::string& golden) {
  const size_t eol = golden.find('\n') + 1;
  return golden.substr(0, eol) + "target: " + active_target().describe() + "\n" + golden.substr(eol);
}

}  // namespace opfuse::testing_models
