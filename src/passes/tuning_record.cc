#include "passes/tuning_record.h"

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/digest.h"
#include "core/file_io.h"
#include "ir/text_format.h"

namespace opfuse {
namespace {

using nlohmann::json;

constexpr int kFormatVersion = 1;

}  // namespace

std::string model_digest(const Graph& graph) {
  Fnv1a fnv;
  const std::string text = print_graph(graph);
  fnv.add(text.data(), text.size());
  for (const Value* v : graph.values()) {
    if (const Tensor* t = v->constant(); t != nullptr) fnv.add(t->raw_data(), t->nbytes());
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(fnv.h));
  return hex;
}

std::string tuning_record_to_json(const TuningRecord& record) {
  json j;
  j["opfuse_tuning"] = kFormatVersion;
  j["model_digest"] = record.model_digest;
  j["target"] = record.target;
  j["use_layouts"] = record.use_layouts;
  j["layout_ms"] = record.layout_ms;
  j["region_threshold"] = record.region_threshold ? json(*record.region_threshold) : json(nullptr);
  j["kernels"] = record.kernels;
  j["epilogues"] = record.epilogues;
  j["measurements"] = record.measurements;
  return j.dump(2) + "\n";
}

Result<TuningRecord> parse_tuning_record(std::string_view text, const std::string& source) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Status::user_error(str_cat(source, " is not a JSON object"));
  if (!doc.contains("opfuse_tuning") || doc["opfuse_tuning"] != kFormatVersion) {
    return Status::user_error(str_cat(source, " is not an opfuse tuning record (format ", kFormatVersion,
                                      "; make one with 'opfuse tune MODEL -o FILE')"));
  }
  TuningRecord r;
  r.source = source;
  try {
    r.model_digest = doc.at("model_digest").get<std::string>();
    r.target = doc.at("target").get<std::string>();
    r.use_layouts = doc.value("use_layouts", false);
    r.layout_ms = doc.value("layout_ms", std::map<std::string, double>{});
    if (doc.contains("region_threshold") && !doc["region_threshold"].is_null()) {
      const double t = doc["region_threshold"].get<double>();
      if (!(t >= 0.0 && t <= 1.0)) return Status::user_error(str_cat(source, ": region_threshold must be in [0, 1]"));
      r.region_threshold = t;
    }
    r.kernels = doc.value("kernels", std::map<std::string, std::string>{});
    r.epilogues = doc.value("epilogues", std::map<std::string, std::string>{});
    for (const auto& [node, place] : r.epilogues) {
      if (place != "library" && place != "own_pass") {
        return Status::user_error(str_cat(source, ": epilogue of '", node, "' is '", place,
                                          "' (valid: library, own_pass)"));
      }
    }
    r.measurements = doc.value("measurements", std::vector<std::string>{});
  } catch (const json::exception& e) {
    return Status::user_error(str_cat(source, ": ", e.what()));
  }
  return r;
}

Result<TuningRecord> load_tuning_record(const std::string& path) {
  OPFUSE_ASSIGN_OR_RETURN(std::string text, read_file(path, "tuning record"));
  return parse_tuning_record(text, str_cat("tuning record '", path, "'"));
}

Status check_tuning_record(const TuningRecord& record, const Graph& graph, const Target& target) {
  const std::string digest = model_digest(graph);
  if (record.model_digest != digest) {
    return Status::user_error(str_cat(record.source, " was made for another model (digest ", record.model_digest,
                                      ", this model's is ", digest, "); run 'opfuse tune' on this model"));
  }
  if (record.target != isa_tier_name(target.isa)) {
    return Status::user_error(str_cat(record.source, " was measured for target ", record.target, ", not ",
                                      isa_tier_name(target.isa), "; run 'opfuse tune MODEL --target ",
                                      isa_tier_name(target.isa), "' or pass --target ", record.target));
  }
  return Status::ok();
}

}  // namespace opfuse
