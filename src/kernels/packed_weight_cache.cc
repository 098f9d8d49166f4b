#include "kernels/packed_weight_cache.h"

#include "core/digest.h"
#include "core/status.h"

namespace opfuse {

namespace {
thread_local PackedWeightCache* current_cache = nullptr;
}  // namespace

std::string PackedWeightCache::key_of(const void* data, size_t size, const std::string& how) {
  return str_cat(how, "|", size, "|", digest_bytes(data, size));
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
