// `opfuse serve --model-repository DIR`: the KServe v2 model server (src/serving/). It answers
// /v2/health/live at once, loads the models in the background (ready when done), and on SIGTERM
// or SIGINT stops accepting, finishes what is in flight and exits 0.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include <cerrno>

#include "commands.h"
#include "passes/fusion_config_json.h"
#include "serving/http_server.h"
#include "serving/model_repository.h"

namespace opfuse::cli {
namespace {

// SIGTERM/SIGINT only write a byte to this pipe (all a signal handler may safely do); a thread
// reading it shuts the server down.
int g_signal_pipe[2] = {-1, -1};

void on_signal(int) {
  const char byte = 1;
  [[maybe_unused]] auto n = write(g_signal_pipe[1], &byte, 1);
}

void log_line(const std::string& line) {
  std::fprintf(stderr, "opfuse serve: %s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace

Action add_serve_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "serve a model repository over the KServe v2 (Open Inference) protocol");
  struct Flags {
    std::string repository;
    serving::ServerOptions server;
    std::string max_body = "64MiB";
  };
  auto flags = std::make_shared<Flags>();
  cmd->add_option("--model-repository", flags->repository, "DIR holding <model>/<version>/model.onnx")->required();
  cmd->add_option("--host", flags->server.host, "address to listen on (default: loopback only)")
      ->default_val("127.0.0.1");
  cmd->add_option("--port", flags->server.port, "port to listen on; 0 picks a free one")->default_val(8000);
  cmd->add_option("--http-threads", flags->server.http_threads, "connections served at once")->default_val(16);
  cmd->add_option("--max-body-bytes", flags->max_body, "largest request body (e.g. 64MiB); larger ones get 413")
      ->default_val("64MiB");
  return [flags]() -> Status {
    auto bytes = parse_byte_size(flags->max_body);
    if (!bytes.is_ok() || *bytes <= 0) {
      return Status::user_error(str_cat("--max-body-bytes '", flags->max_body, "' is not a size"));
    }
    flags->server.max_body_bytes = static_cast<size_t>(*bytes);
    OPFUSE_ASSIGN_OR_RETURN(auto repository, serving::ModelRepository::scan(flags->repository));
    serving::InferenceServer server(*repository, flags->server);
    OPFUSE_ASSIGN_OR_RETURN(int port, server.bind());

    if (pipe(g_signal_pipe) != 0) return Status::internal_error("pipe() failed");
    struct sigaction action = {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);
    std::thread watcher([&server] {
      char byte = 0;
      while (read(g_signal_pipe[0], &byte, 1) < 0 && errno == EINTR) {
      }
      if (byte == 1) log_line("shutting down: finishing requests in flight");
      server.shutdown();
    });

    std::printf("opfuse serve: listening on http://%s:%d\n", flags->server.host.c_str(), port);
    std::fflush(stdout);
    std::thread loader([&repository] { repository->load_all(log_line); });
    Status status = server.serve();
    // serve() returned: by a signal, or because listening failed. Either way the watcher and
    // the loader must end before the server and the repository go away.
    const char stop = 2;
    [[maybe_unused]] auto n = write(g_signal_pipe[1], &stop, 1);
    watcher.join();
    loader.join();
    repository->drain_all();
    if (status.is_ok()) log_line("stopped");
    return status;
  };
}

}  // namespace opfuse::cli
