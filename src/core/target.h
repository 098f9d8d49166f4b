// The CPU a compile is for: ISA tier, vector width, cores and caches. Detected once from the
// host and optionally capped to a lower tier (`--target avx2`, SessionOptions::target, or the
// OPFUSE_TARGET / ONEDNN_MAX_CPU_ISA environment variables), so one machine can compile, test
// and benchmark for a lesser one. Every ISA-dependent decision reads the active Target; nothing
// else asks the CPU. The oneDNN and Highway caps that make kernels obey it are applied by the
// kernel layer (kernels/target_caps.h), since the core links neither library.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace opfuse {

// Ordered: a higher tier runs everything a lower one does. Names are oneDNN's (dnnl::cpu_isa).
enum class IsaTier : int {
  kSse41 = 0,
  kAvx2,
  kAvx512Core,      // AVX-512 F/BW/VL/DQ
  kAvx512CoreVnni,  // + VNNI
  kAvx512CoreBf16,  // + BF16
  kAvx512CoreAmx,   // + AMX tiles
};

std::string_view isa_tier_name(IsaTier tier);  // "avx2"
// A tier by name, any case ("AVX2" as oneDNN's environment spells it); nullopt if unknown.
std::optional<IsaTier> parse_isa_tier(std::string_view name);
// Every tier, lowest first (for --help and error messages).
const std::vector<IsaTier>& all_isa_tiers();

struct Target {
  IsaTier isa = IsaTier::kSse41;
  int cores = 1;          // logical CPUs this process may run on
  int64_t l1d_bytes = 0;  // per core; 0: unknown
  int64_t l2_bytes = 0;   // per core; 0: unknown
  int64_t l3_bytes = 0;   // the L3 cpu0 shares with others; 0: unknown
  // A cache line's round trip between the first two CPUs this process may run on (ns; 0: one CPU,
  // or not measured). Measured at detection (core/core_distance.h), or OPFUSE_CORE_ROUND_TRIP_NS.
  double core_round_trip_ns = 0;

  // Bytes of one f32 vector register the tier computes with (16, 32 or 64).
  int vector_bytes() const;
  // Channels per block of the blocked activation layout (nChw<b>c) whose direct convolution,
  // pooling and binary kernels oneDNN 2.6 has at this tier: 16 with AVX-512; on AVX2 and
  // SSE4.1 only nChw8c has them (nChw16c falls to reference loops there).
  int64_t channel_block() const;
  bool has_avx512() const { return isa >= IsaTier::kAvx512Core; }
  // Whether this process's cores hand data to each other cheaply: a round trip under 200 ns (one
  // CCD or die: 59-82 ns on a Zen 4 guest, against 427-501 ns between the CCDs of Zen 5 guests).
  // Waking a second core then pays for kernels a few times smaller (threads_for_work).
  bool near_cores() const;
  // "avx2 (32-byte vectors), 2 cores, L1d 32 KiB, L2 512 KiB, L3 32 MiB": what is the same in
  // every process on this machine (reports compare equal across runs).
  std::string describe() const;
  // "cores 76 ns apart (near)", "cores 470 ns apart (far)", "one CPU": a measurement, which a
  // guest whose vCPUs move between CCDs reads differently from one process to the next.
  std::string describe_core_distance() const;
};

// The host CPU, detected once (cpuid for the ISA, sysfs for caches, sysconf for cores and for
// caches sysfs does not describe, a few thousand cache-line round trips for the cores' distance:
// about a millisecond).
const Target& host_target();

// Bytes of the data (or unified) cache of `level` described under `dir`, a CPU's sysfs cache
// folder (/sys/devices/system/cpu/cpu0/cache: index<i>/{level,type,size}); 0 when none is.
int64_t cache_bytes_from_sysfs(const std::string& dir, int level);

// The host target capped at `name` ("native", or a tier name from all_isa_tiers()). A tier the
// host does not have is a user error naming both: kernels could not run. (Passes alone may
// compile for any tier: set PassContext::target's isa directly, as the golden tests do.)
Result<Target> target_for(std::string_view name);

// The target compiles use: set by set_active_target, else the host capped by the environment
// (OPFUSE_TARGET, then oneDNN's own ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA, so a user who caps
// oneDNN by hand gets layouts oneDNN has kernels for). An unusable environment value is ignored
// with a warning on stderr (the CLI's --target reports it as an error instead).
Target active_target();
// Replaces the active target. Only the kernel layer calls this (apply_target), together with
// the library caps; see kernels/target_caps.h.
void set_active_target(const Target& target);

}  // namespace opfuse
