#include "report/profiler.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

namespace opfuse {
namespace {

int64_t output_bytes(const Node& node) {
  int64_t total = 0;
  for (const Value* out : node.outputs()) {
    if (out == nullptr || !out->shape) continue;
    auto dims = static_dims(*out->shape);
    if (!dims) continue;
    int64_t n = static_cast<int64_t>(dtype_size(out->dtype));
    for (int64_t d : *dims) n *= d;
    total += n;
  }
  return total;
}

}  // namespace

std::vector<KernelRow> Profile::table() const {
  std::map<std::pair<std::string, std::string>, KernelRow> rows;
  double total = 0;
  for (const StepProfile& s : steps) {
    KernelRow& r = rows[{s.op, s.kernel}];
    r.op = s.op;
    r.kernel = s.kernel;
    r.count += runs;
    r.total_us += s.mean_us * runs;
    total += s.mean_us * runs;
  }
  std::vector<KernelRow> out;
  for (auto& [key, r] : rows) {
    r.mean_us = r.count ? r.total_us / static_cast<double>(r.count) : 0;
    r.percent = total > 0 ? 100.0 * r.total_us / total : 0;
    out.push_back(r);
  }
  std::sort(out.begin(), out.end(), [](const KernelRow& a, const KernelRow& b) {
    return a.total_us != b.total_us ? a.total_us > b.total_us : a.op < b.op;
  });
  return out;
}

Result<Profile> profile_plan(const CompiledPlan& plan, const TensorMap& inputs, const ProfileOptions& options,
                             const std::string& label) {
  if (options.runs < 1 || options.warmup < 0) return Status::user_error("profile needs at least one run");
  Profile p;
  p.label = label;
  p.runs = options.runs;
  const size_t n = plan.kernels_per_run();
  p.steps.resize(n);
  for (size_t s = 0; s < n; ++s) {
    const Node& node = plan.step_node(s);
    p.steps[s].node = node.name();
    p.steps[s].op = node.domain().empty() ? node.op_type() : str_cat(node.domain(), "::", node.op_type());
    p.steps[s].kernel = plan.step_kernel_label(s);
    p.steps[s].output_bytes = output_bytes(node);
  }
  std::vector<StepTiming> timings;
  for (int i = 0; i < options.warmup; ++i) OPFUSE_TRY(plan.run(inputs).status());
  std::vector<double> walls, sums;
  for (int i = 0; i < options.runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    OPFUSE_TRY(plan.run_timed(inputs, timings).status());
    walls.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    double sum = 0;
    for (size_t s = 0; s < n; ++s) {
      p.steps[s].mean_us += timings[s].duration_us / options.runs;
      sum += timings[s].duration_us;
    }
    sums.push_back(sum);
  }
  for (size_t s = 0; s < n; ++s) p.steps[s].last_run = {timings[s].start_us, timings[s].duration_us};
  // Medians: a burst of load on a shared machine should not move them.
  std::sort(walls.begin(), walls.end());
  std::sort(sums.begin(), sums.end());
  p.wall_us_per_run = walls[walls.size() / 2];
  p.step_us_per_run = sums[sums.size() / 2];
  double small = 0, total = 0;
  for (const StepProfile& s : p.steps) {
    total += s.mean_us;
    if (s.output_bytes < options.small_op_bytes) {
      small += s.mean_us;
      ++p.small_kernels;
    }
  }
  p.small_op_share = total > 0 ? small / total : 0;
  return p;
}

std::string format_profile(const Profile& p, size_t max_rows) {
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%s: %zu kernels per run, %.3f ms per run, %.3f ms in kernels (medians of %d runs)\n",
                p.label.c_str(), p.steps.size(), p.wall_us_per_run / 1e3, p.step_us_per_run / 1e3, p.runs);
  out += buf;
  out += "  op                         kernel                      count    total ms   mean us   % run\n";
  const auto rows = p.table();
  for (size_t i = 0; i < rows.size() && i < max_rows; ++i) {
    const KernelRow& r = rows[i];
    std::snprintf(buf, sizeof(buf), "  %-26s %-26s %6" PRId64 " %11.3f %9.1f %7.1f\n", r.op.c_str(), r.kernel.c_str(),
                  r.count, r.total_us / 1e3, r.mean_us, r.percent);
    out += buf;
  }
  if (rows.size() > max_rows) out += str_cat("  ... ", rows.size() - max_rows, " more\n");
  return out;
}

std::string chrome_trace_json(const std::vector<Profile>& profiles) {
  using nlohmann::json;
  json events = json::array();
  for (size_t i = 0; i < profiles.size(); ++i) {
    const Profile& p = profiles[i];
    const int pid = static_cast<int>(i) + 1;
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 1},
                      {"args", {{"name", str_cat("opfuse ", p.label)}}}});
    for (const StepProfile& s : p.steps) {
      if (s.last_run.size() != 2) continue;
      events.push_back({{"name", s.node},
                        {"cat", s.op},
                        {"ph", "X"},
                        {"pid", pid},
                        {"tid", 1},
                        {"ts", s.last_run[0]},
                        {"dur", s.last_run[1]},
                        {"args", {{"op", s.op}, {"kernel", s.kernel}, {"output_bytes", s.output_bytes},
                                  {"mean_us", s.mean_us}}}});
    }
  }
  json trace = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  return trace.dump(1) + "\n";
}

}  // namespace opfuse
