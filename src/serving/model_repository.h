// A model repository as KServe and Triton lay it out:
//
//   DIR/<model>/config.json           optional (model_config.h)
//   DIR/<model>/<version>/model.onnx  versions are positive integers; the highest is the default
//
// Scanning finds the models and versions; loading compiles each version once (plans for other
// input shapes are compiled on demand, up to the config's plan_cache). A version that fails to
// load keeps its error and is reported not ready; the others are served regardless. Loading runs
// while the server already answers (live, but not yet ready), so the version states are read
// concurrently with it.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "serving/inference_queue.h"
#include "serving/model_config.h"

namespace opfuse::serving {

struct ModelVersion {
  enum class State { kLoading, kReady, kFailed };
  std::string model;
  std::string version;
  std::string path;  // model.onnx
  ModelConfig config;
  std::atomic<State> state{State::kLoading};
  // Written before `state` turns kReady or kFailed, read only after it has.
  std::string error;
  std::shared_ptr<const Session> session;
  std::unique_ptr<InferenceQueue> queue;
  std::atomic<int> in_flight{0};  // inference requests parsed and not yet answered
};

class ModelRepository {
 public:
  // Refuses a directory that does not exist or holds no model directory at all.
  static Result<std::unique_ptr<ModelRepository>> scan(const std::string& dir);

  // Loads every version in turn; `log` gets one line per version (loaded, or why not).
  void load_all(const std::function<void(const std::string&)>& log);
  bool loading_done() const { return loading_done_; }

  std::vector<std::string> model_names() const;
  // Versions of `model`, ascending; empty when there is no such model.
  std::vector<std::string> versions(const std::string& model) const;
  // `version` empty: the highest. nullptr when the model or version does not exist.
  ModelVersion* find(const std::string& model, const std::string& version);
  // A model directory with no usable version: why (empty when the model has versions).
  std::string model_error(const std::string& model) const;

  // Every ready version, for metrics and shutdown.
  std::vector<ModelVersion*> ready_versions();
  // Stops every queue taking requests and waits for what is queued to finish.
  void drain_all();

 private:
  struct Model {
    std::string error;                                       // set when no version is usable
    std::map<int64_t, std::unique_ptr<ModelVersion>> versions;  // by number
  };
  std::string dir_;
  std::map<std::string, Model> models_;
  std::atomic<bool> loading_done_{false};
};

}  // namespace opfuse::serving
