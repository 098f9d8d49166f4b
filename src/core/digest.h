// FNV-1a over 8-byte words (then the tail bytes): a model's weights (hundreds of MB) hash in
// tens of milliseconds. For telling whether bytes changed, not against an adversary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace opfuse {

struct Fnv1a {
  uint64_t h = 14695981039346656037ull;
  void add(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t word;
      std::memcpy(&word, p + i, 8);
      h = (h ^ word) * 1099511628211ull;
    }
    for (; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
};

}  // namespace opfuse
