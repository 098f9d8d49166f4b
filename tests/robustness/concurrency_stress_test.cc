// Concurrency stress: one compiled model run from several threads at once, and different models
// compiled (and run) in parallel, every result compared bit for bit with the single-threaded
// one. Sessions use threads = 1 so each run is deterministic and, under ThreadSanitizer
// (scripts/tsan.sh), no OpenMP team is involved: libgomp is not TSan-instrumented, so its
// barriers would be reported as races. OPFUSE_STRESS_ROUNDS scales the work (default 4).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <iostream>
#include <thread>

#include "core/random.h"
#include "frontend/onnx/importer.h"
#include "pipelines/pipeline.h"
#include "runtime/session.h"
#include "testing/zoo.h"

namespace opfuse {
namespace {

namespace fs = std::filesystem;

// Small zoo models of different shapes: a CNN, a transformer and an MLP.
const std::vector<std::string> kModels = {"resnet_tiny", "mobilenet_v2_tiny", "bert_tiny", "mlp"};

int rounds() {
  const char* r = std::getenv("OPFUSE_STRESS_ROUNDS");
  return r ? std::max(1, std::atoi(r)) : 4;
}

std::vector<std::string> available_models() {
  std::vector<std::string> found;
  for (const std::string& name : kModels) {
    if (fs::exists(testing_zoo::zoo_dir() / (name + ".onnx"))) found.push_back(name);
  }
  return found;
}

Result<Session> open(const std::string& name) {
  OPFUSE_ASSIGN_OR_RETURN(Graph graph, load_onnx_file((testing_zoo::zoo_dir() / (name + ".onnx")).string()));
  SessionOptions options;
  options.mode = ExecutionMode::kGraph;
  options.level = OptLevel::kO3;
  options.threads = 1;
  // Results are compared bit for bit across separately compiled sessions: measured layout
  // choices could differ between compiles (and so the summation order), the fixed ones cannot.
  return Session::create(std::move(graph), options);
}

// Seeded inputs for a signature (symbolic dims 1, integer inputs in {0, 1}).
TensorMap inputs_for(const Session& session, uint64_t seed) {
  TensorMap inputs;
  Random rng(seed);
  for (const TensorSignature& sig : session.inputs()) {
    std::vector<int64_t> dims;
    for (const Dim& d : *sig.shape) dims.push_back(d.is_known() ? d.value() : 1);
    Tensor t = Tensor::zeros(sig.dtype, dims).value();
    fill_uniform(t, rng, is_float(sig.dtype) ? -1.0 : 0.0, is_float(sig.dtype) ? 1.0 : 2.0);
    inputs[sig.name] = t;
  }
  return inputs;
}

bool same_bits(const TensorMap& got, const TensorMap& want) {
  if (got.size() != want.size()) return false;
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    if (it == got.end() || it->second.type_string() != w.type_string() ||
        std::memcmp(it->second.raw_data(), w.raw_data(), w.nbytes()) != 0) {
      return false;
    }
  }
  return true;
}

TEST(ConcurrencyStressTest, OneSessionManyThreadsAndParallelCompiles) {
  const std::vector<std::string> models = available_models();
  if (models.empty()) GTEST_SKIP() << "no zoo models in " << testing_zoo::zoo_dir();
  constexpr int kInputs = 3;
  std::atomic<int> compared{0};  // concurrent results checked against the reference

  // Single-threaded references: every model compiled and run alone.
  std::map<std::string, std::vector<TensorMap>> inputs, expected;
  for (const std::string& name : models) {
    Result<Session> s = open(name);
    ASSERT_TRUE(s.is_ok()) << name << ": " << s.status().message();
    for (int i = 0; i < kInputs; ++i) {
      inputs[name].push_back(inputs_for(*s, 100 + i));
      Result<TensorMap> out = s->run(inputs[name].back());
      ASSERT_TRUE(out.is_ok()) << name << ": " << out.status().message();
      expected[name].push_back(*out);
    }
  }

  // Phase 1: every model compiled in its own thread at the same time, then run there.
  for (int round = 0; round < rounds(); ++round) {
    std::vector<std::thread> threads;
    std::vector<std::string> failures(models.size());
    for (size_t m = 0; m < models.size(); ++m) {
      threads.emplace_back([&, m] {
        const std::string& name = models[m];
        Result<Session> s = open(name);
        if (!s.is_ok()) {
          failures[m] = s.status().message();
          return;
        }
        for (int i = 0; i < kInputs; ++i) {
          Result<TensorMap> out = s->run(inputs[name][i]);
          if (!out.is_ok() || !same_bits(*out, expected[name][i])) {
            failures[m] = out.is_ok() ? str_cat("input ", i, " differs") : out.status().message();
          }
          ++compared;
        }
      });
    }
    for (auto& t : threads) t.join();
    for (size_t m = 0; m < models.size(); ++m) {
      EXPECT_EQ(failures[m], "") << "parallel compile of " << models[m] << ", round " << round;
    }
  }

  // Phase 2: one session per model shared by four threads running it at once (arena pool,
  // shared pre-packed weights), interleaving inputs.
  for (const std::string& name : models) {
    Result<Session> s = open(name);
    ASSERT_TRUE(s.is_ok());
    constexpr int kThreads = 4;
    std::vector<int> mismatches(kThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int r = 0; r < 2 * rounds(); ++r) {
          const int i = (t + r) % kInputs;
          Result<TensorMap> out = s->run(inputs[name][i]);
          if (!out.is_ok() || !same_bits(*out, expected[name][i])) ++mismatches[t];
          ++compared;
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << name << ", thread " << t;
  }
  const int per_model = rounds() * kInputs + 4 * 2 * rounds();
  EXPECT_EQ(compared.load(), per_model * static_cast<int>(models.size()));
  std::cout << "compared " << compared.load() << " concurrent results of " << models.size()
            << " models with the single-threaded ones\n";
}

}  // namespace
}  // namespace opfuse
