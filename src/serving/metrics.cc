#include "serving/metrics.h"

#include <sstream>

#include "core/status.h"

namespace opfuse::serving {
namespace {

// Label values escape backslash, quote and newline (the text format's rule).
std::string label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

void Metrics::record_request(const std::string& model, const std::string& version, int status, double seconds) {
  std::lock_guard lock(mutex_);
  PerModel& m = models_[{model, version}];
  ++m.requests;
  if (status >= 400) ++m.failures[status];
  size_t b = 0;
  while (b < kBuckets.size() && seconds > kBuckets[b]) ++b;
  if (b < kBuckets.size()) ++m.buckets[b];
  ++m.count;
  m.sum += seconds;
}

void Metrics::record_refusal(int status) {
  std::lock_guard lock(mutex_);
  ++refusals_[status];
}

std::string Metrics::prometheus_text(const std::vector<ModelGauges>& gauges) const {
  std::lock_guard lock(mutex_);
  std::ostringstream out;
  auto labels = [](const std::string& model, const std::string& version) {
    return str_cat("model=\"", label(model), "\",version=\"", label(version), "\"");
  };
  out << "# HELP opfuse_requests_total Inference requests received, per model version.\n"
      << "# TYPE opfuse_requests_total counter\n";
  for (const auto& [key, m] : models_) out << "opfuse_requests_total{" << labels(key.first, key.second) << "} " << m.requests << "\n";
  out << "# HELP opfuse_request_failures_total Inference requests answered with an error, by HTTP status.\n"
      << "# TYPE opfuse_request_failures_total counter\n";
  for (const auto& [key, m] : models_) {
    for (const auto& [status, n] : m.failures) {
      out << "opfuse_request_failures_total{" << labels(key.first, key.second) << ",code=\"" << status << "\"} " << n << "\n";
    }
  }
  out << "# HELP opfuse_request_duration_seconds Time from receiving an inference request to its answer.\n"
      << "# TYPE opfuse_request_duration_seconds histogram\n";
  for (const auto& [key, m] : models_) {
    int64_t cumulative = 0;
    for (size_t b = 0; b < kBuckets.size(); ++b) {
      cumulative += m.buckets[b];
      out << "opfuse_request_duration_seconds_bucket{" << labels(key.first, key.second) << ",le=\"" << kBuckets[b]
          << "\"} " << cumulative << "\n";
    }
    out << "opfuse_request_duration_seconds_bucket{" << labels(key.first, key.second) << ",le=\"+Inf\"} " << m.count << "\n"
        << "opfuse_request_duration_seconds_sum{" << labels(key.first, key.second) << "} " << m.sum << "\n"
        << "opfuse_request_duration_seconds_count{" << labels(key.first, key.second) << "} " << m.count << "\n";
  }
  // One series per loaded model version for each gauge read at scrape time.
  auto per_version = [&](const char* name, const char* type, const char* help, auto value) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
    for (const auto& g : gauges) out << name << "{" << labels(g.model, g.version) << "} " << value(g) << "\n";
  };
  per_version("opfuse_queue_depth", "gauge", "Requests waiting for a worker, per model version.",
              [](const ModelGauges& g) { return g.queue_depth; });
  per_version("opfuse_requests_in_flight", "gauge", "Inference requests waiting or running, per model version.",
              [](const ModelGauges& g) { return g.in_flight; });
  per_version("opfuse_compiles_total", "counter", "Plans compiled (one per input shape), per model version.",
              [](const ModelGauges& g) { return g.compiles; });
  per_version("opfuse_plans_cached", "gauge", "Compiled plans held now, per model version.",
              [](const ModelGauges& g) { return g.plans_cached; });
  out << "# HELP opfuse_refused_requests_total Requests refused before reaching a model, by HTTP status.\n"
      << "# TYPE opfuse_refused_requests_total counter\n";
  for (const auto& [status, n] : refusals_) out << "opfuse_refused_requests_total{code=\"" << status << "\"} " << n << "\n";
  return out.str();
}

}  // namespace opfuse::serving
