// What `GET /metrics` shows, in Prometheus' text format: per model version, the requests, their
// failures by HTTP status, a latency histogram, the queue depth, the requests in flight and the
// plans compiled; and the
// requests the server refused before they reached a model (unknown model, malformed URL ...).
#pragma once

#include <array>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace opfuse::serving {

class Metrics {
 public:
  // Latency histogram bucket bounds, in seconds.
  static constexpr std::array<double, 14> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                       0.25,  0.5,    1,     2.5,  5,     10,  30};

  // One inference request to `model`/`version` answered with `status` after `seconds`.
  void record_request(const std::string& model, const std::string& version, int status, double seconds);
  // A request refused before any model was involved.
  void record_refusal(int status);

  // Gauges read when scraped: the queue depth and compile count of each loaded version.
  struct ModelGauges {
    std::string model, version;
    size_t queue_depth = 0;
    int in_flight = 0;
    int64_t compiles = 0;
    size_t plans_cached = 0;
  };
  std::string prometheus_text(const std::vector<ModelGauges>& gauges) const;

 private:
  struct PerModel {
    int64_t requests = 0;
    std::map<int, int64_t> failures;  // by HTTP status
    std::array<int64_t, kBuckets.size()> buckets{};  // non-cumulative counts
    int64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, PerModel> models_;
  std::map<int, int64_t> refusals_;
};

}  // namespace opfuse::serving
