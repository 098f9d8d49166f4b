#include "serving/http_server.h"

#include <httplib.h>

#include <charconv>
#include <chrono>

#include "serving/protocol.h"

namespace opfuse::serving {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kJson = "application/json";

void reply(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, kJson);
}

void reply_error(httplib::Response& res, int status, std::string_view message) {
  reply(res, status, error_json(message));
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "(none)" : out;
}

// The version a request names, or why there is none: 404 for what does not exist, 503 for a
// version that exists but cannot serve (still loading, or failed to load).
struct Lookup {
  ModelVersion* version = nullptr;
  int status = 200;
  std::string error;
};

}  // namespace

InferenceServer::InferenceServer(ModelRepository& repository, ServerOptions options)
    : repository_(repository), options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
  const int threads = std::max(1, options_.http_threads);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_keep_alive_timeout(5);
  // A response goes out as two writes (headers, body); with Nagle's algorithm the second waits for
  // the client's delayed ACK of the first: 40 ms per request over loopback, measured.
  http_->set_tcp_nodelay(true);
  http_->set_read_timeout(30);
  add_routes();
}

InferenceServer::~InferenceServer() = default;

Result<int> InferenceServer::bind() {
  if (options_.port < 0 || options_.port > 65535) {
    return Status::user_error(str_cat("--port ", options_.port, " is not a port number (0-65535)"));
  }
  if (options_.port == 0) {
    const int port = http_->bind_to_any_port(options_.host);
    if (port < 0) return Status::user_error(str_cat("cannot bind to ", options_.host, " (any port)"));
    return port;
  }
  if (!http_->bind_to_port(options_.host, options_.port)) {
    return Status::user_error(str_cat("cannot bind to ", options_.host, ":", options_.port,
                                      " (address in use, or not an address of this machine)"));
  }
  return options_.port;
}

Status InferenceServer::serve() {
  if (!http_->listen_after_bind() && !stopping_) {
    return Status::user_error("the server stopped listening unexpectedly");
  }
  // listen returns after its workers finished their connections; any request still queued at a
  // model (none, normally) runs before the queues are torn down.
  repository_.drain_all();
  return Status::ok();
}

void InferenceServer::shutdown() {
  stopping_ = true;
  http_->stop();
}

void InferenceServer::add_routes() {
  auto lookup = [this](const std::string& model, const std::string& version) {
    Lookup out;
    const auto versions = repository_.versions(model);
    if (versions.empty()) {
      const std::string why = repository_.model_error(model);
      out.status = why.empty() ? 404 : 503;
      out.error = why.empty() ? str_cat("unknown model '", model, "'; the repository serves ",
                                        join(repository_.model_names()))
                              : why;
      return out;
    }
    out.version = repository_.find(model, version);
    if (out.version == nullptr) {
      out.status = 404;
      out.error = str_cat("model '", model, "' has no version '", version, "'; its versions are ", join(versions));
      return out;
    }
    switch (out.version->state.load()) {
      case ModelVersion::State::kReady: break;
      case ModelVersion::State::kLoading:
        out.status = 503;
        out.error = str_cat("model '", model, "' version ", out.version->version, " is still loading");
        break;
      case ModelVersion::State::kFailed:
        out.status = 503;
        out.error = str_cat("model '", model, "' version ", out.version->version,
                            " failed to load: ", out.version->error);
        break;
    }
    return out;
  };

  http_->Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) {
    reply(res, 200, R"({"live":true})");
  });
  http_->Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& res) {
    const bool ready = repository_.loading_done() && !stopping_;
    reply(res, ready ? 200 : 503, ready ? R"({"ready":true})" : R"({"ready":false})");
  });
  http_->Get("/v2", [](const httplib::Request&, httplib::Response& res) {
    reply(res, 200, R"({"name":"opfuse","version":"0.1.0","extensions":[]})");
  });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::vector<Metrics::ModelGauges> gauges;
    for (ModelVersion* v : repository_.ready_versions()) {
      gauges.push_back({v->model, v->version, v->queue->depth(), v->in_flight.load(), v->session->compile_count(),
                        v->session->cached_plan_count()});
    }
    res.set_content(metrics_.prometheus_text(gauges), "text/plain; version=0.0.4");
  });

  const std::string model_path = "/v2/models/([^/]+)(?:/versions/([^/]+))?";
  http_->Get(model_path, [this, lookup](const httplib::Request& req, httplib::Response& res) {
    Lookup found = lookup(req.matches[1], req.matches[2]);
    if (found.version == nullptr || found.status != 200) {
      metrics_.record_refusal(found.status);
      return reply_error(res, found.status, found.error);
    }
    auto json = model_metadata_json(found.version->model, repository_.versions(found.version->model),
                                    *found.version->session);
    reply(res, 200, json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  });
  http_->Get(model_path + "/ready", [lookup](const httplib::Request& req, httplib::Response& res) {
    Lookup found = lookup(req.matches[1], req.matches[2]);
    if (found.version == nullptr) return reply_error(res, found.status, found.error);
    nlohmann::json body = {{"name", found.version->model}, {"version", found.version->version},
                           {"ready", found.status == 200}};
    if (found.status != 200) body["error"] = found.error;
    reply(res, found.status, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  });
  http_->Post(model_path + "/infer", [this, lookup](const httplib::Request& req, httplib::Response& res) {
    const auto start = Clock::now();
    Lookup found = lookup(req.matches[1], req.matches[2]);
    if (found.version == nullptr) {
      metrics_.record_refusal(found.status);
      return reply_error(res, found.status, found.error);
    }
    ModelVersion& v = *found.version;
    auto finish = [&](int status, std::string body, const char* content_type = kJson) {
      res.status = status;
      res.set_content(std::move(body), content_type);
      metrics_.record_request(v.model, v.version, status,
                              std::chrono::duration<double>(Clock::now() - start).count());
    };
    if (found.status != 200) return finish(found.status, error_json(found.error));
    if (stopping_) return finish(503, error_json("the server is shutting down"));
    std::optional<size_t> header_length;
    if (req.has_header("Inference-Header-Content-Length")) {
      const std::string text = req.get_header_value("Inference-Header-Content-Length");
      size_t n = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
      if (ec != std::errc() || end != text.data() + text.size()) {
        return finish(400, error_json(str_cat("Inference-Header-Content-Length '", text, "' is not a byte count")));
      }
      header_length = n;
    }
    auto request = parse_infer_request(req.body, header_length, *v.session);
    if (!request.is_ok()) return finish(400, error_json(request.status().message()));
    ++v.in_flight;
    QueueReply answer = v.queue->submit(request->inputs, std::chrono::milliseconds(v.config.timeout_ms));
    --v.in_flight;
    switch (answer.kind) {
      case QueueReply::Kind::kQueueFull:
        return finish(503, error_json(str_cat("model '", v.model, "' has ", v.config.max_queue,
                                              " requests waiting (max_queue); try again later")));
      case QueueReply::Kind::kTimedOut:
        return finish(504, error_json(str_cat("no answer within the model's time limit of ",
                                              v.config.timeout_ms, " ms (timeout_ms)")));
      case QueueReply::Kind::kStopped: return finish(503, error_json("the server is shutting down"));
      case QueueReply::Kind::kDone: break;
    }
    if (!answer.outputs.is_ok()) {
      const Status& s = answer.outputs.status();
      return finish(s.kind() == ErrorKind::kUser ? 400 : 500, error_json(s.message()));
    }
    InferResponse response = infer_response(v.model, v.version, *request, *answer.outputs, *v.session);
    if (response.header_length == 0) return finish(200, std::move(response.body));
    res.set_header("Inference-Header-Content-Length", std::to_string(response.header_length));
    finish(200, std::move(response.body), "application/octet-stream");
  });
  // The right path with the wrong method: say which method it takes.
  auto wrong_method = [this](const char* allowed) {
    return [this, allowed](const httplib::Request& req, httplib::Response& res) {
      metrics_.record_refusal(405);
      res.set_header("Allow", allowed);
      reply_error(res, 405, str_cat(req.method, " ", req.path, ": this endpoint takes ", allowed));
    };
  };
  http_->Get(model_path + "/infer", wrong_method("POST"));
  http_->Put(model_path + "/infer", wrong_method("POST"));
  http_->Delete(model_path + "/infer", wrong_method("POST"));
  for (const std::string& path : {std::string("/v2/health/live"), std::string("/v2/health/ready"), std::string("/v2"),
                                 std::string("/metrics"), model_path, model_path + "/ready"}) {
    http_->Post(path, wrong_method("GET"));
    http_->Put(path, wrong_method("GET"));
    http_->Delete(path, wrong_method("GET"));
  }

  // Whatever else fails (no such path, body over the limit ...) still answers in JSON.
  http_->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a route's own error
    metrics_.record_refusal(res.status);
    if (res.status == 404) {
      reply_error(res, 404, str_cat("no endpoint ", req.method, " ", req.path,
                                    " (the server speaks the Open Inference Protocol v2 under /v2)"));
    } else if (res.status == 413) {
      reply_error(res, 413, str_cat("the request body is over the limit of ", options_.max_body_bytes,
                                    " bytes (--max-body-bytes)"));
    } else {
      reply_error(res, res.status, str_cat("HTTP ", res.status));
    }
  });
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    reply_error(res, 500, str_cat("internal error: ", what));
  });
}

}  // namespace opfuse::serving
