// Fuzz target: the text-IR parser (lexer, parser, constants) on arbitrary text. A graph that
// parses is printed and parsed again: the printer must produce text the parser accepts.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "fuzz/fuzz_common.h"
#include "ir/text_format.h"
#include "ir/verifier.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  opfuse::fuzz::init_limits();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  opfuse::ParseOptions options;
  options.max_constant_bytes = int64_t{8} << 20;
  options.elided_constants = opfuse::ParseOptions::Elided::kPattern;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  opfuse::Result<opfuse::Graph> graph = opfuse::parse_graph(text, options);
  if (!opfuse::fuzz::check(graph.status(), "parse_graph")) return 0;
  opfuse::fuzz::check(opfuse::verify_graph(*graph), "verify_graph");
  opfuse::PrintOptions print;
  print.max_constant_elements = int64_t{1} << 20;  // print every constant: the text must round-trip
  const std::string printed = opfuse::print_graph(*graph, print);
  opfuse::Result<opfuse::Graph> again = opfuse::parse_graph(printed, options);
  if (!again.is_ok()) {
    std::fprintf(stderr, "printed graph does not parse: %s\n%s\n", again.status().message().c_str(),
                 printed.c_str());
    std::abort();
  }
  return 0;
}
