#include "kernels/packed_weight_cache.h"

#include <algorithm>
#include <vector>

#include "core/digest.h"
#include "core/status.h"

namespace opfuse {

namespace {
thread_local PackedWeightCache* current_cache = nullptr;
}  // namespace

// Digests of large weights are taken in chunks on every thread: the first compile reads each
// weight from memory here before packing it (BERT-base: 340 MB, which one core digested in
// 4.8% of its load and compile on a Zen 4).
constexpr size_t kDigestChunk = size_t{1} << 20;

std::string PackedWeightCache::key_of(const void* data, size_t size, const std::string& how) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  const int64_t chunks = static_cast<int64_t>((size + kDigestChunk - 1) / kDigestChunk);
  std::vector<uint64_t> digests(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const size_t at = static_cast<size_t>(c) * kDigestChunk;
    digests[static_cast<size_t>(c)] = digest_bytes(bytes + at, std::min(kDigestChunk, size - at));
  }
  return str_cat(how, "|", size, "|", digest_bytes(digests.data(), digests.size() * sizeof(uint64_t)));
}

std::shared_ptr<const void> PackedWeightCache::find(const std::string& key) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  ++reused_;
  return it->second;
}

std::shared_ptr<const void> PackedWeightCache::insert(const std::string& key, std::shared_ptr<const void> packed) {
  std::lock_guard lock(mutex_);
  return entries_.try_emplace(key, std::move(packed)).first->second;
}

int PackedWeightCache::reused() const {
  std::lock_guard lock(mutex_);
  return reused_;
}

size_t PackedWeightCache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

ScopedPackedWeightCache::ScopedPackedWeightCache(PackedWeightCache* cache) : saved_(current_cache) {
  current_cache = cache;
}

ScopedPackedWeightCache::~ScopedPackedWeightCache() { current_cache = saved_; }

PackedWeightCache* current_packed_weight_cache() { return current_cache; }

}  // namespace opfuse
