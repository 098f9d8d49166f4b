#include "serving/model_repository.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <thread>

#include "frontend/onnx/importer.h"

namespace opfuse::serving {
namespace fs = std::filesystem;

namespace {

// "3" -> 3; anything but a positive decimal integer -> nullopt.
std::optional<int64_t> version_number(const std::string& name) {
  int64_t n = 0;
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), n);
  if (ec != std::errc() || end != name.data() + name.size() || n <= 0) return std::nullopt;
  return n;
}

Status load_version(ModelVersion& v) {
  SessionOptions options;
  OPFUSE_ASSIGN_OR_RETURN(options, session_options_for(v.config));
  // Unless the config says otherwise, instances split the cores between them: each run is an
  // OpenMP team of its own, and more threads than cores only makes them wait for each other.
  if (options.threads == 0 && v.config.instances > 1) {
    options.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / v.config.instances);
  }
  // Batching makes a plan per total batch size it meets (1 to max_batch rows): a smaller cache
  // would evict and recompile them over and over.
  options.max_plans = std::max(options.max_plans, static_cast<size_t>(v.config.max_batch));
  OPFUSE_ASSIGN_OR_RETURN(Graph graph, load_onnx_file(v.path));
  OPFUSE_ASSIGN_OR_RETURN(Session session, Session::create(std::move(graph), options));
  v.session = std::make_shared<const Session>(std::move(session));
  v.queue = std::make_unique<InferenceQueue>(
      v.session, InferenceQueueOptions{v.config.instances, v.config.max_queue, v.config.max_batch});
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<ModelRepository>> ModelRepository::scan(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Status::user_error(str_cat("model repository '", dir, "' is not a directory"));
  }
  auto repo = std::make_unique<ModelRepository>();
  repo->dir_ = dir;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_directory()) continue;
    const std::string name = entry.path().filename().string();
    Model& model = repo->models_[name];
    auto config = load_model_config(entry.path().string());
    for (const auto& sub : fs::directory_iterator(entry.path(), ec)) {
      const auto number = version_number(sub.path().filename().string());
      if (!sub.is_directory() || !number || !fs::exists(sub.path() / "model.onnx")) continue;
      auto v = std::make_unique<ModelVersion>();
      v->model = name;
      v->version = std::to_string(*number);
      v->path = (sub.path() / "model.onnx").string();
      if (config.is_ok()) {
        v->config = *config;
      } else {
        v->error = config.status().message();
        v->state = ModelVersion::State::kFailed;
      }
      model.versions.emplace(*number, std::move(v));
    }
    if (model.versions.empty()) {
      model.error = str_cat("model '", name, "' has no version: expected ", (entry.path() / "1" / "model.onnx").string(),
                            " (versions are positive integers)");
    }
  }
  if (ec) return Status::user_error(str_cat("model repository '", dir, "': ", ec.message()));
  if (repo->models_.empty()) {
    return Status::user_error(str_cat("model repository '", dir, "' holds no model directory (expected ", dir,
                                      "/<model>/<version>/model.onnx)"));
  }
  return repo;
}

void ModelRepository::load_all(const std::function<void(const std::string&)>& log) {
  for (auto& [name, model] : models_) {
    if (!model.error.empty()) log(model.error);
    for (auto& [number, v] : model.versions) {
      if (v->state == ModelVersion::State::kFailed) {
        log(str_cat("model '", name, "' version ", v->version, " not loaded: ", v->error));
        continue;
      }
      Status status;
      try {
        status = load_version(*v);
      } catch (const std::exception& e) {
        status = Status::internal_error(str_cat("loading failed: ", e.what()));
      }
      if (status.is_ok()) {
        v->state = ModelVersion::State::kReady;
        log(str_cat("model '", name, "' version ", v->version, " ready (", opt_level_name(v->session->options().level), ", ",
                    v->config.instances, " instance", v->config.instances > 1 ? "s" : "",
                    v->queue->batching() ? str_cat(", batching up to ", v->config.max_batch) : "", ")"));
      } else {
        v->error = status.message();
        v->state = ModelVersion::State::kFailed;
        log(str_cat("model '", name, "' version ", v->version, " not loaded: ", v->error));
      }
    }
  }
  loading_done_ = true;
}

std::vector<std::string> ModelRepository::model_names() const {
  std::vector<std::string> names;
  for (const auto& [name, model] : models_) names.push_back(name);
  return names;
}

std::vector<std::string> ModelRepository::versions(const std::string& model) const {
  std::vector<std::string> out;
  auto it = models_.find(model);
  if (it == models_.end()) return out;
  for (const auto& [number, v] : it->second.versions) out.push_back(v->version);
  return out;
}

ModelVersion* ModelRepository::find(const std::string& model, const std::string& version) {
  auto it = models_.find(model);
  if (it == models_.end() || it->second.versions.empty()) return nullptr;
  auto& versions = it->second.versions;
  if (version.empty()) return versions.rbegin()->second.get();
  const auto number = version_number(version);
  if (!number) return nullptr;
  auto v = versions.find(*number);
  return v == versions.end() ? nullptr : v->second.get();
}

std::string ModelRepository::model_error(const std::string& model) const {
  auto it = models_.find(model);
  return it == models_.end() ? "" : it->second.error;
}

std::vector<ModelVersion*> ModelRepository::ready_versions() {
  std::vector<ModelVersion*> out;
  for (auto& [name, model] : models_) {
    for (auto& [number, v] : model.versions) {
      if (v->state == ModelVersion::State::kReady) out.push_back(v.get());
    }
  }
  return out;
}

void ModelRepository::drain_all() {
  for (ModelVersion* v : ready_versions()) v->queue->drain();
}

}  // namespace opfuse::serving
