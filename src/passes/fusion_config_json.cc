#include "passes/fusion_config_json.h"

#include <cctype>
#include <nlohmann/json.hpp>

#include "core/file_io.h"


namespace opfuse {
namespace {

using nlohmann::json;

constexpr const char* kKeys[] = {"level", "disable", "enable_only", "disable_op_types", "exclude",
                                 "region_threshold", "max_region_nodes", "region_table_budget",
                                 "measure_layouts"};

Result<std::vector<std::string>> string_list(const json& value, const std::string& where) {
  if (!value.is_array()) return Status::user_error(str_cat(where, " must be a list of strings"));
  std::vector<std::string> out;
  for (const json& item : value) {
    if (!item.is_string()) return Status::user_error(str_cat(where, " must be a list of strings"));
    out.push_back(item.get<std::string>());
  }
  return out;
}

}  // namespace

Result<int64_t> parse_byte_size(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  const std::string digits(text.substr(0, i));
  std::string unit(text.substr(i));
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (digits.empty() || digits.size() > 15) {
    return Status::user_error(str_cat("'", text, "' is not a size (e.g. 4096, 64MB, 512MiB, 1G)"));
  }
  int64_t scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "K" || unit == "KIB") scale = int64_t{1} << 10;
  else if (unit == "M" || unit == "MIB") scale = int64_t{1} << 20;
  else if (unit == "G" || unit == "GIB") scale = int64_t{1} << 30;
  else if (unit == "KB") scale = 1000;
  else if (unit == "MB") scale = 1000 * 1000;
  else if (unit == "GB") scale = 1000 * 1000 * 1000;
  if (scale == 0) {
    return Status::user_error(str_cat("'", text, "': unknown size unit '", text.substr(i),
                                      "' (valid: B, K/KiB, M/MiB, G/GiB, KB, MB, GB)"));
  }
  const int64_t n = std::stoll(digits);
  if (n > (int64_t{1} << 50) / scale) return Status::user_error(str_cat("'", text, "' is too large"));
  return n * scale;
}

Result<FusionConfigFile> parse_fusion_config_json(std::string_view text, const std::string& source) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::user_error(str_cat(source, " is not valid JSON"));
  if (!doc.is_object()) return Status::user_error(str_cat(source, " must hold a JSON object"));
  FusionConfigFile out;
  FusionConfig& f = out.fusion;
  for (const auto& [key, value] : doc.items()) {
    const std::string where = str_cat(source, ": \"", key, "\"");
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (key == "memory_budget") {
      return Status::user_error(str_cat(where, " is now \"region_table_budget\": it bounds the index tables of "
                                        "generated region kernels, not the plan's memory"));
    }
    if (!known) {
      std::string valid;
      for (const char* k : kKeys) valid += str_cat(valid.empty() ? "" : ", ", k);
      return Status::user_error(str_cat(source, ": unknown key \"", key, "\" (valid: ", valid, ")"));
    }
    if (key == "level") {
      if (!value.is_string()) return Status::user_error(str_cat(where, " must be a string (O0..O3)"));
      out.level = value.get<std::string>();
    } else if (key == "disable" || key == "enable_only" || key == "disable_op_types") {
      OPFUSE_ASSIGN_OR_RETURN(auto names, string_list(value, where));
      auto& set = key == "disable" ? f.disabled_rules
                  : key == "enable_only" ? f.enabled_rules : f.disabled_op_types;
      set.insert(names.begin(), names.end());
    } else if (key == "exclude") {
      OPFUSE_ASSIGN_OR_RETURN(f.excluded_node_globs, string_list(value, where));
    } else if (key == "region_threshold") {
      if (!value.is_number()) return Status::user_error(str_cat(where, " must be a number in [0, 1]"));
      f.region_min_traffic_saving = value.get<double>();
    } else if (key == "max_region_nodes") {
      if (!value.is_number_integer()) return Status::user_error(str_cat(where, " must be an integer"));
      f.max_region_nodes = value.get<int>();
    } else if (key == "measure_layouts") {
      if (!value.is_boolean()) return Status::user_error(str_cat(where, " must be true or false"));
      f.measure_layouts = value.get<bool>();
    } else if (key == "region_table_budget") {
      if (value.is_number_integer()) {
        f.region_table_budget_bytes = value.get<int64_t>();
      } else if (value.is_string()) {
        auto bytes = parse_byte_size(value.get<std::string>());
        if (!bytes.is_ok()) return Status::user_error(str_cat(where, ": ", bytes.status().message()));
        f.region_table_budget_bytes = *bytes;
      } else {
        return Status::user_error(str_cat(where, " must be a number of bytes or a size like \"512MiB\""));
      }
    }
  }
  // Validated where it is used (run_pipeline, or Session::create in eager mode), after the
  // command line has added its switches; errors name this source.
  f.source = source;
  return out;
}

Result<FusionConfigFile> load_fusion_config_file(const std::string& path) {
  OPFUSE_ASSIGN_OR_RETURN(std::string text, read_file(path, "fusion config"));
  return parse_fusion_config_json(text, str_cat("fusion config '", path, "'"));
}

}  // namespace opfuse
