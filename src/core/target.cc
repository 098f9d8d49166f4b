#include "core/target.h"

#include <cpuid.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <vector>

#include "core/core_distance.h"

namespace opfuse {
namespace {

// AMX tiles: cpuid leaf 7 EDX bit 24, and the OS saving the tile state (XCR0 bits 17 and 18).
// By hand because clang 14's __builtin_cpu_supports knows no "amx-tile".
bool has_amx_tiles() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 24))) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));  // OSXSAVE is implied by AVX-512
  constexpr unsigned kTileState = (1u << 17) | (1u << 18);
  return (xcr0_lo & kTileState) == kTileState;
}

IsaTier detect_isa() {
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the OS saves the vector state (XCR0).
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (avx512) {
    if (!__builtin_cpu_supports("avx512vnni")) return IsaTier::kAvx512Core;
    if (!__builtin_cpu_supports("avx512bf16")) return IsaTier::kAvx512CoreVnni;
    return has_amx_tiles() ? IsaTier::kAvx512CoreAmx : IsaTier::kAvx512CoreBf16;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return IsaTier::kAvx2;
  return IsaTier::kSse41;
}

int64_t sysconf_bytes(int name) {
  const long v = sysconf(name);
  return v > 0 ? v : 0;
}

// The first line of a small text file, "" when it cannot be read.
std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// "32K", "1M", "32768K" or a plain byte count (sysfs's cache sizes); 0 when malformed.
int64_t parse_cache_size(const std::string& text) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || v <= 0) return 0;
  const std::string unit(end);
  if (unit.empty()) return v;
  if (unit == "K") return v << 10;
  if (unit == "M") return v << 20;
  return 0;
}

// Below this a round trip counts as near: between the 59-82 ns of one Zen 4 CCD and the
// 427-501 ns across Zen 5 CCDs, with room for a noisy host on either side.
constexpr double kNearCoresNs = 200;

// The fastest of a few rounds of bounces between the first two CPUs this process may run on; a
// descheduled vCPU only ever slows a round, so the fastest is the distance. 0 with one CPU or when
// no round finished within its deadline. OPFUSE_CORE_ROUND_TRIP_NS overrides it (a far host's
// behaviour reproduced on a near one, or a pinned figure for reproducible compiles).
double detect_core_round_trip_ns() {
  if (const char* forced = std::getenv("OPFUSE_CORE_ROUND_TRIP_NS"); forced != nullptr && *forced != '\0') {
    char* end = nullptr;
    const double ns = std::strtod(forced, &end);
    if (*end == '\0' && ns >= 0) return ns;
    std::fprintf(stderr, "opfuse: ignoring OPFUSE_CORE_ROUND_TRIP_NS=%s: not a number of nanoseconds\n", forced);
  }
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.size() < 2) return 0;
  constexpr int kRounds = 5;
  constexpr int kBounces = 1000;      // 0.1-0.5 ms a round
  constexpr double kDeadlineMs = 20;  // rounds left unfinished by then were descheduled
  const std::vector<double> ns = core_round_trips_ns(cpus[0], cpus[1], kRounds, kBounces, kDeadlineMs);
  return ns.empty() ? 0 : *std::min_element(ns.begin(), ns.end());
}

std::string bytes_text(int64_t b) {
  if (b <= 0) return "unknown";
  if (b % (1 << 20) == 0) return str_cat(b >> 20, " MiB");
  return str_cat(b >> 10, " KiB");
}

// The active target, once set or read from the environment.
struct ActiveTarget {
  std::mutex mutex;
  std::optional<Target> target;
};
ActiveTarget& active() {
  static ActiveTarget a;
  return a;
}

Target target_from_environment() {
  for (const char* var : {"OPFUSE_TARGET", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    const char* value = std::getenv(var);
    if (value == nullptr || *value == '\0') continue;
    // oneDNN's own variable also accepts "ALL" (no cap).
    if (std::string_view(var) != "OPFUSE_TARGET" && parse_isa_tier(value) == std::nullopt) continue;
    auto t = target_for(value);
    if (t.is_ok()) return *t;
    std::fprintf(stderr, "opfuse: ignoring %s: %s\n", var, t.status().message().c_str());
  }
  return host_target();
}

}  // namespace

std::string_view isa_tier_name(IsaTier tier) {
  switch (tier) {
    case IsaTier::kSse41: return "sse41";
    case IsaTier::kAvx2: return "avx2";
    case IsaTier::kAvx512Core: return "avx512_core";
    case IsaTier::kAvx512CoreVnni: return "avx512_core_vnni";
    case IsaTier::kAvx512CoreBf16: return "avx512_core_bf16";
    case IsaTier::kAvx512CoreAmx: return "avx512_core_amx";
  }
  return "?";
}

std::optional<IsaTier> parse_isa_tier(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (IsaTier t : all_isa_tiers()) {
    if (lower == isa_tier_name(t)) return t;
  }
  return std::nullopt;
}

const std::vector<IsaTier>& all_isa_tiers() {
  static const std::vector<IsaTier> tiers = {IsaTier::kSse41, IsaTier::kAvx2, IsaTier::kAvx512Core,
                                             IsaTier::kAvx512CoreVnni, IsaTier::kAvx512CoreBf16,
                                             IsaTier::kAvx512CoreAmx};
  return tiers;
}

int Target::vector_bytes() const { return has_avx512() ? 64 : isa == IsaTier::kAvx2 ? 32 : 16; }

int64_t Target::channel_block() const { return has_avx512() ? 16 : 8; }

bool Target::near_cores() const { return core_round_trip_ns > 0 && core_round_trip_ns < kNearCoresNs; }

std::string Target::describe() const {
  return str_cat(isa_tier_name(isa), " (", vector_bytes(), "-byte vectors), ", cores, cores == 1 ? " core" : " cores",
                 ", L1d ", bytes_text(l1d_bytes), ", L2 ", bytes_text(l2_bytes), ", L3 ", bytes_text(l3_bytes));
}

std::string Target::describe_core_distance() const {
  if (core_round_trip_ns <= 0) return cores == 1 ? "one CPU" : "cores' distance not measured";
  return str_cat("cores ", static_cast<int64_t>(core_round_trip_ns + 0.5), " ns apart (", near_cores() ? "near" : "far",
                 ")");
}

int64_t cache_bytes_from_sysfs(const std::string& dir, int level) {
  for (int i = 0; i < 16; ++i) {
    const std::string index = str_cat(dir, "/index", i, "/");
    const std::string l = first_line(index + "level");
    if (l.empty()) break;
    const std::string type = first_line(index + "type");
    if (l == std::to_string(level) && (type == "Data" || type == "Unified")) {
      return parse_cache_size(first_line(index + "size"));
    }
  }
  return 0;
}

const Target& host_target() {
  static const Target host = [] {
    Target t;
    t.isa = detect_isa();
    t.cores = static_cast<int>(std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN)));
    // The kernel's own description first: glibc's sysconf reports 256 MiB of L3 on a Zen 3 VM
    // whose sysfs (and lscpu) say 32 MiB.
    const std::string cpu0 = "/sys/devices/system/cpu/cpu0/cache";
    const auto cache = [&](int level, int name) {
      const int64_t b = cache_bytes_from_sysfs(cpu0, level);
      return b > 0 ? b : sysconf_bytes(name);
    };
    t.l1d_bytes = cache(1, _SC_LEVEL1_DCACHE_SIZE);
    t.l2_bytes = cache(2, _SC_LEVEL2_CACHE_SIZE);
    t.l3_bytes = cache(3, _SC_LEVEL3_CACHE_SIZE);
    t.core_round_trip_ns = detect_core_round_trip_ns();
    return t;
  }();
  return host;
}

Result<Target> target_for(std::string_view name) {
  Target t = host_target();
  if (name == "native" || name.empty()) return t;
  const auto tier = parse_isa_tier(name);
  if (!tier) {
    std::string known = "native";
    for (IsaTier k : all_isa_tiers()) known += str_cat(", ", isa_tier_name(k));
    return Status::user_error(str_cat("unknown target '", name, "' (known: ", known, ")"));
  }
  if (*tier > t.isa) {
    return Status::user_error(str_cat("target '", name, "' needs instructions this CPU lacks (it is ",
                                      isa_tier_name(t.isa), ")"));
  }
  t.isa = *tier;
  return t;
}

Target active_target() {
  ActiveTarget& a = active();
  std::lock_guard lock(a.mutex);
  if (!a.target) a.target = target_from_environment();
  return *a.target;
}

void set_active_target(const Target& target) {
  ActiveTarget& a = active();
  std::lock_guard lock(a.mutex);
  a.target = target;
}

}  // namespace opfuse
