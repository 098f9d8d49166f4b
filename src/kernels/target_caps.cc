#include "kernels/target_caps.h"

#include <hwy/highway.h>
#include <hwy/targets.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <mutex>
#include <optional>

namespace opfuse {
namespace {

dnnl::cpu_isa dnnl_isa(IsaTier tier) {
  switch (tier) {
    case IsaTier::kSse41: return dnnl::cpu_isa::sse41;
    case IsaTier::kAvx2: return dnnl::cpu_isa::avx2;
    case IsaTier::kAvx512Core: return dnnl::cpu_isa::avx512_core;
    case IsaTier::kAvx512CoreVnni: return dnnl::cpu_isa::avx512_core_vnni;
    case IsaTier::kAvx512CoreBf16: return dnnl::cpu_isa::avx512_core_bf16;
    case IsaTier::kAvx512CoreAmx: return dnnl::cpu_isa::avx512_core_amx;
  }
  return dnnl::cpu_isa::all;
}

// Highway targets above `tier` (x86 only; a Highway target's bit is smaller the better it is).
int64_t highway_targets_above(IsaTier tier) {
  int64_t above = 0;
  if (tier < IsaTier::kAvx512Core) above |= HWY_AVX3 | HWY_AVX3_DL;
#ifdef HWY_AVX3_ZEN4
  if (tier < IsaTier::kAvx512Core) above |= HWY_AVX3_ZEN4;
#endif
  if (tier < IsaTier::kAvx2) above |= HWY_AVX2;
  return above;
}

// The tier the libraries were capped to, once they were.
struct AppliedCaps {
  std::mutex mutex;
  std::optional<IsaTier> tier;
};
AppliedCaps& caps() {
  static AppliedCaps c;
  return c;
}

// Caller holds caps().mutex.
Status apply_locked(const Target& target) {
  std::optional<IsaTier>& applied = caps().tier;
  if (applied) {
    if (*applied == target.isa) return Status::ok();
    return Status::user_error(str_cat("the target is chosen once per process and is already ",
                                      isa_tier_name(*applied), "; cannot switch to ", isa_tier_name(target.isa)));
  }
  // Native needs no cap; oneDNN then reads its own environment variables as usual.
  if (target.isa != host_target().isa) {
    try {
      dnnl::set_max_cpu_isa(dnnl_isa(target.isa));
    } catch (const dnnl::error& e) {
      return Status::internal_error(str_cat("oneDNN refused the ISA cap ", isa_tier_name(target.isa), ": ", e.what()));
    }
  }
  hwy::DisableTargets(highway_targets_above(target.isa));
  set_active_target(target);
  applied = target.isa;
  return Status::ok();
}

}  // namespace

Result<Target> select_target(std::string_view name) {
  OPFUSE_ASSIGN_OR_RETURN(Target target, target_for(name));
  std::lock_guard lock(caps().mutex);
  OPFUSE_TRY(apply_locked(target));
  return target;
}

void apply_target_caps() {
  std::lock_guard lock(caps().mutex);
  if (caps().tier) return;
  // The active target comes from the host capped by the environment; target_for already
  // refused tiers the host lacks, so oneDNN accepts it.
  (void)apply_locked(active_target());
}

std::string_view highway_dispatch_target() {
  // Best first: what HWY_DYNAMIC_DISPATCH picks among the targets the kernels were compiled for.
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  // Highway 1.0.3's SupportedTargets() re-detects the CPU and points dynamic dispatch at every
  // target it has, DisableTargets' mask not applied; its return value is masked. Point dispatch
  // back at the capped set, or asking would undo the cap.
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  return targets.empty() ? "none" : hwy::TargetName(targets.front());
}

}  // namespace opfuse
