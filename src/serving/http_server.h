// `opfuse serve`: the Open Inference Protocol (KServe v2) over HTTP/REST.
//
//   GET  /v2/health/live  /v2/health/ready  /v2  /metrics
//   GET  /v2/models/{m}[/versions/{v}]          metadata
//   GET  /v2/models/{m}[/versions/{v}]/ready
//   POST /v2/models/{m}[/versions/{v}]/infer    JSON tensors (protocol.h)
//
// Every failure is a JSON body {"error": "..."} with a 4xx status for the client's mistakes
// (400 malformed or mismatching request, 404 unknown model, version or path, 405 wrong method,
// 413 body too large) and 5xx for the server's state (503 queue full, model not ready or shutting
// down; 504 time limit passed; 500 a bug). No request can stop the server.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "core/status.h"
#include "serving/metrics.h"
#include "serving/model_repository.h"

namespace httplib {
class Server;
}

namespace opfuse::serving {

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  int port = 8000;                 // 0: any free port (bind() says which)
  size_t max_body_bytes = 64u << 20;
  int http_threads = 16;  // connections served at once (each waits for its model's queue)
};

class InferenceServer {
 public:
  InferenceServer(ModelRepository& repository, ServerOptions options);
  ~InferenceServer();

  // Binds the socket; returns the port. User error when the address is taken or invalid.
  Result<int> bind();
  // Serves until shutdown(); returns once in-flight requests are answered.
  Status serve();
  // Graceful: stops accepting connections and answering new inference requests (503), lets
  // in-flight requests finish, then makes serve() return. Safe from any thread.
  void shutdown();

 private:
  void add_routes();
  ModelRepository& repository_;
  ServerOptions options_;
  Metrics metrics_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> stopping_{false};
};

}  // namespace opfuse::serving
