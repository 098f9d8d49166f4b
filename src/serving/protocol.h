// The Open Inference Protocol (KServe v2, also Triton's HTTP API) in JSON: the inference request
// and response bodies, model metadata, and the protocol's datatype names. Pure translation, no
// I/O: the HTTP server (http_server.h) calls it, tests call it directly.
//
// Tensor data is a JSON array in row-major order, flat or nested (the spec allows both). JSON has
// no NaN or infinity, so floating-point data may hold the strings "NaN", "Infinity" and
// "-Infinity", and outputs use them for those values.
//
// The binary data extension (Triton's, which its clients use) carries tensors as raw bytes
// instead: the body is a JSON header of `Inference-Header-Content-Length` bytes followed by the
// data of each input whose "parameters" hold "binary_data_size", in order (row-major, little
// endian, BOOL one byte each). Outputs come back the same way when the request's parameters hold
// "binary_data_output": true, or an output's "binary_data": true. Turning text into numbers costs
// about as much as running a small CNN (mobilenet_v2's 150,528 input floats as JSON: 3 MB), so
// this is the encoding for throughput.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "runtime/session.h"

namespace opfuse::serving {

// "FP32", "INT64", "BOOL", ...; std::nullopt for a dtype the protocol has no name for.
std::optional<std::string> protocol_datatype(DType dtype);
std::optional<DType> parse_protocol_datatype(std::string_view name);

struct InferRequest {
  std::string id;  // echoed in the response; may be empty
  TensorMap inputs;
  std::vector<std::string> outputs;  // the outputs asked for; empty: all of them
  bool all_outputs_binary = false;         // "binary_data_output": true
  std::set<std::string> binary_outputs;    // outputs asked for with "binary_data": true
};

// A response body, and the length of its JSON header when binary data follows it (0: all JSON).
struct InferResponse {
  std::string body;
  size_t header_length = 0;
};

// Parses and checks an inference request body against the model's signature: every input named
// once, known, with a datatype and shape matching the model and data of exactly that many
// elements. `header_length`: the Inference-Header-Content-Length (nullopt: the body is all JSON).
// Errors are user errors naming the input and what is wrong (HTTP 400).
Result<InferRequest> parse_infer_request(std::string_view body, std::optional<size_t> header_length,
                                         const Session& session);

// The response for `outputs` (in the order asked for, else the model's).
InferResponse infer_response(const std::string& model, const std::string& version, const InferRequest& request,
                             const TensorMap& outputs, const Session& session);

// GET /v2/models/{model}[/versions/{version}]: name, versions, platform, inputs, outputs (each
// with datatype and shape; -1 stands for a dimension the model leaves free).
nlohmann::json model_metadata_json(const std::string& model, const std::vector<std::string>& versions,
                                   const Session& session);

// {"error": message}: the body of every failed request.
std::string error_json(std::string_view message);

}  // namespace opfuse::serving
