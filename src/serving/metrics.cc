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
  out << "# HELP opfuse_queue_depth Requests waiting for a worker, per model version.\n"
      << "# TYPE opfuse_queue_depth gauge\n";
  for (const auto& g : gauges) out << "opfuse_queue_depth{" << labels(g.model, g.version) << "} " << g.queue_depth << "\n";
  out << "# HELP opfuse_requests_in_flight Inference requests waiting or running, per model version.\n"
      << "# TYPE opfuse_requests_in_flight gauge\n";
  for (const auto& g : gauges) out << "opfuse_requests_in_flight{" << labels(g.model, g.version) << "} " << g.in_flight << "\n";
  out << "# HELP opfuse_compiles_total Plans compiled (one per input shape), per model version.\n"
      << "# TYPE opfuse_compiles_total counter\n";
  for (const auto& g : gauges) out << "opfuse_compiles_total{" << labels(g.model, g.version) << "} " << g.compiles << "\n";
  out << "# HELP opfuse_plans_cached Compiled plans held now, per model version.\n"
      << "# TYPE opfuse_plans_cached gauge\n";
  for (const auto& g : gauges) out << "opfuse_plans_cached{" << labels(g.model, g.version) << "} " << g.plans_cached << "\n";
  out << "# HELP opfuse_refused_requests_total Requests refused before reaching a model, by HTTP status.\n"
      << "# TYPE opfuse_refused_requests_total counter\n";
  for (const auto& [status, n] : refusals_) out << "opfuse_refused_requests_total{code=\"" << status << "\"} " << n << "\n";
  return out.str();
}

}  // namespace opfuse::serving
