// Cache sizes come from the kernel's sysfs description of cpu0's caches; the cores' distance from a cache
// line bounced between two of them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/core_distance.h"
#include "core/target.h"

namespace opfuse {
namespace {

namespace fs = std::filesystem;

// A fake cpu0/cache folder: one index<i> per {level, type, size}.
class FakeSysfsCache {
 public:
  explicit FakeSysfsCache(const std::string& name)
      // The pid: ctest runs each test twice at once (natively and at OPFUSE_TARGET=avx2).
      : dir_(fs::temp_directory_path() / ("opfuse_target_test_" + name + "_" + std::to_string(getpid()))) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~FakeSysfsCache() { fs::remove_all(dir_); }
  void add(int level, const std::string& type, const std::string& size) {
    const fs::path index = dir_ / ("index" + std::to_string(next_++));
    fs::create_directories(index);
    std::ofstream(index / "level") << level << "\n";
    std::ofstream(index / "type") << type << "\n";
    std::ofstream(index / "size") << size << "\n";
  }
  std::string path() const { return dir_.string(); }

 private:
  fs::path dir_;
  int next_ = 0;
};

TEST(TargetCaches, ReadsEachLevelsDataOrUnifiedCacheFromSysfs) {
  // A Zen 3 guest's layout: the instruction cache is listed between L1d and L2.
  FakeSysfsCache cache("zen3");
  cache.add(1, "Data", "32K");
  cache.add(1, "Instruction", "64K");
  cache.add(2, "Unified", "512K");
  cache.add(3, "Unified", "32768K");
  EXPECT_EQ(cache_bytes_from_sysfs(cache.path(), 1), 32 << 10);
  EXPECT_EQ(cache_bytes_from_sysfs(cache.path(), 2), 512 << 10);
  EXPECT_EQ(cache_bytes_from_sysfs(cache.path(), 3), int64_t{32} << 20);
}

TEST(TargetCaches, UnknownWhereSysfsDoesNotDescribeTheCache) {
  FakeSysfsCache cache("partial");
  cache.add(1, "Instruction", "32K");
  cache.add(2, "Unified", "1M");
  cache.add(3, "Unified", "lots");
  EXPECT_EQ(cache_bytes_from_sysfs(cache.path(), 1), 0);  // only an instruction cache
  EXPECT_EQ(cache_bytes_from_sysfs(cache.path(), 2), 1 << 20);
  EXPECT_EQ(cache_bytes_from_sysfs(cache.path(), 3), 0);  // malformed size
  EXPECT_EQ(cache_bytes_from_sysfs((fs::temp_directory_path() / "opfuse_no_such_dir").string(), 2), 0);
}

TEST(TargetCaches, HostCachesAreOrderedWhenKnown) {
  const Target& t = host_target();
  if (t.l1d_bytes > 0 && t.l2_bytes > 0) {
    EXPECT_LT(t.l1d_bytes, t.l2_bytes);
  }
  if (t.l2_bytes > 0 && t.l3_bytes > 0) {
    EXPECT_LT(t.l2_bytes, t.l3_bytes);
  }
}

TEST(TargetCores, NearOnlyUnderTwoHundredNanosecondsMeasured) {
  Target t;
  EXPECT_FALSE(t.near_cores()) << "not measured";
  EXPECT_EQ(t.describe_core_distance(), "one CPU");
  t.core_round_trip_ns = 55;  // one Zen 4 CCD
  EXPECT_TRUE(t.near_cores());
  EXPECT_EQ(t.describe_core_distance(), "cores 55 ns apart (near)");
  EXPECT_EQ(t.describe().find("ns apart"), std::string::npos) << "reports stay the same across runs";
  t.core_round_trip_ns = 199.9;
  EXPECT_TRUE(t.near_cores());
  t.core_round_trip_ns = 200;
  EXPECT_FALSE(t.near_cores());
  t.core_round_trip_ns = 470;  // across Zen 5 CCDs
  EXPECT_FALSE(t.near_cores());
  EXPECT_EQ(t.describe_core_distance(), "cores 470 ns apart (far)");
}

TEST(TargetCores, RoundTripsBetweenTwoCpusArePositiveAndUnmeasurableWherePinningFails) {
  const std::vector<int> cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_TRUE(std::is_sorted(cpus.begin(), cpus.end()));
  // A CPU this process may not run on: no figure at all.
  int outside = 0;
  while (std::find(cpus.begin(), cpus.end(), outside) != cpus.end()) ++outside;
  EXPECT_TRUE(core_round_trips_ns(cpus[0], outside, 3, 100, 1000).empty());
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU";
  // Generous deadline: ctest runs two test processes at once on a 2-CPU machine.
  const std::vector<double> ns = core_round_trips_ns(cpus[0], cpus[1], 3, 100, 30'000);
  ASSERT_EQ(ns.size(), 3u);
  for (double v : ns) {
    EXPECT_GT(v, 0);
    EXPECT_LT(v, 1e7) << "10 ms a round trip";
  }
}

}  // namespace
}  // namespace opfuse
