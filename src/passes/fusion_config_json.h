// FusionConfig as a JSON file (`opfuse ... --fusion-config FILE`), for the API and the CLI:
//
//   {
//     "level": "O2",                          // optional; a --level flag wins over it
//     "disable": ["epilogue_relu"],           // rules switched off
//     "enable_only": ["fold_batchnorm"],      // when given, only these rules run
//     "disable_op_types": ["Softmax"],        // these ops never join a fusion
//     "exclude": ["/fc/*", "/Flatten"],       // node-name globs never fused
//     "region_threshold": 0.3,                // min fraction of memory traffic a region must save
//     "max_region_nodes": 64,
//     "region_table_budget": "16MiB",         // or a number of bytes; 0: the default, 64 MiB
//     "measure_layouts": false                // O3: time nChw16c vs nhwc per conv and choose
//   }
//
// Unknown keys, wrong types, unknown rules and op types are user errors naming the file and key.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "passes/fusion_config.h"

namespace opfuse {

struct FusionConfigFile {
  FusionConfig fusion;
  std::optional<std::string> level;  // "O2" when the file names one
};

// `source` names the config in errors ("config file 'f.json'").
Result<FusionConfigFile> parse_fusion_config_json(std::string_view text, const std::string& source);
Result<FusionConfigFile> load_fusion_config_file(const std::string& path);

// "512MiB", "64MB", "1G", "4096": bytes. Suffixes K/M/G are powers of 1024 with or without "iB",
// KB/MB/GB powers of 1000.
Result<int64_t> parse_byte_size(std::string_view text);

}  // namespace opfuse
