// The readable text form of the IR: a printer and a parser that round-trip
// (print -> parse -> print gives the same text). Golden tests of compiler passes are written in
// this form; the syntax is described in docs/text-ir.md.
//
//   graph @main opset 13 (%x: f32[batch,3]) {
//     %w: f32[2,3] = const [1, 2, 3, 4, 5, 6]
//     %y: f32[batch,2] = Gemm(%x, %w, _) {transB = 1, alpha = 1.0} #fc
//     return %y
//   }
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "ir/graph.h"

namespace opfuse {

struct PrintOptions {
  // Constants (and tensor attributes) with more elements than this print as `elided` unless
  // every element is the same (those print as `splat v`, which loses nothing).
  int64_t max_constant_elements = 16;
  // When false, `#node_name` is never printed (shorter golden output; no longer round-trips
  // node names). When true it is printed unless the name equals the op type, which is the name
  // the parser gives an unnamed node anyway.
  bool node_names = true;
};

std::string print_graph(const Graph& graph, const PrintOptions& options = {});

struct ParseOptions {
  // What `const elided` means when parsing: an error (the default, because the data is gone),
  // zeros, or a deterministic pattern (element i is (i % 17 - 8) / 8 for floats, i % 17 - 8
  // for signed ints, i % 17 for unsigned, i % 2 == 1 for bool). Golden tests of big graphs use
  // kZeros / kPattern.
  enum class Elided { kError, kZeros, kPattern };
  Elided elided_constants = Elided::kError;
  // Cap on the bytes of all constants (and tensor attributes) of the text together, so that
  // hostile text like `f32[100000,100000] splat 0` is an error instead of a huge allocation.
  int64_t max_constant_bytes = int64_t{256} << 20;
};

// Parses one graph. Errors are user errors of the form "line 3:14: expected ')' after inputs,
// found '{'". Types written on values are kept; shape inference is not run.
Result<Graph> parse_graph(std::string_view text, const ParseOptions& options = {});

}  // namespace opfuse
