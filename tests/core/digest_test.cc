// digest_bytes tells changed bytes apart: what a session relies on to refuse a model file
// rewritten under it.
#include "core/digest.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace opfuse {
namespace {

std::vector<unsigned char> pattern(size_t n) {
  std::vector<unsigned char> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>((i * 167 + 13) % 256);
  return bytes;
}

TEST(DigestBytes, AnyOneByteChangedChangesTheDigest) {
  std::vector<unsigned char> bytes = pattern(1000);  // 31 blocks of 32 bytes and a tail of 8
  const uint64_t original = digest_bytes(bytes.data(), bytes.size());
  EXPECT_EQ(digest_bytes(bytes.data(), bytes.size()), original);
  std::set<uint64_t> seen{original};
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] ^= 1;
    EXPECT_TRUE(seen.insert(digest_bytes(bytes.data(), bytes.size())).second) << "byte " << i;
    bytes[i] ^= 1;
  }
}

TEST(DigestBytes, WordsSwappedBetweenLanesOrLengthsDiffer) {
  std::vector<unsigned char> bytes = pattern(64);
  const uint64_t original = digest_bytes(bytes.data(), bytes.size());
  std::swap_ranges(bytes.begin(), bytes.begin() + 8, bytes.begin() + 8);  // lane 0 and lane 1 of a block
  EXPECT_NE(digest_bytes(bytes.data(), bytes.size()), original);
  const std::vector<unsigned char> zeros(64, 0);
  EXPECT_NE(digest_bytes(zeros.data(), 32), digest_bytes(zeros.data(), 64)) << "zeros of another length";
  EXPECT_NE(digest_bytes(zeros.data(), 0), digest_bytes(zeros.data(), 1));
}

}  // namespace
}  // namespace opfuse
