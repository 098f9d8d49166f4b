// Fuzz target: the ONNX loader on arbitrary bytes (protobuf parse, graph building, tensor
// conversion, opset canonicalisation, shape inference). The model has no directory, so external
// data is refused; the loader must answer every input with a graph or a user error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "frontend/onnx/importer.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  opfuse::fuzz::init_limits();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  opfuse::OnnxLoadOptions options;
  options.max_weight_bytes = opfuse::fuzz::kMaxWeightBytes;
  opfuse::Result<opfuse::Graph> graph = opfuse::load_onnx_bytes(
      std::string_view(reinterpret_cast<const char*>(data), size), /*base_dir=*/"", options,
      "fuzz");
  opfuse::fuzz::check(graph.status(), "load_onnx_bytes");
  return 0;
}
