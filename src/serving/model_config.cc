#include "serving/model_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "passes/fusion_config_json.h"
#include "passes/tuning_record.h"

namespace opfuse::serving {
namespace {

using nlohmann::json;

Status read_int(const json& value, const std::string& source, const std::string& key, int min, int max, int& out) {
  if (!value.is_number_integer() || value.get<int64_t>() < min || value.get<int64_t>() > max) {
    return Status::user_error(str_cat(source, ": \"", key, "\" must be an integer in [", min, ", ", max,
                                      "], got ", value.dump()));
  }
  out = static_cast<int>(value.get<int64_t>());
  return Status::ok();
}

Status read_string(const json& value, const std::string& source, const std::string& key, std::string& out) {
  if (!value.is_string()) {
    return Status::user_error(str_cat(source, ": \"", key, "\" must be a string, got ", value.dump()));
  }
  out = value.get<std::string>();
  return Status::ok();
}

std::string resolve(const std::string& path, const std::string& model_dir) {
  if (path.empty() || std::filesystem::path(path).is_absolute()) return path;
  return (std::filesystem::path(model_dir) / path).string();
}

}  // namespace

Result<ModelConfig> parse_model_config(std::string_view text, const std::string& source,
                                       const std::string& model_dir) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    return Status::user_error(str_cat(source, ": malformed JSON: ", e.what()));
  }
  if (!root.is_object()) return Status::user_error(str_cat(source, ": must be a JSON object"));
  ModelConfig config;
  for (const auto& [key, value] : root.items()) {
    if (key == "level") {
      std::string level;
      OPFUSE_TRY(read_string(value, source, key, level));
      config.level = level;
    } else if (key == "target") {
      OPFUSE_TRY(read_string(value, source, key, config.target));
    } else if (key == "tuning") {
      OPFUSE_TRY(read_string(value, source, key, config.tuning));
    } else if (key == "fusion_config") {
      OPFUSE_TRY(read_string(value, source, key, config.fusion_config));
    } else if (key == "instances") {
      OPFUSE_TRY(read_int(value, source, key, 1, 64, config.instances));
    } else if (key == "threads") {
      OPFUSE_TRY(read_int(value, source, key, 0, 1024, config.threads));
    } else if (key == "max_queue") {
      OPFUSE_TRY(read_int(value, source, key, 1, 1 << 20, config.max_queue));
    } else if (key == "timeout_ms") {
      OPFUSE_TRY(read_int(value, source, key, 1, 24 * 3600 * 1000, config.timeout_ms));
    } else if (key == "plan_cache") {
      OPFUSE_TRY(read_int(value, source, key, 1, 4096, config.plan_cache));
    } else if (key == "max_batch") {
      OPFUSE_TRY(read_int(value, source, key, 0, 4096, config.max_batch));
    } else if (key == "flush_denormals") {
      if (!value.is_boolean()) {
        return Status::user_error(str_cat(source, ": \"", key, "\" must be true or false, got ", value.dump()));
      }
      config.flush_denormals = value.get<bool>();
    } else {
      return Status::user_error(str_cat(source, ": unknown key \"", key,
                                        "\" (known: level, target, tuning, fusion_config, instances, threads, "
                                        "max_queue, timeout_ms, plan_cache, max_batch, flush_denormals)"));
    }
  }
  if (config.level) OPFUSE_TRY(parse_opt_level(*config.level).status().with_context(str_cat(source, ": \"level\"")));
  config.tuning = resolve(config.tuning, model_dir);
  config.fusion_config = resolve(config.fusion_config, model_dir);
  return config;
}

Result<ModelConfig> load_model_config(const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / "config.json").string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return ModelConfig{};
  OPFUSE_ASSIGN_OR_RETURN(std::string text, read_file(path, "model config"));
  return parse_model_config(text, str_cat("model config '", path, "'"), model_dir);
}

Result<SessionOptions> session_options_for(const ModelConfig& config) {
  SessionOptions options;
  std::optional<std::string> config_level;
  options.target = config.target;
  options.threads = config.threads;
  options.flush_denormals = config.flush_denormals;
  options.max_plans = static_cast<size_t>(config.plan_cache);
  if (!config.fusion_config.empty()) {
    OPFUSE_ASSIGN_OR_RETURN(FusionConfigFile file, load_fusion_config_file(config.fusion_config));
    options.pipeline.fusion = std::move(file.fusion);
    config_level = std::move(file.level);
  }
  OPFUSE_ASSIGN_OR_RETURN(options.level, choose_opt_level(config.level, config_level,
                                                          str_cat("fusion config '", config.fusion_config, "'"),
                                                          kDefaultOptLevel));
  if (!config.tuning.empty()) {
    OPFUSE_ASSIGN_OR_RETURN(TuningRecord record, load_tuning_record(config.tuning));
    options.pipeline.fusion.tuning = std::make_shared<const TuningRecord>(std::move(record));
  }
  return options;
}

}  // namespace opfuse::serving
