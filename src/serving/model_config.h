// How the server runs one model: `<repository>/<model>/config.json`, optional, every key optional.
//
//   {
//     "level": "O3",            // optimisation level (default: the fusion config's, else O3)
//     "target": "avx2",         // CPU tier; must equal the server's (the ISA cap is process-wide)
//     "tuning": "tuning.json",  // a tuning record from `opfuse tune`, relative to the model's dir
//     "fusion_config": "f.json",// fusion switches (passes/fusion_config_json.h), relative likewise
//     "instances": 1,           // requests of this model run concurrently on this many workers
//     "threads": 0,             // OpenMP threads per run; 0: the cores divided among instances
//     "max_queue": 64,          // requests waiting beyond this are refused with 503
//     "timeout_ms": 30000,      // a request not answered by then gets 504
//     "plan_cache": 8,          // compiled plans kept per version (one per input shape), LRU
//     "max_batch": 0,           // > 1: concurrent requests are batched along a free dim 0
//     "flush_denormals": false  // run with denormals flushed to zero (runtime/flush_denormals.h)
//   }
//
// Unknown keys and wrong types are errors naming the file and the key: the model fails to load,
// and the other models are served regardless.
#pragma once

#include <optional>
#include <string>

#include "core/status.h"
#include "runtime/session.h"

namespace opfuse::serving {

struct ModelConfig {
  std::optional<std::string> level;  // none: the fusion config's level, else O3
  std::string target;         // empty: the server's
  std::string tuning;         // absolute path, empty: none
  std::string fusion_config;  // absolute path, empty: none
  int instances = 1;
  int threads = 0;
  int max_queue = 64;
  int timeout_ms = 30000;
  int plan_cache = 8;
  int max_batch = 0;
  bool flush_denormals = false;
};

// Reads `model_dir`/config.json when present; the defaults otherwise.
Result<ModelConfig> load_model_config(const std::string& model_dir);
Result<ModelConfig> parse_model_config(std::string_view text, const std::string& source,
                                       const std::string& model_dir);

// The session options the config asks for (fusion config and tuning record read from disk).
Result<SessionOptions> session_options_for(const ModelConfig& config);

}  // namespace opfuse::serving
