// Where a compiled plan's time goes (`opfuse profile`): every step timed over several runs
// (CompiledPlan::run_timed), a per-kernel table, a Chrome trace (chrome://tracing, Perfetto) and
// the small-op share: the fraction of run time spent in kernels whose output is smaller than a
// threshold. Fusion should shrink it: small elementwise kernels are where per-kernel overhead and
// extra memory passes dominate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/compiled_plan.h"

namespace opfuse {

struct ProfileOptions {
  int warmup = 2;
  int runs = 10;
  int64_t small_op_bytes = 64 * 1024;  // a kernel writing fewer bytes than this is "small"
};

struct StepProfile {
  std::string node;     // node name
  std::string op;       // "Conv", "opfuse::FusedConv"
  std::string kernel;   // "onednn.conv"
  int64_t output_bytes = 0;
  double mean_us = 0;   // over the timed runs
  std::vector<double> last_run;  // start and duration of the last run (for the trace)
};

struct KernelRow {
  std::string op, kernel;
  int64_t count = 0;   // executions over all timed runs
  double total_us = 0;  // over all timed runs
  double mean_us = 0;   // per execution
  double percent = 0;   // of the summed step time
};

struct Profile {
  std::string label;  // "O2"
  int runs = 0;
  std::vector<StepProfile> steps;  // execution order
  double step_us_per_run = 0;      // median over runs of the summed step times
  double wall_us_per_run = 0;      // median wall time of a run (includes binding, output allocation)
  double small_op_share = 0;       // fraction of step time in small kernels
  size_t small_kernels = 0;        // steps counted as small
  std::vector<KernelRow> table() const;  // by (op, kernel), slowest total first
};

Result<Profile> profile_plan(const CompiledPlan& plan, const TensorMap& inputs, const ProfileOptions& options,
                             const std::string& label);

std::string format_profile(const Profile& profile, size_t max_rows = 30);
// One process per profile, one complete event ("ph": "X") per step of each profile's last run.
std::string chrome_trace_json(const std::vector<Profile>& profiles);

}  // namespace opfuse
