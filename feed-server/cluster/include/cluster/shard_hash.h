// Which shard a SKU lives on in cluster mode: FNV-1a (64 bits) of the SKU's UTF-8 bytes,
// modulo the shard count fixed at cluster creation. The same in every build and language, so
// clients route by it too (docs/CLUSTER.md).
#pragma once

#include <cstdint>
#include <string_view>

#include "common/fnv1a.h"

namespace feed::cluster {

// shard_count > 0.
inline uint32_t ShardOf(std::string_view sku, uint32_t shard_count) {
  return static_cast<uint32_t>(Fnv1a64Of(sku) % shard_count);
}

}  // namespace feed::cluster
