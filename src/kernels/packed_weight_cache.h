// Weights packed once per session. A session compiles a plan per input shape it meets (and one
// for inputs holding NaN or Inf), and each plan's kernels pack the same constant weights into
// the same layouts. While a ScopedPackedWeightCache is alive, the kernels created on its thread
// look each packing up in the cache and share the one made before instead of making another:
// the plans hold one copy between them, and later compiles skip the packing (and the page
// faults of its fresh memory). Packers: onednn::pack (every oneDNN kernel's constant operands)
// and pack_aligned (kernels/cpu/packed_floats.h: cpu.gemm, cpu.gemv, cpu.conv, cpu.winograd,
// cpu.dwconv, cpu.gemm_i16, cpu.conv_i16, cpu.rnn: a plan per sequence length packs nothing
// again).
//
// A packing is found by the digest of its source bytes (core/digest.h) and a description of
// how it is packed (every parameter the packed bytes depend on). The digest is not
// cryptographic, so two different weights could be made to collide; the cache is per session,
// so only a model's own weights can meet in it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace opfuse {

class PackedWeightCache {
 public:
  // The packing of the `size` bytes at `data` described by `how` (which names the packer, so a
  // packing is only ever read back as the type it was made as): the one in the cache, else the
  // result of `make`, kept for later lookups.
  template <typename T>
  std::shared_ptr<const T> get(const void* data, size_t size, const std::string& how,
                               const std::function<std::shared_ptr<const T>()>& make) {
    const std::string key = key_of(data, size, how);
    if (auto found = find(key)) return std::static_pointer_cast<const T>(found);
    std::shared_ptr<const T> made = make();
    return std::static_pointer_cast<const T>(insert(key, made));
  }

  // Lookups answered from the cache.
  int reused() const;
  // Packings held.
  size_t size() const;

 private:
  static std::string key_of(const void* data, size_t size, const std::string& how);
  std::shared_ptr<const void> find(const std::string& key);
  // The entry under `key`: `packed`, or the one another thread inserted first.
  std::shared_ptr<const void> insert(const std::string& key, std::shared_ptr<const void> packed);

  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const void>> entries_;
  int reused_ = 0;
};

// Makes `cache` the one kernels created on this thread pack through, for a scope (null: none;
// the previous one is restored after).
class ScopedPackedWeightCache {
 public:
  explicit ScopedPackedWeightCache(PackedWeightCache* cache);
  ~ScopedPackedWeightCache();
  ScopedPackedWeightCache(const ScopedPackedWeightCache&) = delete;
  ScopedPackedWeightCache& operator=(const ScopedPackedWeightCache&) = delete;

 private:
  PackedWeightCache* saved_;
};

// The cache of the current scope on this thread, or null.
PackedWeightCache* current_packed_weight_cache();

// `make()` through the current cache, or simply `make()` outside any scope.
template <typename T>
std::shared_ptr<const T> packed_once(const void* data, size_t size, const std::string& how,
                                     const std::function<std::shared_ptr<const T>()>& make) {
  PackedWeightCache* cache = current_packed_weight_cache();
  return cache != nullptr ? cache->get<T>(data, size, how, make) : make();
}

}  // namespace opfuse
