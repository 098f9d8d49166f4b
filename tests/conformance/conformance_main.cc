// opfuse_conformance: runs the ONNX backend node tests (model.onnx + test_data_set_*/
// {input,output}_N.pb) through the importer and eager mode, and compares the outputs.
//
//   opfuse_conformance [DATA_DIR] [--filter=PATTERN] [--verbose] [--list-skips] [--no-fork]
//                      [--timeout=SECONDS]
//
// DATA_DIR defaults to $OPFUSE_ONNX_TESTDATA, else /usr/share/libonnx-testdata/data/node.
// A test whose model uses something opfuse does not support (op, opset, attribute, dtype) is
// skipped with the reason; any other error or mismatch is a failure, and the exit code is 1.
// Each test runs in a forked child so that a crashing or hanging kernel fails that test only.
#include <fnmatch.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "compare.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/tensor_proto.h"
#include "ops/registry.h"
#include "policy.h"
#include "ops/eager.h"

namespace opfuse::conformance {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDefaultDataDir = "/usr/share/libonnx-testdata/data/node";

struct Options {
  std::string data_dir;
  std::string filter;
  bool verbose = false;
  bool list_skips = false;
  bool fork = true;
  int timeout_seconds = 60;
};

enum class Outcome : char { kPass = 'P', kFail = 'F', kSkip = 'S' };

struct TestResult {
  Outcome outcome = Outcome::kPass;
  std::string detail;  // failure message or skip reason
};

TestResult fail(std::string message) { return {Outcome::kFail, std::move(message)}; }
TestResult skip(const std::string& message) { return {Outcome::kSkip, skip_reason(message)}; }
TestResult from_error(const std::string& stage, const Status& s) {
  if (s.kind() == ErrorKind::kUser && is_unsupported(s.message())) return skip(s.message());
  return fail(str_cat(stage, ": ", s.message()));
}

// input_0.pb, input_1.pb, ... in numeric order, stopping at the first gap.
std::vector<fs::path> numbered_files(const fs::path& dir, const std::string& stem) {
  std::vector<fs::path> files;
  for (int i = 0;; ++i) {
    fs::path p = dir / str_cat(stem, "_", i, ".pb");
    if (!fs::exists(p)) break;
    files.push_back(p);
  }
  return files;
}

TestResult run_data_set(const Graph& graph, const fs::path& set_dir, const Tolerance& tol) {
  const std::string set = set_dir.filename().string();
  const auto input_files = numbered_files(set_dir, "input");
  const auto output_files = numbered_files(set_dir, "output");
  if (input_files.size() != graph.inputs().size()) {
    return fail(str_cat(set, ": has ", input_files.size(), " inputs but the graph takes ",
                        graph.inputs().size()));
  }
  if (output_files.size() != graph.outputs().size()) {
    return fail(str_cat(set, ": has ", output_files.size(), " outputs but the graph produces ",
                        graph.outputs().size()));
  }
  TensorMap inputs;
  for (size_t i = 0; i < input_files.size(); ++i) {
    Result<Tensor> t = onnx_import::read_tensor_file(input_files[i].string());
    if (!t.is_ok()) return from_error(str_cat(set, ": reading input ", i), t.status());
    const Value* in = graph.inputs()[i];
    if (t->dtype() != in->dtype) {
      return fail(str_cat(set, ": input ", i, " is ", t->type_string(), " but the graph input '",
                          in->name(), "' is ", in->type_string()));
    }
    inputs[in->name()] = std::move(t).value();
  }
  Result<TensorMap> outputs = run_eager(graph, inputs);
  if (!outputs.is_ok()) return from_error(str_cat(set, ": run"), outputs.status());
  for (size_t i = 0; i < output_files.size(); ++i) {
    Result<Tensor> expected = onnx_import::read_tensor_file(output_files[i].string());
    if (!expected.is_ok())
      return from_error(str_cat(set, ": reading output ", i), expected.status());
    const std::string& name = graph.outputs()[i]->name();
    auto it = outputs->find(name);
    if (it == outputs->end()) return fail(str_cat(set, ": output '", name, "' was not produced"));
    Comparison c = compare_tensors(it->second, *expected, tol);
    if (!c.ok) return fail(str_cat(set, ": output ", i, " '", name, "': ", c.message));
  }
  return {};
}

TestResult run_test(const fs::path& dir) {
  Result<Graph> graph = load_onnx_file((dir / "model.onnx").string());
  if (!graph.is_ok()) return from_error("load", graph.status());
  std::vector<fs::path> sets;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_directory() && entry.path().filename().string().rfind("test_data_set_", 0) == 0) {
      sets.push_back(entry.path());
    }
  }
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return fail("no test_data_set_* directory");
  const Tolerance tol = tolerance_for(dir.filename().string());
  for (const fs::path& set : sets) {
    TestResult r = run_data_set(*graph, set, tol);
    if (r.outcome != Outcome::kPass) return r;
  }
  return {};
}

// Runs run_test in a child process; a crash or timeout becomes a failure of this test only.
TestResult run_isolated(const fs::path& dir, int timeout_seconds) {
  int fds[2];
  if (pipe(fds) != 0) return fail("pipe() failed");
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return fail("fork() failed");
  if (pid == 0) {
    close(fds[0]);
    alarm(static_cast<unsigned>(timeout_seconds));
    TestResult r = run_test(dir);
    std::string msg = std::string(1, static_cast<char>(r.outcome)) + r.detail;
    size_t off = 0;
    while (off < msg.size()) {
      const ssize_t n = write(fds[1], msg.data() + off, msg.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) msg.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    if (WTERMSIG(status) == SIGALRM)
      return fail(str_cat("timed out after ", timeout_seconds, " s"));
    return fail(
        str_cat("crashed with signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")"));
  }
  if (msg.empty()) return fail(str_cat("child exited with status ", WEXITSTATUS(status)));
  return {static_cast<Outcome>(msg[0]), msg.substr(1)};
}

bool matches(const std::string& name, const std::string& filter) {
  if (filter.empty()) return true;
  if (filter.find_first_of("*?[") != std::string::npos) {
    return fnmatch(filter.c_str(), name.c_str(), 0) == 0;
  }
  return name.find(filter) != std::string::npos;
}

int usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [DATA_DIR] [--filter=PATTERN] [--verbose] [--list-skips] [--no-fork] "
          "[--timeout=SECONDS]\n"
          "  DATA_DIR defaults to $OPFUSE_ONNX_TESTDATA, else %s\n"
          "  PATTERN is a substring, or a glob if it contains * ? [\n",
          argv0, kDefaultDataDir);
  return 2;
}

int run(int argc, char** argv) {
  Options opt;
  const char* env = std::getenv("OPFUSE_ONNX_TESTDATA");
  opt.data_dir = env && *env ? env : kDefaultDataDir;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--filter=", 0) == 0) {
      opt.filter = arg.substr(9);
    } else if (arg == "--filter" && i + 1 < argc) {
      opt.filter = argv[++i];
    } else if (arg == "--verbose" || arg == "-v") {
      opt.verbose = true;
    } else if (arg == "--list-skips") {
      opt.list_skips = true;
    } else if (arg == "--no-fork") {
      opt.fork = false;
    } else if (arg.rfind("--timeout=", 0) == 0) {
      opt.timeout_seconds = std::max(1, std::atoi(arg.c_str() + 10));
    } else if (arg == "--help" || arg == "-h" || arg.rfind("-", 0) == 0) {
      return usage(argv[0]);
    } else {
      opt.data_dir = arg;
    }
  }
  std::error_code ec;
  if (!fs::is_directory(opt.data_dir, ec)) {
    fprintf(stderr, "opfuse_conformance: test data directory '%s' does not exist\n",
            opt.data_dir.c_str());
    return 2;
  }
  std::vector<fs::path> tests;
  for (const auto& entry : fs::directory_iterator(opt.data_dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind("test_", 0) == 0 && matches(name, opt.filter)) {
      tests.push_back(entry.path());
    }
  }
  std::sort(tests.begin(), tests.end());
  OpRegistry::global();  // build the registry once, before forking

  const auto start = std::chrono::steady_clock::now();
  int passed = 0, failed = 0;
  std::map<std::string, std::vector<std::string>> skips;  // reason -> tests
  int skipped = 0;
  for (const fs::path& dir : tests) {
    const std::string name = dir.filename().string();
    TestResult r = opt.fork ? run_isolated(dir, opt.timeout_seconds) : run_test(dir);
    switch (r.outcome) {
      case Outcome::kPass:
        ++passed;
        if (opt.verbose) printf("PASS %s\n", name.c_str());
        break;
      case Outcome::kFail:
        ++failed;
        printf("FAIL %s: %s\n", name.c_str(), r.detail.c_str());
        break;
      case Outcome::kSkip:
        ++skipped;
        skips[r.detail].push_back(name);
        if (opt.verbose || opt.list_skips) printf("SKIP %s: %s\n", name.c_str(), r.detail.c_str());
        break;
    }
    fflush(stdout);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  printf("%d passed, %d failed, %d skipped (%zu tests in %.1f s)\n", passed, failed, skipped,
         tests.size(), seconds);
  if (!skips.empty()) {
    std::vector<std::pair<size_t, std::string>> by_count;
    for (const auto& [reason, names] : skips) by_count.emplace_back(names.size(), reason);
    std::sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    printf("skip reasons:\n");
    for (const auto& [count, reason] : by_count) printf("  %4zu  %s\n", count, reason.c_str());
  }
  return failed > 0 ? 1 : 0;
}

}  // namespace
}  // namespace opfuse::conformance

int main(int argc, char** argv) { return opfuse::conformance::run(argc, argv); }
