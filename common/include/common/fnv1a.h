// FNV-1a, 64 bits: unlike std::hash or absl::Hash, the same in every process, build and
// language (a dozen lines in Python or Go). Request fingerprints and shard numbers use it.
#pragma once

#include <cstdint>
#include <string_view>

namespace feed {

class Fnv1a64 {
 public:
  // FNV's 64-bit offset basis (Go's hash/fnv.New64a starts from it too).
  static constexpr uint64_t kOffsetBasis = 14695981039346656037ULL;

  explicit Fnv1a64(uint64_t basis = kOffsetBasis) : hash_(basis) {}

  Fnv1a64& Update(std::string_view bytes) {
    for (unsigned char c : bytes) {
      hash_ ^= c;
      hash_ *= 1099511628211ULL;
    }
    return *this;
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_;
};

inline uint64_t Fnv1a64Of(std::string_view bytes) { return Fnv1a64().Update(bytes).value(); }

}  // namespace feed
